"""Connection settings of one ``[databases.NAME]`` table and the pooled engine built from them.

Settings (all optional; units in the names)::

    pool_size = 5                  connections kept open
    max_overflow = 5               extra connections under load, closed when returned
    pool_timeout_seconds = 10      wait for a free connection before failing (retryable)
    pool_recycle_seconds = 1800    reopen connections older than this (firewalls drop idle ones)
    connect_timeout_seconds = 5    opening a connection (PostgreSQL connect_timeout, ODBC login timeout)
    statement_timeout_ms = 60000   per statement; 0 disables (PostgreSQL statement_timeout, ODBC query
                                   timeout rounded up to whole seconds; not available on SQLite)
    busy_timeout_ms = 5000         SQLite: wait this long for another writer's lock
    decimal = "float"              NUMERIC/DECIMAL results as float, or "string" for exact text
    get_key = "auto"               how update(getKey=True) finds the key: auto | returning |
                                   lastrowid | scope_identity (auto: PostgreSQL returning, SQL Server
                                   scope_identity, others lastrowid)

Every engine pings a connection before handing it out (``pool_pre_ping``) so a database restart
costs one failed ping, not a failed step.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Engine, create_engine, make_url

from exchange._config import DatabaseConfig
from exchange._integrations import sql_odbc
from exchange._integrations.sql_errors import COMMUNICATION, classify
from exchange._integrations.sql_values import DECIMAL_MODES
from exchange.errors import ConfigError, DatabaseError

log = logging.getLogger(__name__)

KEY_STRATEGIES = ("auto", "returning", "lastrowid", "scope_identity")


@dataclass(frozen=True)
class DatabaseSettings:
    pool_size: int = 5
    max_overflow: int = 5
    pool_timeout_seconds: float = 10.0
    pool_recycle_seconds: float = 1800.0
    connect_timeout_seconds: float = 5.0
    statement_timeout_ms: int = 60_000
    busy_timeout_ms: int = 5_000
    decimal: str = "float"
    get_key: str = "auto"

    @classmethod
    def parse(cls, name: str, settings: Mapping[str, Any]) -> DatabaseSettings:
        """Validate ``settings`` of ``[databases.NAME]``; a ConfigError names the key and value."""
        where = f"databases.{name}"
        known = set(cls.__dataclass_fields__)
        unknown = set(settings) - known
        if unknown:
            raise ConfigError(
                f"{where}: unknown setting(s) {', '.join(sorted(unknown))} (known: url, {', '.join(sorted(known))})"
            )
        defaults = cls()
        values: dict[str, Any] = {}
        for key, value in settings.items():
            default = getattr(defaults, key)
            if isinstance(default, str):
                choices = DECIMAL_MODES if key == "decimal" else KEY_STRATEGIES
                if value not in choices:
                    raise ConfigError(f"{where}.{key} must be one of {', '.join(choices)}, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value >= 0
            ):
                raise ConfigError(f"{where}.{key} must be a non-negative number, got {value!r}")
            elif isinstance(default, int) and not isinstance(value, int):
                raise ConfigError(f"{where}.{key} must be an integer, got {value!r}")
            values[key] = value
        parsed = cls(**values)
        if parsed.pool_size < 1:
            raise ConfigError(f"{where}.pool_size must be at least 1")
        return parsed


def parse_url(config: DatabaseConfig) -> URL:
    try:
        return make_url(config.url)
    except sa_exc.ArgumentError as exc:
        raise ConfigError(f"databases.{config.name}.url is not a database URL: {exc}") from None


def _is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def engine_options(url: URL, settings: DatabaseSettings) -> dict[str, Any]:
    """Keyword arguments for ``create_engine``: pool, pre-ping and per-driver timeouts."""
    backend, driver = url.get_backend_name(), url.get_driver_name()
    options: dict[str, Any] = {"pool_pre_ping": True}
    if not _is_memory_sqlite(url):  # an in-memory database lives in one connection: no pool knobs
        options.update(
            pool_size=settings.pool_size,
            max_overflow=settings.max_overflow,
            pool_timeout=settings.pool_timeout_seconds,
            pool_recycle=settings.pool_recycle_seconds,
        )
    connect_args: dict[str, Any] = {}
    if backend == "sqlite":
        connect_args["timeout"] = settings.busy_timeout_ms / 1000.0
        connect_args["check_same_thread"] = False  # the pool hands connections between worker threads
    elif driver in ("psycopg", "psycopg2"):
        connect_args["connect_timeout"] = max(1, math.ceil(settings.connect_timeout_seconds))
        if settings.statement_timeout_ms:
            option = f"-c statement_timeout={settings.statement_timeout_ms}"
            existing = url.query.get("options")
            connect_args["options"] = f"{existing} {option}" if isinstance(existing, str) else option
    elif driver == "pyodbc":
        connect_args["timeout"] = max(1, math.ceil(settings.connect_timeout_seconds))
    options["connect_args"] = connect_args
    return options


def _install_events(engine: Engine, settings: DatabaseSettings) -> None:
    @event.listens_for(engine, "handle_error")
    def _disconnects(context: Any) -> None:
        # Drivers report lost connections in ways SQLAlchemy does not always recognise (psqlODBC's
        # 57P01, SQLite's unreadable file); marking them makes the pool drop the connection and a
        # pre-ping reconnect instead of failing.
        original = context.original_exception
        if original is not None and not context.is_disconnect and classify(original) == COMMUNICATION:
            context.is_disconnect = True

    if engine.dialect.name == "sqlite":
        # Let SQLite see real BEGIN/COMMIT (the sqlite3 module otherwise starts transactions only
        # before DML, so DDL and reads in transaction() would escape the all-or-nothing guarantee).
        @event.listens_for(engine, "connect")
        def _autocommit_driver(dbapi_connection: Any, record: Any) -> None:
            dbapi_connection.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN")

    if engine.dialect.driver == "pyodbc" and settings.statement_timeout_ms:
        timeout_ms = settings.statement_timeout_ms
        postgres = engine.dialect.name == "postgresql"

        @event.listens_for(engine, "connect")
        def _query_timeout(dbapi_connection: Any, record: Any) -> None:
            if postgres:
                # psqlODBC has no ODBC query timeout; set the server's, committed so it sticks
                cursor = dbapi_connection.cursor()
                cursor.execute(f"SET statement_timeout = {int(timeout_ms)}")
                cursor.close()
                dbapi_connection.commit()
                return
            try:
                dbapi_connection.timeout = max(1, math.ceil(timeout_ms / 1000))
            except Exception as exc:  # a driver without SQL_ATTR_CONNECTION_TIMEOUT: run without one
                log.debug("database driver refuses a query timeout: %s", exc)


def build_engine(config: DatabaseConfig, settings: DatabaseSettings) -> Engine:
    """A pooled engine for ``config``; DatabaseError (fatal) when the dialect or driver is unusable."""
    sql_odbc.register()
    url = parse_url(config)
    try:
        engine = create_engine(url, **engine_options(url, settings))
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ImportError) as exc:
        shown = url.render_as_string(hide_password=True)
        raise DatabaseError(f"database {config.name!r}: cannot use URL {shown}: {exc}") from exc
    _install_events(engine, settings)
    return engine


def key_strategy(settings: DatabaseSettings, dialect: str) -> str:
    """The getKey strategy for a connection (``auto`` resolved by dialect)."""
    if settings.get_key != "auto":
        return settings.get_key
    return {"postgresql": "returning", "mssql": "scope_identity"}.get(dialect, "lastrowid")
