"""``db.query`` / ``db.update`` / ``db.transaction``: application SQL as recorded, retryable steps.

Each call is one durable step: inside a run its outcome (rows, count or key, or the error) is
recorded, and a replay after a crash returns the recorded outcome without touching the database.
A step that was in flight at a crash runs again (at least once), so writes should be upserts or
carry their own duplicate check (``INSERT ... ON CONFLICT ... DO UPDATE``).

Retries: a database that cannot be reached (CommunicationError) or that asks for a retry (deadlock,
serialization failure) is retried up to 5 attempts, 1 s, 2 s, 4 s, 8 s apart; an SQL error
(DatabaseError) reaches the workflow at once. A call may set its own schedule with the step's retry
options as keyword arguments (``max_attempts=2``, ...) and its ``on_error`` (``"hold"``,
``"raise"``): the step wrapper takes them out of the call and checks them before anything else
(SqlArgumentError naming the option). Connections are the runtime's shared
:class:`~exchange._integrations.sql.SqlConnections`, built from ``[databases.NAME]``.

Bad arguments reach the workflow at once too, before a connection is opened: a ``dbName`` that is
not a string or names no configured connection (UnknownDatabase lists the configured ones), ``sql``
that is not a non-empty string, ``args`` that are not a list or dict, do not match the placeholders
or hold a value the driver cannot bind, a ``getKey`` that is not a bool. They raise errors that are
both DatabaseError and InvalidArgument (see :mod:`exchange._integrations.sql`).
"""

from __future__ import annotations

from typing import Any, Unpack

from exchange._engine import CALL_OPTION_KEYS, StepCallOptions, StepOptions, library_step
from exchange._integrations.sql import SqlConnections
from exchange.errors import SqlArgumentError
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


@library_step("db.query", DB_STEP_OPTIONS, per_call=CALL_OPTION_KEYS, argument_error=SqlArgumentError)
def query(
    dbName: str,
    sql: str,
    args: Any = None,
    **options: Unpack[StepCallOptions],
) -> list[dict[str, Any]]:
    """Rows of ``sql`` on connection ``dbName`` as JSON-safe dicts; ``args`` a list for ``?``, a dict for ``:name``."""
    return connections().query(dbName, sql, args)


@library_step("db.update", DB_STEP_OPTIONS, per_call=CALL_OPTION_KEYS, argument_error=SqlArgumentError)
def update(
    dbName: str,
    sql: str,
    args: Any = None,
    getKey: bool = False,
    **options: Unpack[StepCallOptions],
) -> Any:
    """Run and commit ``sql``; rows affected, or with ``getKey=True`` the key the INSERT generated."""
    return connections().update(dbName, sql, args, get_key=getKey)


@library_step("db.transaction", DB_STEP_OPTIONS, per_call=CALL_OPTION_KEYS, argument_error=SqlArgumentError)
def transaction(
    dbName: str,
    statements: list[Any],
    **options: Unpack[StepCallOptions],
) -> list[Any]:
    """Run ``[(sql, args), ...]`` in one transaction (all or nothing); one result per statement."""
    return connections().transaction(dbName, statements)
