"""Opening the system store: the SQLAlchemy engine, durability settings, transactions and errors.

What differs between SQLite and PostgreSQL (durability settings, how writers meet, parameter style,
LISTEN/NOTIFY) is said once, in :mod:`exchange._store.sql.backends`; this module asks
:attr:`Database.backend`.

A failed statement is one of two things, and they are told apart here, once:

- an outage (the server is down or restarting, the connection broke, the disk is full or failed,
  the server lacks resources, the database is locked past the busy timeout):
  :class:`~exchange.errors.StoreError` (:class:`~exchange.errors.StoreDiskFull` for a full disk). A
  run meeting one stops and is executed again by replay when the store answers. An error that says
  the disk refused the write is an outage whatever class the driver gives it (:func:`is_outage`).
- bad data (a NUL byte in text on PostgreSQL, a text longer than its column, a number out of range,
  a string that cannot be encoded, a duplicate key): :class:`~exchange.errors.StoreDataError`, which
  fails the call and names the write. Replaying would meet the same value again, forever.

Two ways to write, one per SQL style (docs/architecture.md, "which write path when"):

- :meth:`Database.unit`: the hot path. The typed statements of :mod:`exchange._store.sql.statements`,
  run on a DBAPI cursor as units of a group commit.
- :meth:`Database.transaction`: everything else. A SQLAlchemy Core transaction of its own.

Both take a run's fence as an argument: a write that an execution of a run makes is conditioned on
the run's owner and lease generation in the same transaction, and a refused one raises
:class:`~exchange.errors.OwnershipLost` after changing nothing. Reads: :meth:`Database.read` (Core)
and :meth:`Database.query` (a typed statement on the readers' pool).
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar, overload

from sqlalchemy import Connection, Engine, create_engine, insert, literal_column, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from exchange._store.records import Fence
from exchange._store.sql import faults
from exchange._store.sql.backends import Backend, backend_for, sqlite_file
from exchange._store.sql.clock import StoreClock
from exchange._store.sql.commits import Deferred, GroupCommit
from exchange._store.sql.pool import ConnectionPool, close_cursor
from exchange._store.sql.spelling import FENCE_REFUSED, fence_params, fenced_refusal
from exchange._store.sql.statements import Statements
from exchange._store.sql.stats import StoreStats
from exchange._store.sql.typed_sql import Bound, Cursor, Params, Statement
from exchange._store.tables import schema
from exchange.errors import ConfigError, ExchangeError, OwnershipLost, StoreDataError, StoreDiskFull, StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")
Lane = Literal["run", "urgent", "request"]

READER_CONNECTIONS = 4


def create_store_engine(url: str, *, pooled: bool = True, create: bool = True) -> tuple[Engine, Backend]:
    """Create the engine for ``url`` and its backend, or raise StoreError naming the URL (without
    its password).

    ``pooled=False`` gives an engine whose connections are opened on demand and never pooled: the raw
    connections (the group committer, the reader pool, a mail listener) come from it and are held by
    their owners, so they never take a place in the SQLAlchemy pool.

    A SQLite file's folder is created when missing, unless ``create=False``: then a missing file is a
    StoreError naming it, and nothing (no folder, no file) is created.
    """
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"store URL {url!r} is not a valid database URL") from exc
    shown = parsed.render_as_string(hide_password=True)
    backend = backend_for(parsed, shown)
    options = backend.engine_options(parsed, pooled=pooled, create=create, shown=shown)
    if not pooled:
        options["poolclass"] = NullPool
    try:
        engine = create_engine(backend.engine_url(parsed), **options)
    except (NoSuchModuleError, ImportError, ArgumentError) as exc:
        raise StoreError(f"store {shown}: cannot create engine: {exc}") from exc
    backend.prepare(engine)
    return engine, backend


def _self_fenced(bound: Bound, fence: Fence, cur: Cursor) -> Deferred[None]:
    """One statement that carries its fence: a row count of 0 says the fence did not hold."""
    bound.run(cur)
    return fenced_refusal(fence, cur)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def describe(exc: BaseException) -> str:
    """One line: the driver's error class and the first line of its message."""
    orig = getattr(exc, "orig", None) or exc
    return f"{type(orig).__name__}: {_first_line(orig)}"


# DBAPI (PEP 249) error classes that say the data or the statement is wrong, not the connection.
_DATA_ERROR_NAMES = frozenset({"DataError", "IntegrityError", "ProgrammingError", "NotSupportedError"})
_INTEGRITY_ERROR_NAMES = frozenset({"IntegrityError"})
# Raised by the driver while converting a parameter, before anything is sent.
_PYTHON_DATA_ERRORS: tuple[type[Exception], ...] = (UnicodeError, OverflowError)
_SQLALCHEMY_PATH_ERRORS: tuple[type[Exception], ...] = (SQLAlchemyError, *_PYTHON_DATA_ERRORS)


def _driver_error(exc: BaseException) -> BaseException:
    """The driver's error: ``exc`` itself, or the one SQLAlchemy wrapped."""
    return getattr(exc, "orig", None) or exc


def _is_named(exc: BaseException, names: frozenset[str]) -> bool:
    """Whether ``exc`` is of a DBAPI (PEP 249) error class named in ``names``, whatever the driver."""
    return any(cls.__name__ in names for cls in type(exc).__mro__)


# SQLite's primary result codes (the low byte of an extended one) that say the disk or the file
# refused: SQLITE_BUSY 5, LOCKED 6, NOMEM 7, READONLY 8 (a file system remounted read-only after an
# error), IOERR 10, FULL 13, CANTOPEN 14, PROTOCOL 15.
_SQLITE_FULL = 13
_SQLITE_OUTAGE_CODES = frozenset({5, 6, 7, 8, 10, _SQLITE_FULL, 14, 15})
# PostgreSQL's SQLSTATE: 53100 disk_full; classes 08 (connection), 53 (insufficient resources),
# 57 (operator intervention: a shutdown), 58 (system error: an I/O error).
_PG_DISK_FULL = "53100"
_PG_OUTAGE_CLASSES = frozenset({"08", "53", "57", "58"})
# What the texts say where no code is given (a driver or an OS error wrapped in another).
_DISK_FULL_TEXTS = ("database or disk is full", "no space left on device", "could not extend file",
                    "disk quota exceeded")
# A statement on a connection that an earlier failure closed: the connection is gone, not the data bad.
_CLOSED_TEXTS = ("cannot operate on a closed database", "cannot operate on a closed cursor",
                 "the connection is closed")


def _sqlite_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _sqlstate(exc: BaseException) -> str | None:
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else None


def _says(exc: BaseException, phrases: tuple[str, ...]) -> bool:
    """Whether an error that carries no code says one of ``phrases``. An error with a code is judged
    by it: the text of one may quote data (a duplicate key's value), which must not decide."""
    if _sqlite_code(exc) is not None or _sqlstate(exc) is not None:
        return False
    text = str(exc).lower()
    return any(phrase in text for phrase in phrases)


def is_disk_full(exc: BaseException) -> bool:
    """True when ``exc`` (a driver error, or SQLAlchemy's wrapper of one) says the store's disk is full."""
    orig = _driver_error(exc)
    return _sqlite_code(orig) == _SQLITE_FULL or _sqlstate(orig) == _PG_DISK_FULL or _says(orig, _DISK_FULL_TEXTS)


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` says the store cannot take the statement now, whatever its DBAPI class: the
    disk is full or failed, the server lacks resources or is shutting down, the connection is gone.
    Never bad data: the same statement succeeds once the store is well again."""
    orig = _driver_error(exc)
    if is_disk_full(orig) or _sqlite_code(orig) in _SQLITE_OUTAGE_CODES:
        return True
    sqlstate = _sqlstate(orig)
    return (sqlstate is not None and sqlstate[:2] in _PG_OUTAGE_CLASSES) or _says(orig, _CLOSED_TEXTS)


def is_data_error(exc: BaseException) -> bool:
    """True when ``exc`` (a driver error, or SQLAlchemy's wrapper of one) says the data is bad (and
    not that the store failed: see :func:`is_outage`)."""
    orig = _driver_error(exc)
    if is_outage(orig):
        return False
    return isinstance(orig, _PYTHON_DATA_ERRORS) or _is_named(orig, _DATA_ERROR_NAMES)


def is_integrity_error(exc: BaseException | None) -> bool:
    """True when ``exc`` (a driver error, or SQLAlchemy's wrapper of one) is a constraint's refusal:
    a unique key already used, say."""
    return exc is not None and _is_named(_driver_error(exc), _INTEGRITY_ERROR_NAMES)




class Database:
    """The engine plus the transactions the store uses; see the module docstring."""

    def __init__(self, url: str, *, create: bool = True, shared: bool = False) -> None:
        """``create=False`` opens an existing store only: a missing SQLite file, or a database without
        Exchange's tables, is refused and nothing is created. ``shared=False`` refuses a database that
        holds tables that are not Exchange's (``[store] shared``); see :meth:`migrate`."""
        self.create = create
        self.shared = shared
        self.engine, self.backend = create_store_engine(url, create=create)
        self.url = url
        self.shown_url = self.engine.url.render_as_string(hide_password=True)
        if not shared:
            # Before the first connection: on SQLite it would switch the file to WAL mode, a lasting change.
            self._refuse_foreign_sqlite()
        self._hot_engine, _ = create_store_engine(url, pooled=False, create=create)
        self._write_lock = self.backend.write_lock()
        self._dbapi_error: type[Exception] = self.engine.dialect.loaded_dbapi.Error
        self._caught: tuple[type[Exception], ...] = (self._dbapi_error, *_PYTHON_DATA_ERRORS)
        self._closed = False
        self._readers = ConnectionPool(self._raw_connection, READER_CONNECTIONS)
        self.stats = StoreStats()  # for /metrics
        self.commits = self._group_commit()
        # Starts and commands, made for callers outside the runs (an operator, the API, a client),
        # wait behind no batch of the runs' own writes where the store commits writers side by side
        # (PostgreSQL): a committer with a connection of its own. SQLite writes one at a time anyway.
        self.request_commits = self._group_commit() if self.backend.side_by_side_writers else self.commits
        self.now_sql = self.backend.now_sql
        self.clock = StoreClock(self._read_store_now)  # reads the store's clock once synced, not before
        self.sql = Statements(self.backend, self.clock.now)  # the hot path's statements

    def _group_commit(self) -> GroupCommit:
        return GroupCommit(
            self._raw_connection,
            begin=self.backend.begin_write,
            write_lock=self._write_lock,
            driver_errors=self._caught,
            translate=self.translate,
            is_outage=lambda error: isinstance(error, StoreError),
            pipeline=self.backend.pipeline(),
        )

    # ----- errors ---------------------------------------------------------------------------------
    def translate(self, exc: BaseException, label: str) -> ExchangeError:
        """The Exchange error for a failed statement of the write or read named ``label``."""
        if is_disk_full(exc):
            return StoreDiskFull(
                f"the store's disk is full: {label} was refused ({describe(exc)}; store {self.shown_url}). "
                "Free space there: runs wait and go on once it takes writes again"
            )
        if is_data_error(exc):
            return StoreDataError(
                f"the store refused a value in {label}: {describe(exc)} (store {self.shown_url})"
            )
        return StoreError(f"store {self.shown_url}: {describe(exc)}")

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.shown_url} is closed")

    # ----- the rest: SQLAlchemy Core transactions ---------------------------------------------
    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for SQLAlchemy Core reads, rolled back when the block ends."""
        self._check_open()
        try:
            with self.engine.connect() as conn:
                yield conn
                conn.rollback()
        except _SQLALCHEMY_PATH_ERRORS as exc:
            raise self.translate(exc, "a read") from exc

    @contextmanager
    def transaction(self, label: str = "a write", *, fence: Fence | None = None,
                    lock_first: Callable[[Connection], None] | None = None) -> Iterator[Connection]:
        """A SQLAlchemy Core write transaction that commits when the block ends (BEGIN IMMEDIATE on
        SQLite); ``label`` names it in errors. With ``fence`` it first locks the run's row for the
        fence: OwnershipLost, and nothing written, when its owner and generation no longer hold it.
        ``lock_first`` takes a lock before that one: a transaction that will lock other runs' rows
        under a table lock takes the table lock first, as every other holder of it does, so that
        no two wait on each other in opposite orders.

        On SQLite the process's writers queue on a lock first: SQLite lets one writer in at a time
        anyway, and its busy handler makes the others sleep in growing steps, which under many
        workers costs far more than waiting on a lock.
        """
        self._check_open()
        if fence is not None:
            label = f"run {fence.run_id}: {label}"
        number = faults.before_write(label)
        try:
            with self._write_lock, self.engine.connect() as conn:
                if self.backend.write_options:
                    conn = conn.execution_options(**self.backend.write_options)
                with conn.begin():
                    if lock_first is not None:
                        lock_first(conn)
                    if fence is not None:
                        self._lock_fence(conn, fence)
                    yield conn
        except _SQLALCHEMY_PATH_ERRORS as exc:
            raise self.translate(exc, label) from exc
        faults.after_write(number, label)

    @staticmethod
    def _lock_fence(conn: Connection, fence: Fence) -> None:
        runs = schema.runs
        held: Any = conn.execute(
            select(literal_column("1"))
            .select_from(runs)
            .where(runs.c.id == fence.run_id, runs.c.owner == fence.owner,
                   runs.c.lease_generation == fence.generation)
            .with_for_update(key_share=True)  # PostgreSQL: FOR NO KEY UPDATE; SQLite: the write lock
        ).first()
        if held is None:
            raise OwnershipLost(fence.run_id, FENCE_REFUSED)

    # ----- the hot path: group-committed units of typed statements ------------------------------
    @overload
    def unit(self, work: Bound, label: str, *, fence: Fence | None = None, lane: Lane = "run") -> None: ...
    @overload
    def unit(
        self, work: Callable[[Cursor], Deferred[T]], label: str, *, fence: Fence | None = None, lane: Lane = "run"
    ) -> T: ...
    @overload
    def unit(
        self, work: Callable[[Cursor], T], label: str, *, fence: Fence | None = None, lane: Lane = "run"
    ) -> T: ...
    def unit(
        self, work: Bound | Callable[[Cursor], Any], label: str, *, fence: Fence | None = None, lane: Lane = "run"
    ) -> Any:
        """Run ``work`` as one unit of a group commit (see :mod:`exchange._store.sql.commits`): it
        returns once committed, sharing the transaction and its fsync with the units of other
        writers that arrived meanwhile.

        ``work`` is a bound :class:`~exchange._store.sql.typed_sql.Statement`, or a function of a
        :class:`~exchange._store.sql.typed_sql.Cursor` that runs the statements of
        :mod:`exchange._store.sql.statements`; it must raise a refusal (OwnershipLost) before modifying
        anything. When it returns a :class:`~exchange._store.sql.commits.Deferred`, its ``read()`` is
        the result (on PostgreSQL it is read after the batch's answers came back).

        ``fence``: the write of an execution of a run, refused (OwnershipLost, nothing written) when
        the fence no longer holds the run. A statement that carries the fence in itself
        (``Statement.fenced``) stays one statement, judged by its row count; anything else first
        locks the run's row.

        ``lane``: ``"run"`` for the runs' own writes; ``"urgent"`` goes in the next batch, ahead of
        them (a lease renewal); ``"request"`` is a write made for a caller outside the runs (a
        start, a command): it waits behind none of the runs' writes (on PostgreSQL it shares
        commits with other requests only; on SQLite, where one committer takes every write, it is
        urgent).
        """
        if self._closed:
            self._check_open()
        if fence is not None:
            label = f"run {fence.run_id}: {label}"
        fn = self._unit_function(work, fence)
        commits = self.request_commits if lane == "request" else self.commits
        started = time.perf_counter()
        result = commits.run(fn, label, urgent=lane != "run")
        self.stats.unit_seconds.observe(time.perf_counter() - started)
        return result

    def _unit_function(self, work: Bound | Callable[[Cursor], Any], fence: Fence | None) -> Callable[[Cursor], Any]:
        if isinstance(work, Bound):
            bound = work
            if not bound.statement.fenced:
                if fence is not None:
                    return self._fenced(fence, bound.run)
                return bound.run
            if fence is None:
                raise ValueError(f"statement {bound.statement.name} is fenced: give the unit its fence")
            return functools.partial(_self_fenced, bound, fence)
        if fence is not None:
            return self._fenced(fence, work)
        return work

    def _fenced(self, fence: Fence, work: Callable[[Cursor], T]) -> Callable[[Cursor], T]:
        lock = self.sql.lock_fence.bind(fence_params(fence))

        def fenced(cur: Cursor) -> T:
            if lock.run(cur).fetchone() is None:
                raise OwnershipLost(fence.run_id, FENCE_REFUSED)
            return work(cur)

        return fenced

    def query(self, statement: Statement, params: Params | None = None) -> list[tuple[Any, ...]]:
        """Rows of one typed read on a connection of the shared raw pool (autocommit): for the
        reads that run often, such as a mailbox that was told it has mail.

        A pooled connection can have died while idle (the store restarted): a read that fails as an
        outage is tried once more on a new connection before the error is raised (a read is safe to
        repeat)."""
        self._check_open()
        sql, values = statement.spelled(params or {})
        for attempt in (1, 2):
            with self._readers.connection() as conn:
                try:
                    cur = conn.cursor()
                    try:
                        cur.execute(sql, values)
                        return list(cur.fetchall())
                    finally:
                        close_cursor(cur)
                except self._caught as exc:
                    error = self.translate(exc, "a read")
                    if not isinstance(error, StoreError):
                        raise error from exc
                    self._readers.discard(conn)
                    if attempt == 2:
                        raise error from exc
                    log.debug("a read failed on a pooled connection (%s); trying a new one", error)
        raise AssertionError("unreachable")  # pragma: no cover

    def _raw_connection(self) -> Any:
        """A new DBAPI connection in autocommit mode (BEGIN is issued explicitly where needed)."""
        self._check_open()
        try:
            # SQLAlchemy's wrapper is kept: dropping it would close the DBAPI connection it holds.
            conn = self._hot_engine.raw_connection()
        except SQLAlchemyError as exc:
            raise StoreError(f"store {self.shown_url}: {describe(exc)}") from exc
        except self._dbapi_error as exc:  # raw_connection() hands a failed connect on unwrapped
            raise StoreError(f"store {self.shown_url}: {describe(exc)}") from exc
        self.backend.autocommit(conn)
        return conn

    def dedicated_connection(self) -> Any:
        """A DBAPI connection of its own, in autocommit mode, never pooled (a LISTEN must keep one
        session). The caller closes it."""
        return self._raw_connection()

    def _read_store_now(self) -> float:
        rows = self.query(self.sql.store_now)
        return float(rows[0][0])

    # ----- opening ------------------------------------------------------------------------------
    def _foreign_error(self, foreign: list[str]) -> ConfigError:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        return ConfigError(
            f"store {self.shown_url} holds tables that are not Exchange's ({shown}); nothing was changed. "
            "Point [store] url at a database of Exchange's own, or set [store] shared = true to keep "
            "Exchange's tables next to them"
        )

    def _refuse_foreign_sqlite(self) -> None:
        """Refuse a SQLite file holding other tables, read through a read-only connection (the
        engine's first connection would already change the file). Where that connection cannot read
        the file, :meth:`migrate` checks again."""
        path = sqlite_file(self.engine.url)
        if path is None or not path.is_file() or path.stat().st_size == 0:
            return
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.Error:
            return
        try:
            names = [row[0] for row in conn.execute(schema.SQLITE_TABLE_NAMES)]
        except sqlite3.Error:
            return
        finally:
            conn.close()
        foreign = schema.foreign_names(names)
        if foreign:
            raise self._foreign_error(foreign)

    def migrate(self, target: int = schema.LATEST_VERSION) -> int:
        """Bring the schema to ``target``; return the version found before. Refuses newer stores, a
        database holding tables that are not Exchange's (unless ``shared``) and, unless ``create``, a
        database without Exchange's store. A refusal changes nothing."""
        with self.transaction("a schema migration") as conn:
            # One process migrates at a time; the others then find the version it wrote.
            self.backend.lock_migrations(conn)
            found = schema.current_version(conn)
            if found > schema.LATEST_VERSION:
                raise StoreError(
                    f"store {self.shown_url} has schema version {found}, newer than this Exchange "
                    f"({schema.LATEST_VERSION}); upgrade Exchange instead of opening it with an older one"
                )
            if not self.shared:
                foreign = schema.foreign_tables(conn)
                if foreign:
                    raise self._foreign_error(foreign)
            if found == 0 and not self.create:
                raise StoreError(
                    f"store {self.shown_url} holds no Exchange store; nothing was created (a gateway, "
                    "`exchange run` or `exchange start` creates the store)"
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
        """Close every connection; later calls raise StoreError ("closed") instead of reopening."""
        self._closed = True
        self.commits.close()
        self.request_commits.close()
        self._readers.close()
        self._hot_engine.dispose()
        self.engine.dispose()
