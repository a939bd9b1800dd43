"""The SQL databases a store can live in, each as one class behind :class:`Backend`.

Everything that differs between SQLite and PostgreSQL is said here, once, as a named property or
method; the rest of the store asks the backend instead of testing the dialect:

- how an engine is made (connect arguments, pool, a SQLite file's folder) and prepared (SQLite: WAL
  with ``synchronous=FULL``, so a commit is on disk before it returns; explicit BEGIN);
- the driver's parameter style, ``INSERT ... RETURNING``, the SQL for the server's clock;
- how writers meet: SQLite lets one writer in at a time, so the process's writers queue on a lock
  and open with ``BEGIN IMMEDIATE`` (no failed lock upgrade); PostgreSQL locks rows;
- what the server offers beyond SQL: PostgreSQL's LISTEN/NOTIFY (the mail watcher listens instead
  of polling), advisory locks (the node lock; one migration at a time), pipelining (a group commit sends its batch
  without waiting for each answer).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, Table, event, text
from sqlalchemy.engine import URL

from exchange._store.sql.chain import SQLITE_SHA256, register_sqlite_function
from exchange._store.sql.clock import now_sql
from exchange._store.sql.typed_sql import ParamStyle
from exchange.errors import StoreError

SQLITE_BUSY_TIMEOUT_MS = 30_000
# Connections a store opens, whatever the number of runs: the SQLAlchemy pool (SQLALCHEMY_POOL), the
# raw readers (database.READER_CONNECTIONS), the group committer (1), and per gateway its node lock
# (1) and mail watcher (1).
SQLALCHEMY_POOL = 8
POOL_TIMEOUT_SECONDS = 60
PG_CONNECT_TIMEOUT_SECONDS = 10
# A transaction left open by a process that froze (SIGSTOP, a paused VM) keeps its row locks, and the
# takeover of its runs skips locked rows: the server ends such a session after this long. Exchange's
# own transactions never wait between statements (they are committed in milliseconds).
PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = 5_000
# The advisory lock that serialises schema migrations on PostgreSQL: ("EXCH", 1) as two int4 keys.
MIGRATION_LOCK_SPACE = 0x45584348
MIGRATION_LOCK_KEY = 1


class Backend(Protocol):
    """What the store needs to know about the database it lives in."""

    name: str  # SQLAlchemy's backend name: "sqlite" | "postgresql"
    paramstyle: ParamStyle  # how the DBAPI driver spells a named parameter (typed_sql.Statement)
    returning: bool  # INSERT ... RETURNING gives a new row's id (else cursor.lastrowid)
    row_locks: bool  # SELECT ... FOR UPDATE/SHARE locks rows (SQLite: a writer holds the whole file)
    side_by_side_writers: bool  # writers on several connections commit side by side (SQLite: one at a time)
    notifications: bool  # LISTEN/NOTIFY: commands are pushed to the mail watcher, not polled for
    session_locks: bool  # advisory locks that live as long as a session (the node lock)
    writing_with: bool  # data-modifying WITH: an update and its event in one statement
    begin_write: str  # the statement opening a write transaction (raw connections)
    write_options: dict[str, Any]  # SQLAlchemy execution options of a write transaction
    now_sql: str  # seconds since the epoch, as a double, from the server's clock
    sha256_sql: str  # sha256 of a text's UTF-8 in hex: a format of one ``{}`` (the audit chain)

    def engine_url(self, url: URL) -> URL:
        """``url`` with the driver Exchange uses."""

    def engine_options(self, url: URL, *, pooled: bool, create: bool, shown: str) -> dict[str, Any]:
        """Keyword arguments for ``create_engine``; prepares (or, with ``create=False``, checks) the
        place the database lives in. StoreError naming it when that cannot be done."""

    def prepare(self, engine: Engine) -> None:
        """Set up every connection ``engine`` opens (pragmas, transaction control)."""

    def write_lock(self) -> AbstractContextManager[Any]:
        """What the writers of one process hold while they write (a lock, or nothing)."""

    def autocommit(self, raw_connection: Any) -> None:
        """Put a raw DBAPI connection in autocommit mode (BEGIN is issued explicitly)."""

    def pipeline(self) -> Callable[[Any], AbstractContextManager[Any]] | None:
        """How a batch of statements is sent without waiting for each answer, if the driver can."""

    def lock_migrations(self, conn: Connection) -> None:
        """Inside the migration's write transaction, before the schema version is read: wait until
        no other process migrates this store, and keep it so until the transaction ends. Gateways
        started together on an empty database would otherwise all create the same tables."""

    def lock_table_for_inserts(self, conn: Connection, table: Table) -> None:
        """Inside ``conn``'s write transaction: other writers of ``table`` wait for its commit."""


def sqlite_file(url: URL) -> Path | None:
    """The file a SQLite URL names; None for other backends, in-memory and ``file:`` URI databases."""
    database = url.database or ""
    if url.get_backend_name() != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


class SqliteBackend:
    """A store in one SQLite file (WAL, ``synchronous=FULL``), for one gateway machine."""

    name = "sqlite"
    paramstyle: ParamStyle = "named"
    returning = False
    row_locks = False
    side_by_side_writers = False
    notifications = False
    session_locks = False
    writing_with = False
    begin_write = "BEGIN IMMEDIATE"
    write_options: dict[str, Any] = {"sqlite_begin": "IMMEDIATE"}  # see prepare's "begin" listener
    now_sql = now_sql("sqlite")
    sha256_sql = SQLITE_SHA256 + "({})"  # registered on each connection

    def engine_url(self, url: URL) -> URL:
        return url

    def engine_options(self, url: URL, *, pooled: bool, create: bool, shown: str) -> dict[str, Any]:
        path = sqlite_file(url)
        if path is not None and not create and not path.is_file():
            what = "is a folder, not a store file" if path.is_dir() else "does not exist"
            raise StoreError(
                f"store file {path} {what}; nothing was created (a gateway, `exchange run` or "
                "`exchange start` creates the store)"
            )
        if path is not None and create:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"store {shown}: cannot create folder {path.parent}: {exc}") from exc
        options: dict[str, Any] = {
            "connect_args": {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        }
        if pooled:
            options.update(pool_size=SQLALCHEMY_POOL, max_overflow=0, pool_timeout=POOL_TIMEOUT_SECONDS)
        return options

    def prepare(self, engine: Engine) -> None:
        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            register_sqlite_function(dbapi_conn)
            cur = dbapi_conn.cursor()
            switch_to_wal(cur)
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            mode = conn.get_execution_options().get("sqlite_begin", "")
            conn.exec_driver_sql(f"BEGIN {mode}".strip())

    def write_lock(self) -> AbstractContextManager[Any]:
        # SQLite lets one writer in at a time anyway, and its busy handler makes the others sleep in
        # growing steps, which under many workers costs far more than waiting on a lock.
        return threading.RLock()

    def autocommit(self, raw_connection: Any) -> None:
        return None  # isolation_level = None, set on connect

    def pipeline(self) -> Callable[[Any], AbstractContextManager[Any]] | None:
        return None

    def lock_migrations(self, conn: Connection) -> None:
        return None  # the migration's BEGIN IMMEDIATE holds the file's write lock: one writer at a time

    def lock_table_for_inserts(self, conn: Connection, table: Table) -> None:
        return None  # BEGIN IMMEDIATE: writes are one at a time already


def switch_to_wal(cur: Any, timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> None:
    """Put the SQLite file in WAL mode (a no-op once it is), waiting up to ``timeout_ms`` for
    another connection switching it at the same moment.

    SQLite answers that case "database is locked" at once, without its busy handler: while a
    connection holds the file's RESERVED lock in rollback mode (it is switching the file to WAL
    itself), a second connection's switch fails in under a millisecond. Four processes opening a
    new store file at once met it in 20 of 800 opens (200 rounds)."""
    deadline = time.monotonic() + timeout_ms / 1000
    pause_s = 0.001
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() + pause_s > deadline:
                raise
        time.sleep(pause_s)
        pause_s = min(pause_s * 2, 0.05)


class PostgresBackend:
    """A store in a PostgreSQL database (psycopg 3), shared by every gateway of a site."""

    name = "postgresql"
    paramstyle: ParamStyle = "pyformat"
    returning = True
    row_locks = True
    side_by_side_writers = True
    notifications = True
    session_locks = True
    writing_with = True
    begin_write = "BEGIN"
    write_options: dict[str, Any] = {}
    now_sql = now_sql("postgresql")
    sha256_sql = "encode(sha256(convert_to({}, 'UTF8')), 'hex')"

    def engine_url(self, url: URL) -> URL:
        return url.set(drivername="postgresql+psycopg") if url.drivername == "postgresql" else url

    def engine_options(self, url: URL, *, pooled: bool, create: bool, shown: str) -> dict[str, Any]:
        options: dict[str, Any] = {"connect_args": {
            "connect_timeout": PG_CONNECT_TIMEOUT_SECONDS,
            "options": f"-c idle_in_transaction_session_timeout={PG_IDLE_IN_TRANSACTION_TIMEOUT_MS}",
        }}
        if pooled:
            options.update(pool_size=SQLALCHEMY_POOL, max_overflow=0, pool_timeout=POOL_TIMEOUT_SECONDS,
                           pool_pre_ping=True)
        return options

    def prepare(self, engine: Engine) -> None:
        return None  # PostgreSQL's defaults are durable (synchronous_commit = on)

    def write_lock(self) -> AbstractContextManager[Any]:
        return nullcontext()

    def autocommit(self, raw_connection: Any) -> None:
        raw_connection.dbapi_connection.autocommit = True

    def pipeline(self) -> Callable[[Any], AbstractContextManager[Any]] | None:
        return lambda conn: conn.dbapi_connection.pipeline()

    def lock_migrations(self, conn: Connection) -> None:
        # A transaction-scoped advisory lock: freed by the COMMIT or ROLLBACK, or by the server when
        # the session dies. The two-key form never meets the node lock's one-key (bigint) locks.
        conn.execute(text("SELECT pg_advisory_xact_lock(:space, :key)"),
                     {"space": MIGRATION_LOCK_SPACE, "key": MIGRATION_LOCK_KEY})

    def lock_table_for_inserts(self, conn: Connection, table: Table) -> None:
        # Row locks cannot hold back an insert of a row not yet there (a unique check made by the
        # caller that the database cannot make itself, such as names that differ in case only).
        conn.execute(text(f"LOCK TABLE {table.name} IN SHARE ROW EXCLUSIVE MODE"))


_BACKENDS: dict[str, Callable[[], Backend]] = {"sqlite": SqliteBackend, "postgresql": PostgresBackend}


def backend_for(url: URL, shown: str) -> Backend:
    """The backend of a store URL; StoreError naming the URL for any other database."""
    name = url.get_backend_name()
    try:
        return _BACKENDS[name]()
    except KeyError:
        raise StoreError(f"store {shown}: unsupported backend {name!r} (use sqlite or postgresql)") from None
