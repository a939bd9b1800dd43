"""``db.query`` / ``db.update`` / ``db.transaction``: application SQL as recorded, retryable steps.

Each call is one durable step: inside a run its outcome (rows, count or key, or the error) is
recorded, and a replay after a crash returns the recorded outcome without touching the database.
A step that was in flight at a crash runs again (at least once), so writes should be upserts or
carry their own duplicate check (``INSERT ... ON CONFLICT ... DO UPDATE``).

Retries: a database that cannot be reached (CommunicationError) or that asks for a retry (deadlock,
serialization failure) is retried up to 5 attempts, 1 s, 2 s, 4 s, 8 s apart; an SQL error
(DatabaseError) reaches the workflow at once. Connections are the runtime's shared
:class:`~exchange._integrations.sql.SqlConnections`, built from ``[databases.NAME]``.

Bad arguments reach the workflow at once too, before a connection is opened: a ``dbName`` that is
not a string or names no configured connection (UnknownDatabase lists the configured ones), ``sql``
that is not a non-empty string, ``args`` that are not a list or dict, do not match the placeholders
or hold a value the driver cannot bind, a ``getKey`` that is not a bool. They raise errors that are
both DatabaseError and InvalidArgument (see :mod:`exchange._integrations.sql`).
"""

from __future__ import annotations

from typing import Any

from exchange._engine.decorators import step
from exchange._engine.retry import StepOptions
from exchange._integrations.sql import SqlConnections
from exchange.workflows import _services as services

__all__ = ["DB_STEP_OPTIONS", "query", "transaction", "update"]

DB_STEP_OPTIONS: StepOptions = {
    "retries_allowed": True,
    "max_attempts": 5,
    "interval_seconds": 1.0,
    "backoff_rate": 2.0,
}


def connections() -> SqlConnections:
    """The runtime's named connections (created on first use, closed at shutdown)."""
    return services.databases()


@step(name="db.query", options=DB_STEP_OPTIONS)
def query(dbName: str, sql: str, args: Any = None) -> list[dict[str, Any]]:
    """Rows of ``sql`` on connection ``dbName`` as JSON-safe dicts; ``args`` a list for ``?``, a dict for ``:name``."""
    return connections().query(dbName, sql, args)


@step(name="db.update", options=DB_STEP_OPTIONS)
def update(dbName: str, sql: str, args: Any = None, getKey: bool = False) -> Any:
    """Run and commit ``sql``; rows affected, or with ``getKey=True`` the key the INSERT generated."""
    return connections().update(dbName, sql, args, get_key=getKey)


@step(name="db.transaction", options=DB_STEP_OPTIONS)
def transaction(dbName: str, statements: list[Any]) -> list[Any]:
    """Run ``[(sql, args), ...]`` in one transaction (all or nothing); one result per statement."""
    return connections().transaction(dbName, statements)
