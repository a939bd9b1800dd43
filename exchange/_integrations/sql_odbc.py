"""``postgresql+pyodbc``: PostgreSQL through an ODBC driver (psqlODBC), which SQLAlchemy lacks.

Useful where a site hands out ODBC DSNs only, and it is how the test suite drives the pyodbc path
(the same connector, URL handling and error shapes as ``mssql+pyodbc``) against a real database
without SQL Server. URLs, as for ``mssql+pyodbc``::

    postgresql+pyodbc://user:pw@host:5432/db?driver=PostgreSQL+Unicode
    postgresql+pyodbc:///?odbc_connect=<url-encoded ODBC connection string>
    postgresql+pyodbc://user:pw@MY_DSN

Call :func:`register` once (``exchange._integrations.sql`` does) before creating such an engine.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.connectors.pyodbc import PyODBCConnector
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.engine import URL

_registered = False


class PGDialectPyodbc(PyODBCConnector, PGDialect):
    """PostgreSQL's SQL dialect spoken through pyodbc."""

    supports_statement_cache = True
    pyodbc_driver_name = "PostgreSQL Unicode"

    def create_connect_args(self, url: URL) -> Any:
        # psqlODBC wants Port= as its own key; the shared connector writes SQL Server's "host,port".
        port = url.port
        args, kwargs = super().create_connect_args(url.set(port=None))
        if port is not None and "odbc_connect" not in url.query:
            args = (f"{args[0]};Port={port}",)
        return args, kwargs

    def _get_server_version_info(self, connection: Any) -> Any:
        # the driver's SQL_DBMS_VER is the driver's idea; ask the server like the native dialects
        return PGDialect._get_server_version_info(self, connection)  # type: ignore[no-untyped-call]


def register() -> None:
    """Make ``postgresql+pyodbc`` URLs resolve to :class:`PGDialectPyodbc` (idempotent)."""
    global _registered
    if not _registered:
        registry.register("postgresql.pyodbc", __name__, "PGDialectPyodbc")
        _registered = True
