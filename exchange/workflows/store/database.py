"""Opening the system store: the SQLAlchemy engine, durability settings and transactions.

SQLite runs in WAL mode with ``synchronous=FULL``: a commit is on disk before it returns, so a power
loss cannot take back a recorded step. Write transactions start with ``BEGIN IMMEDIATE`` so two
writers queue on the busy timeout instead of failing on a lock upgrade. PostgreSQL keeps its durable
defaults (``synchronous_commit=on``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, insert, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from exchange.errors import StoreError
from exchange.workflows.store import schema
from exchange.workflows.store.raw import RawStatements

log = logging.getLogger(__name__)

SQLITE_BUSY_TIMEOUT_MS = 30_000


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=FULL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "")
        conn.exec_driver_sql(f"BEGIN {mode}".strip())


def create_store_engine(url: str, *, pooled: bool = True) -> Engine:
    """Create the engine for ``url`` or raise StoreError naming the URL (without its password).

    ``pooled=False`` gives an engine whose connections are opened on demand and never pooled: the
    connections threads keep for the hot path come from it, so they never starve the pool.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"store URL {url!r} is not a valid database URL") from exc
    shown = parsed.render_as_string(hide_password=True)
    backend = parsed.get_backend_name()
    kwargs: dict[str, Any] = {}
    if backend == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            folder = Path(database).parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"store {shown}: cannot create folder {folder}: {exc}") from exc
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        if pooled:
            kwargs["pool_size"] = 40
            kwargs["max_overflow"] = 40
    elif backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        if pooled:
            kwargs.update(pool_size=20, max_overflow=40, pool_pre_ping=True)
        kwargs["connect_args"] = {"connect_timeout": 10}
    else:
        raise StoreError(f"store {shown}: unsupported backend {backend!r} (use sqlite or postgresql)")
    if not pooled:
        kwargs["poolclass"] = NullPool
    try:
        engine = create_engine(parsed, **kwargs)
    except (NoSuchModuleError, ImportError, ArgumentError) as exc:
        raise StoreError(f"store {shown}: cannot create engine: {exc}") from exc
    if backend == "sqlite":
        _sqlite_setup(engine)
    return engine


def describe(exc: SQLAlchemyError) -> str:
    """One line: the driver's error class and the first line of its message."""
    orig = getattr(exc, "orig", None) or exc
    first = str(orig).strip().splitlines()[0] if str(orig).strip() else ""
    return f"{type(orig).__name__}: {first}"


class Database:
    """The engine plus the two kinds of transaction the store uses."""

    def __init__(self, url: str) -> None:
        self.engine = create_store_engine(url)
        self._hot_engine = create_store_engine(url, pooled=False)
        self.url = url
        self.is_sqlite = self.engine.dialect.name == "sqlite"
        self.shown_url = self.engine.url.render_as_string(hide_password=True)
        self._write_lock: AbstractContextManager[Any] = threading.RLock() if self.is_sqlite else nullcontext()
        self._dbapi_error: type[Exception] = self.engine.dialect.loaded_dbapi.Error
        self._hot = threading.local()
        self._hot_lock = threading.Lock()
        self._hot_connections: list[Any] = []
        self.raw = RawStatements(self.placeholder, returning=not self.is_sqlite)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                yield conn
                conn.rollback()
        except SQLAlchemyError as exc:
            raise StoreError(f"store {self.shown_url}: {describe(exc)}") from exc

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that commits when the block ends (BEGIN IMMEDIATE on SQLite).

        On SQLite the process's writers queue on a lock first: SQLite lets one writer in at a time
        anyway, and its busy handler makes the others sleep in growing steps, which under many
        workers costs far more than waiting on a lock.
        """
        try:
            with self._write_lock, self.engine.connect() as conn:
                if self.is_sqlite:
                    conn = conn.execution_options(sqlite_begin="IMMEDIATE")
                with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"store {self.shown_url}: {describe(exc)}") from exc

    def execute_raw(self, sql: str, params: tuple[Any, ...]) -> None:
        """One statement, committed on its own, through a DBAPI connection this thread keeps.

        The hot path of recording a step: it skips SQLAlchemy's statement machinery and the pool's
        checkout (and pre-ping), which cost more than the statement. The connection is in
        autocommit mode, so the statement is one durable transaction and one round trip. ``sql``
        uses the driver's placeholders (see ``placeholder``).
        """
        conn = self._hot_connection()
        try:
            with self._write_lock:
                cur = conn.cursor()
                try:
                    cur.execute(sql, params)
                finally:
                    cur.close()
        except self._dbapi_error as exc:
            self._drop_hot_connection(conn)  # it may be broken; the next call opens a new one
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise StoreError(f"store {self.shown_url}: {type(exc).__name__}: {first}") from exc

    @contextmanager
    def raw_transaction(self) -> Iterator[Any]:
        """A DBAPI cursor in one transaction on this thread's own connection, committed when the
        block ends, rolled back if it raises: the multi-statement writes on the command path."""
        conn = self._hot_connection()
        try:
            with self._write_lock:
                cur = conn.cursor()
                try:
                    if self.is_sqlite:
                        cur.execute("BEGIN IMMEDIATE")
                        try:
                            yield cur
                        except BaseException:
                            cur.execute("ROLLBACK")
                            raise
                        cur.execute("COMMIT")
                    else:
                        with conn.dbapi_connection.transaction():
                            yield cur
                finally:
                    cur.close()
        except self._dbapi_error as exc:
            self._drop_hot_connection(conn)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise StoreError(f"store {self.shown_url}: {type(exc).__name__}: {first}") from exc

    def query_raw(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Rows of one read through this thread's own autocommit connection (see ``execute_raw``):
        for the polls that run often, such as a mailbox waiting for a command."""
        conn = self._hot_connection()
        try:
            cur = conn.cursor()
            try:
                cur.execute(sql, params)
                return list(cur.fetchall())
            finally:
                cur.close()
        except self._dbapi_error as exc:
            self._drop_hot_connection(conn)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise StoreError(f"store {self.shown_url}: {type(exc).__name__}: {first}") from exc

    def _hot_connection(self) -> Any:
        conn = getattr(self._hot, "conn", None)
        if conn is None:
            try:
                conn = self._hot_engine.raw_connection()
            except SQLAlchemyError as exc:
                raise StoreError(f"store {self.shown_url}: {describe(exc)}") from exc
            if not self.is_sqlite:
                conn.dbapi_connection.autocommit = True  # type: ignore[union-attr]  # SQLite's already is
            self._hot.conn = conn
            with self._hot_lock:
                self._hot_connections.append(conn)
        return conn

    def _drop_hot_connection(self, conn: Any) -> None:
        self._hot.conn = None
        with self._hot_lock:
            if conn in self._hot_connections:
                self._hot_connections.remove(conn)
        try:
            conn.invalidate()  # closed, never handed out again by the pool
        except Exception:  # already broken: nothing more to release
            log.debug("store %s: closing a broken connection failed", self.shown_url, exc_info=True)

    @property
    def placeholder(self) -> str:
        """The DBAPI driver's positional placeholder (sqlite3: ``?``, psycopg: ``%s``)."""
        return "?" if self.is_sqlite else "%s"

    def migrate(self, target: int = schema.LATEST_VERSION) -> int:
        """Bring the schema to ``target``; return the version found before. Refuses newer stores."""
        with self.write() as conn:
            found = schema.current_version(conn)
            if found > schema.LATEST_VERSION:
                raise StoreError(
                    f"store {self.shown_url} has schema version {found}, newer than this Exchange "
                    f"({schema.LATEST_VERSION}); upgrade Exchange instead of opening it with an older one"
                )
            if found == 0:
                schema.schema_meta.create(conn, checkfirst=True)
                conn.execute(insert(schema.schema_meta).values(id=1, version=0))
            for version in range(found + 1, target + 1):
                log.info("store %s: applying schema migration %s", self.shown_url, version)
                schema.MIGRATIONS[version - 1](conn)
                conn.execute(update(schema.schema_meta).where(schema.schema_meta.c.id == 1).values(version=version))
        return found

    def dispose(self) -> None:
        with self._hot_lock:
            hot, self._hot_connections = self._hot_connections, []
        for conn in hot:
            try:
                conn.invalidate()
            except Exception:
                log.debug("store %s: closing a connection failed", self.shown_url, exc_info=True)
        self._hot_engine.dispose()
        self.engine.dispose()
