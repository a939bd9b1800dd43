"""Which database failures are worth retrying, and their one-line messages.

Classification (first match wins):

* could not reach the database -> :class:`CommunicationError` (retryable): the pool timed out, the
  connection was lost or refused (SQLSTATE class 08, 57P01-57P03 server shutting down or starting,
  HYT01 login timeout, SQLite cannot open/read the file), or any failure while connecting that is
  not a wrong user, password or database name or an ODBC driver manager error.
* transient refusal by a reachable database -> :class:`RetryableError`: deadlock or serialization
  failure (class 40), out of connections or resources (class 53), SQLite busy/locked.
* everything else -> :class:`DatabaseError` (fatal, never retried): syntax, constraint violations,
  missing tables, statement timeouts (SQLSTATE 57014, ODBC HYT00: a statement that was too slow once
  is usually too slow again), authentication (class 28), unknown database (3D), ODBC driver manager
  errors (class IM).

Messages carry the connection name and the database's own first line of text, never the bound
values (they may be secrets or personal data).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import exc as sa_exc

from exchange.errors import CommunicationError, DatabaseError, RetryableError, StepError

COMMUNICATION = "communication"
TRANSIENT = "transient"
FATAL = "fatal"

_COMM_STATES = ("57P01", "57P02", "57P03", "HYT01")
_FATAL_CONNECT_CLASSES = ("28", "3D", "IM")
_LOST_TEXT = (
    "connection has been lost",
    "server closed the connection",
    "could not send data",
    "no connection to the server",
    "connection is closed",
    "communication link failure",
)
# psycopg reports refusals at connect time without an SQLSTATE: recognise the server's words
_FATAL_CONNECT_TEXT = (
    "does not exist",
    "authentication failed",
    "no pg_hba.conf entry",
    "permission denied",
    "login failed",
)
_SQLITE_COMM = ("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_NOTADB")
_SQLITE_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
_EXCERPT_CHARS = 160


def sqlstate_of(orig: BaseException) -> str | None:
    """The SQLSTATE a driver attached to its error (psycopg ``sqlstate``, pyodbc ``args[0]``)."""
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str) and state:
        return state
    args: tuple[Any, ...] = getattr(orig, "args", ())
    if args and isinstance(args[0], str) and len(args[0]) == 5 and len(args) > 1:
        return args[0]
    return None


def message_of(orig: BaseException) -> str:
    """The database's own message, first line only, without the driver's decorations."""
    diag = getattr(orig, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    if isinstance(primary, str) and primary:
        return primary
    args: tuple[Any, ...] = getattr(orig, "args", ())
    text = args[1] if sqlstate_of(orig) and len(args) > 1 and isinstance(args[1], str) else str(orig)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else type(orig).__name__
    state = sqlstate_of(orig)
    if state and first.startswith(f"[{state}]"):
        first = first[len(state) + 2 :].strip()
    return first.rstrip(";").strip()


def _sqlite_kind(orig: sqlite3.Error) -> str | None:
    name = getattr(orig, "sqlite_errorname", "") or ""
    if any(name.startswith(prefix) for prefix in _SQLITE_BUSY):
        return TRANSIENT
    if any(name.startswith(prefix) for prefix in _SQLITE_COMM):
        return COMMUNICATION
    return None


def classify(exc: BaseException, *, connecting: bool = False) -> str:
    """COMMUNICATION, TRANSIENT or FATAL for an SQLAlchemy or driver exception (see module doc)."""
    if isinstance(exc, sa_exc.TimeoutError):  # pool checkout timed out: all connections busy or dead
        return COMMUNICATION
    orig: BaseException = exc
    if isinstance(exc, sa_exc.DBAPIError) and isinstance(exc.orig, BaseException):
        orig = exc.orig
    state = sqlstate_of(orig)
    text = str(orig).lower()
    if connecting and _refused_for_good(state, text):
        return FATAL
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return COMMUNICATION
    if isinstance(orig, sqlite3.Error):
        return _sqlite_kind(orig) or FATAL
    if state:
        if state.startswith("08") or state in _COMM_STATES:
            return COMMUNICATION
        if state[:2] in ("40", "53"):
            return TRANSIENT
    if any(fragment in text for fragment in _LOST_TEXT):
        return COMMUNICATION
    if state is None and type(orig).__name__ in ("OperationalError", "InterfaceError"):
        # psycopg reports refused/lost connections as OperationalError without an SQLSTATE
        return COMMUNICATION
    return COMMUNICATION if connecting and state is None else FATAL


def _refused_for_good(state: str | None, text: str) -> bool:
    """A connection attempt the server answered with a refusal that retrying will not change."""
    if state:
        return state[:2] in _FATAL_CONNECT_CLASSES
    return any(fragment in text for fragment in _FATAL_CONNECT_TEXT)


def excerpt(sql: str) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= _EXCERPT_CHARS else flat[: _EXCERPT_CHARS - 3] + "..."


def translate(
    exc: BaseException,
    connection: str,
    sql: str | None,
    *,
    connecting: bool = False,
    context: str | None = None,
) -> StepError:
    """The Exchange error for ``exc``, naming ``connection`` (raise it ``from exc``).

    ``context`` (e.g. "statement 2 of 3") is put in front of the database's message.
    """
    orig: Any = exc.orig if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None else exc
    kind = classify(exc, connecting=connecting)
    message = message_of(orig) if isinstance(orig, BaseException) else str(exc)
    state = sqlstate_of(orig) if isinstance(orig, BaseException) else None
    suffix = f" [SQLSTATE {state}]" if state else ""
    if context:
        message = f"{context}: {message}"
    error: StepError
    if kind == COMMUNICATION:
        if isinstance(exc, sa_exc.TimeoutError):
            message = f"no free connection in the pool ({message})"
        error = CommunicationError(f"database {connection!r} cannot be reached: {message}{suffix}")
    elif kind == TRANSIENT:
        error = RetryableError(f"database {connection!r}: {message}{suffix} (transient, will retry)")
    else:
        where = f" (statement: {excerpt(sql)})" if sql else ""
        error = DatabaseError(f"database {connection!r}: {message}{suffix}{where}")
    # extra context for callers and logs; the class and message are what the retry policy uses
    error.__dict__.update(connection=connection, sqlstate=state)
    return error
