"""Group commit: writes from many runs that arrive together share one transaction and one fsync.

A write is a *unit*: a function that runs its statements on a cursor. :meth:`GroupCommit.run` queues
the unit and returns only once the transaction holding it has committed (the write is durable), or
raises the unit's error. One caller at a time is the *leader*: it takes every unit queued so far, runs
them in one transaction on the committer's connection and commits; meanwhile new units queue up and
the next waiting caller leads the next batch. Nothing waits on a timer: a lone write commits at once,
and under load batches grow by themselves while the previous commit is on the disk.

An *urgent* unit (``run(..., urgent=True)``: an operator's command, a start, a lease renewal) is
queued ahead of every unit that is not, behind the urgent ones queued before it, and the urgent units
waiting make the next batch on their own (or lead the next one, after a batch of urgent units only):
one commit away, even when hundreds of the runs' own writes wait (a busy gateway on SQLite, where one
committer takes every write). Callers wait for their own unit only, so no caller sees another's
order change.

Units must fail *before* they modify anything when they refuse on purpose (a fence that no longer
holds raises :class:`~exchange.errors.OwnershipLost` after a read or a 0-row statement), so a refusal
leaves the batch untouched. Any database error rolls the whole batch back; its units are then run
again one per transaction, so the error reaches the unit that caused it and the others commit.

Pipelining (PostgreSQL): every statement of a batch is sent without waiting for the one before, and
the batch waits for the server once, at its COMMIT. This matters more than the network: under the
GIL, every wait for an answer costs the committer a turn behind every busy thread (measured on 2
cores: 0.1 ms per statement alone, 16 ms with one CPU-bound thread beside it; pipelined 0.04 ms
either way). A unit that reads a result mid-batch (``fetchone``, ``rowcount``) waits for it there,
which stays correct but costs that wait; a unit whose result is needed only by its caller returns a
:class:`Deferred` instead, read once the batch has committed. Without a pipeline (SQLite) a Deferred
is read as soon as its unit returns. A batch of one unit on a connection known to be alive is sent
without BEGIN and COMMIT unless the unit reads a result on its way (see :class:`_AloneCursor`).
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar, overload

from exchange._doorbell import Doorbell
from exchange._store.sql import faults
from exchange._store.sql.pool import close_connection, close_cursor
from exchange._store.sql.typed_sql import Cursor
from exchange.errors import ExchangeError, RunInterrupted

log = logging.getLogger(__name__)

T = TypeVar("T")

MAX_BATCH = 512
KEPT_UNIT_CURSORS = 64  # a larger batch's further units get cursors of their own, closed after it
REPORT_SECONDS = 10.0  # how often the committer's DEBUG line says how busy it was


class Deferred(Generic[T]):
    """A unit's result to be read from its cursor after the batch's statements were answered:
    ``read()`` returns the value or raises the unit's refusal. Only the unit's own statements may
    be looked at (each unit has a cursor of its own while pipelined), and a refusal raised here must
    concern a statement that wrote nothing (a self-fenced statement that matched no row)."""

    __slots__ = ("read",)

    def __init__(self, read: Callable[[], T]) -> None:
        self.read = read


# A connection that committed within this many seconds, with nothing from the server since, gets
# its BEGIN pipelined with the batch (GroupCommit._alive).
LIVE_CONNECTION_SECONDS = 1.0


class _PipelinedCursor:
    """A unit's cursor inside a pipeline: reading a result first waits for the answers so far."""

    __slots__ = ("_cur", "_pipeline", "_unread")

    def __init__(self, cur: Any, pipeline: Any) -> None:
        self._cur = cur
        self._pipeline = pipeline
        self._unread = False

    def execute(self, sql: str, params: Any = None) -> Any:
        self._unread = True
        return self._cur.execute(sql, params)

    def _answers(self) -> Any:
        if self._unread and self._pipeline is not None:
            self._pipeline.sync()
        self._unread = False
        return self._cur

    def settled(self) -> None:
        """The pipeline has ended: every answer is in."""
        self._pipeline, self._unread = None, False

    @property
    def rowcount(self) -> int:
        return int(self._answers().rowcount)

    def fetchone(self) -> Any:
        return self._answers().fetchone()

    def fetchall(self) -> Any:
        return self._answers().fetchall()


class _AloneCursor(_PipelinedCursor):
    """The cursor of a batch's only unit on a live connection, in a pipeline: its statements are
    held back. If the unit reads no result before it returns, :meth:`send_alone` sends them without
    BEGIN and COMMIT: in PostgreSQL's extended protocol the statements up to a Sync are one
    transaction, committed at the Sync that ends the pipeline, as atomic and as durable as between
    BEGIN and COMMIT, for two messages fewer (psycopg spends about as much Python on each of them as
    on a statement). A read while the unit runs needs a Sync first, which would commit what was
    sent: so it begins the transaction (``begin()`` sends BEGIN on the batch's cursor) and sends
    the statements held, and the batch ends with COMMIT as any other."""

    __slots__ = ("_held", "_begin")

    def __init__(self, cur: Any, pipeline: Any, begin: Callable[[], object]) -> None:
        super().__init__(cur, pipeline)
        self._held: list[tuple[str, Any]] = []  # the statements not sent yet
        self._begin: Callable[[], object] | None = begin  # None once the unit is in a transaction

    def execute(self, sql: str, params: Any = None) -> Any:
        if self._begin is not None:
            self._held.append((sql, params))
            return self._cur
        return super().execute(sql, params)

    def _answers(self) -> Any:
        begin, self._begin = self._begin, None
        if begin is not None:  # a read while the unit runs: in a transaction from now on
            begin()
            self._send_held()
        return super()._answers()

    def _send_held(self) -> None:
        held, self._held = self._held, []
        for sql, params in held:
            super().execute(sql, params)

    def send_alone(self) -> bool:
        """Once the unit has returned: send its statements without BEGIN; False when the unit
        began a transaction instead (the batch commits it)."""
        if self._begin is None:
            return False
        self._begin = None
        self._send_held()
        return True


class _Unit:
    __slots__ = ("fn", "label", "result", "error", "done", "wake", "promoted")

    def __init__(self, fn: Callable[[Cursor], Any], label: str) -> None:
        self.fn = fn
        self.label = label
        self.result: Any = None
        self.error: BaseException | None = None
        # ``done`` and ``promoted`` change under the GroupCommit's lock; ``wake`` is made there too,
        # only once its caller has to wait (a writer alone leads its own unit and never waits). A
        # Doorbell, not an Event, whose Condition costs a waiter a few dozen lines of Python.
        self.done = False
        self.promoted = False
        self.wake: Doorbell | None = None


class GroupCommit:
    """Batches units into transactions on one connection.

    ``connect()`` opens the committer's DBAPI connection (autocommit off or on: the committer issues
    BEGIN itself); ``begin`` is the statement that starts a write transaction (``BEGIN IMMEDIATE`` on
    SQLite); ``write_lock`` is held around each batch (SQLite: the process's one-writer lock);
    ``translate(exc, label)`` turns a driver error into an Exchange error; ``is_outage(error)`` says
    whether that error means the connection may be broken; ``pipeline(connection)``, when given, is
    the context in which a batch's statements are pipelined (psycopg's ``Connection.pipeline``).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        *,
        begin: str,
        write_lock: AbstractContextManager[Any],
        driver_errors: tuple[type[BaseException], ...],
        translate: Callable[[BaseException, str], ExchangeError],
        is_outage: Callable[[ExchangeError], bool],
        pipeline: Callable[[Any], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self._connect = connect
        self._pipeline = pipeline
        self._begin = begin
        self._write_lock = write_lock
        self._driver_errors = driver_errors
        self._translate = translate
        self._is_outage = is_outage
        self._lock = threading.Lock()
        self._queue: list[_Unit] = []
        self._urgent_queued = 0  # the urgent units at the head of the queue
        self._urgent_only_last = False  # the last batch taken held urgent units only
        self._leading = False
        self._conn: Any = None
        # The connection's cursors are kept for its life, not opened and closed per batch: one for
        # BEGIN and COMMIT (on SQLite, for everything) and, in a pipeline, the first
        # KEPT_UNIT_CURSORS of the units' own (psycopg builds a cursor in a few hundred lines of
        # Python: two a batch were about a sixth of a PostgreSQL step's).
        self._kept_cursor: Any = None
        self._unit_cursors: list[Any] = []
        self._conn_used_at = 0.0  # monotonic time the connection last committed a batch
        self.batches = 0  # counters for benches and tests
        self.units = 0
        self.alone = 0  # batches of one unit sent without BEGIN and COMMIT
        # The DEBUG report's window: when it began and the counters then; busy and longest since.
        self._reported = (time.monotonic(), 0, 0)
        self._report_at = self._reported[0] + REPORT_SECONDS
        self._busy_seconds = 0.0
        self._longest_seconds = 0.0

    @overload
    def run(self, fn: Callable[[Cursor], Deferred[T]], label: str, *, urgent: bool = False) -> T: ...
    @overload
    def run(self, fn: Callable[[Cursor], T], label: str, *, urgent: bool = False) -> T: ...
    def run(self, fn: Callable[[Cursor], Any], label: str, *, urgent: bool = False) -> Any:
        """Run ``fn(cursor)`` in a committed transaction shared with other units; its return value,
        or its error once nothing of it is in the store. ``urgent``: queued ahead of the units that
        are not (see the module docstring)."""
        unit = _Unit(fn, label)
        number = faults.before_write(label)
        with self._lock:
            # Nobody leads, so nothing is queued either (a leader hands over while units wait):
            # this unit is a batch of its own, led at once.
            alone = not self._leading
            if alone:
                self._leading = True
                # As a batch taken from a queue of this unit alone would count (see _take).
                self._urgent_only_last = urgent and not self._urgent_only_last
            elif urgent:
                self._queue.insert(self._urgent_queued, unit)
                self._urgent_queued += 1
            else:
                self._queue.append(unit)
        if alone:
            self._commit([unit])
        else:
            self._wait_or_lead(unit)
        if unit.error is not None:
            raise unit.error
        faults.after_write(number, label)
        return unit.result

    def _wait_or_lead(self, unit: _Unit) -> None:
        """Return once the queued ``unit`` is done: wait for the batch that holds it, leading the
        next batch whenever this caller is promoted."""
        while True:
            with self._lock:
                if unit.done:
                    return
                lead, unit.promoted = unit.promoted, False
                wake = unit.wake
                if not lead and wake is None:
                    wake = unit.wake = Doorbell()
            if lead:
                # One leader at a time: the promotion is spent here. (An urgent unit queued since
                # may have pushed this one out of the batch it leads; it is promoted again later.)
                self._commit(self._take())
            elif wake is not None:  # always, when not promoted
                wake.wait()
                wake.clear()

    def _take(self) -> list[_Unit]:
        """The next batch, off the head of the queue."""
        with self._lock:
            # Urgent units waiting go in a batch of their own: its commit does not wait for the
            # statements of hundreds of other writes (each a turn behind every busy thread). Never
            # two such batches in a row: a stream of starts must not hold the runs' writes back.
            urgent_only = self._urgent_queued > 0 and not self._urgent_only_last
            size = min(self._urgent_queued, MAX_BATCH) if urgent_only else MAX_BATCH
            self._urgent_only_last = urgent_only
            batch, self._queue = self._queue[:size], self._queue[size:]
            self._urgent_queued -= min(self._urgent_queued, len(batch))
        return batch

    def _commit(self, batch: list[_Unit]) -> None:
        """Commit ``batch`` as its leader, mark its units done and hand the lead over: to the unit
        now at the head of the queue, or to nobody."""
        self.batches += 1
        self.units += len(batch)
        started = time.monotonic()
        try:
            self._run_batch(batch)
        except BaseException as exc:  # e.g. KeyboardInterrupt: rolled back, so no unit may look written
            for unit in batch:
                if unit.error is None:
                    unit.result, unit.error = None, exc
            raise
        finally:
            self._account(started)
            wakes = []
            with self._lock:
                for unit in batch:
                    unit.done = True
                    if unit.wake is not None:
                        wakes.append(unit.wake)
                if self._queue:
                    successor = self._queue[0]
                    successor.promoted = True
                    if successor.wake is not None:
                        wakes.append(successor.wake)
                else:
                    self._leading = False
            for wake in wakes:
                wake.ring()

    def _account(self, started: float) -> None:
        """Time a batch; every 10 s, a DEBUG line: batches, units, how busy the committer was, its
        longest batch."""
        now = time.monotonic()
        seconds = now - started
        self._busy_seconds += seconds
        if seconds > self._longest_seconds:
            self._longest_seconds = seconds
        if now >= self._report_at:
            self._report(now)

    def _report(self, now: float) -> None:
        since, batches, units = self._reported
        elapsed = now - since
        log.debug("group commit: %s batches, %s units in %.0f s; busy %.0f %%; longest batch %.1f ms",
                  self.batches - batches, self.units - units, elapsed, self._busy_seconds / elapsed * 100,
                  self._longest_seconds * 1000)
        self._reported = (now, self.batches, self.units)
        self._report_at = now + REPORT_SECONDS
        self._busy_seconds = self._longest_seconds = 0.0

    def _alive(self) -> bool:
        """Whether the batch may send BEGIN in its pipeline (one round trip instead of two): the
        connection committed a moment ago and the server has sent nothing since. A session the
        server ended (a restart, ``pg_terminate_backend``) has its last words or end of file waiting
        to be read; one idle for longer may have died unseen. Either way BEGIN then goes first, on
        its own, where failing sends nothing of the batch (see :meth:`_begin_on_live_connection`)."""
        conn = self._conn
        if self._pipeline is None or conn is None or time.monotonic() - self._conn_used_at >= LIVE_CONNECTION_SECONDS:
            return False
        try:
            return not _readable_now(conn.fileno())
        except (OSError, ValueError):  # closed
            return False

    def _begin_on_live_connection(self) -> Any:
        """A cursor inside a new write transaction. The committer's connection can have died while
        idle (the store restarted): when BEGIN fails on a connection that had been open, nothing of
        the batch was sent, so it is begun once more on a new connection."""
        reused = self._conn is not None
        cur = self._cursor()
        try:
            cur.execute(self._begin)
            return cur
        except self._driver_errors as exc:
            if not reused:
                raise
            log.debug("the committer's connection failed at BEGIN (%s); opening a new one", exc)
            self._drop_connection()
        cur = self._cursor()
        cur.execute(self._begin)
        return cur

    def _cursor(self) -> Any:
        """The connection's cursor for BEGIN and COMMIT (the connection opened if there is none)."""
        if self._kept_cursor is None:
            self._kept_cursor = self._connection().cursor()
        return self._kept_cursor

    def _unit_cursor(self, index: int, extra: list[Any]) -> Any:
        """The cursor of the batch's unit number ``index``: a kept one, or a new one put in
        ``extra`` to be closed after the batch."""
        if index < len(self._unit_cursors):
            return self._unit_cursors[index]
        cur = self._conn.cursor()
        if index < KEPT_UNIT_CURSORS:
            self._unit_cursors.append(cur)
        else:
            extra.append(cur)
        return cur

    def _run_batch(self, batch: list[_Unit]) -> None:
        try:
            with self._write_lock:
                if self._pipeline is None:
                    self._send_plain(batch)
                    return
                deferred, extra = self._send_pipelined(batch)
                self._conn_used_at = time.monotonic()
        except Exception as exc:  # a driver error, a unit's own error, or no connection could be opened
            self._failed(batch, exc)
            return
        for unit, result in deferred:  # committed: nothing here may send the batch again
            _settle(unit, result)
        for extra_cursor in extra:
            close_cursor(extra_cursor)

    def _failed(self, batch: list[_Unit], exc: Exception) -> None:
        """``batch`` was rolled back for ``exc``: its units are written one per transaction, so the
        error reaches the unit that caused it; a unit alone gets it (an Exchange error)."""
        if len(batch) > 1:
            log.debug("a batch of %s writes failed (%s); writing them one by one", len(batch), exc)
            for unit in batch:
                unit.result, unit.error = None, None
                self._run_batch([unit])
            return
        error: BaseException = exc
        if isinstance(exc, self._driver_errors):
            error = self._translate(exc, batch[0].label)
            error.__cause__ = exc  # as ``raise ... from exc`` would: the caller may look at it
            if self._is_outage(error):
                self._drop_connection()
        batch[0].error = error

    def _send_plain(self, batch: list[_Unit]) -> None:
        """BEGIN, the units (each result read as soon as its unit returns) and COMMIT, on the
        connection's kept cursor; rolled back if any of it fails."""
        cur = self._begin_on_live_connection()
        try:
            for unit in batch:
                deferred = _apply(unit, cur)
                if deferred is not None:
                    _settle(unit, deferred)
            cur.execute("COMMIT")
        except BaseException:
            self._rollback(cur)
            raise

    def _send_pipelined(self, batch: list[_Unit]) -> tuple[list[tuple[_Unit, Deferred[Any]]], list[Any]]:
        """The batch in one pipeline, BEGIN with it on a live connection; rolled back if any of it
        fails. The units whose results are still to be read, and the cursors to close after."""
        begun = not self._alive()
        cur = self._begin_on_live_connection() if begun else self._cursor()
        try:
            return self._send(cur, batch, begun=begun)
        except BaseException:
            self._rollback(cur)
            raise

    def _send(
        self, cur: Any, batch: list[_Unit], *, begun: bool
    ) -> tuple[list[tuple[_Unit, Deferred[Any]]], list[Any]]:
        """Run the units in a pipeline and COMMIT (after BEGIN, unless ``begun``); the units whose
        results are still to be read, and the cursors beyond the kept ones, to close once they are.
        A batch of one unit not ``begun`` goes without BEGIN and COMMIT unless the unit reads a
        result on its way (see :class:`_AloneCursor`)."""
        assert self._pipeline is not None
        deferred: list[tuple[_Unit, Deferred[Any]]] = []
        cursors: list[_PipelinedCursor] = []
        extra: list[Any] = []
        try:
            with self._pipeline(self._conn) as pipeline:
                alone: _AloneCursor | None = None
                if not begun and len(batch) == 1:
                    alone = _AloneCursor(self._unit_cursor(0, extra), pipeline, lambda: cur.execute(self._begin))
                elif not begun:
                    cur.execute(self._begin)
                for index, unit in enumerate(batch):
                    # Results are read after the sync: one cursor per unit.
                    unit_cur = alone or _PipelinedCursor(self._unit_cursor(index, extra), pipeline)
                    cursors.append(unit_cur)
                    result = _apply(unit, unit_cur)
                    if result is not None:
                        deferred.append((unit, result))
                if alone is not None and alone.send_alone():
                    self.alone += 1
                else:
                    cur.execute("COMMIT")
        except BaseException:
            for extra_cursor in extra:
                close_cursor(extra_cursor)
            raise
        finally:
            for unit_cur in cursors:
                unit_cur.settled()
        return deferred, extra

    def _rollback(self, cur: Any) -> None:
        """Roll the failed batch back. Where that fails too the connection is dropped (a new one is
        opened for the next batch); the batch's own error is what the callers get. (SQLite has
        already rolled back after a COMMIT refused for want of space: "no transaction is active".)"""
        try:
            cur.execute("ROLLBACK")
        except self._driver_errors as exc:
            log.debug("rolling a failed batch back failed too (%s); dropping the connection", exc)
            self._drop_connection()

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        kept = [cur for cur in (self._kept_cursor, *self._unit_cursors) if cur is not None]
        self._kept_cursor, self._unit_cursors = None, []
        for cur in kept:
            close_cursor(cur)
        if conn is not None:
            close_connection(conn, broken=True)

    def close(self) -> None:
        with self._write_lock:
            self._drop_connection()


def _readable_now(fd: int) -> bool:
    """Whether ``fd`` has something to read (or is at end of file, or failed), without waiting.
    poll() where there is one: select() refuses descriptors past FD_SETSIZE (1024)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _writable, _failed = select.select([fd], [], [], 0)  # Windows: sockets only, as here
    return bool(readable)


def _apply(unit: _Unit, cur: Any) -> Deferred[Any] | None:
    """Run ``unit`` on ``cur`` inside its batch: its result or its refusal is noted on it; a result
    still to be read from its cursor is returned."""
    try:
        result = unit.fn(cur)
    except RunInterrupted as refused:  # refused before writing: the batch goes on
        unit.error = refused
        return None
    if isinstance(result, Deferred):
        return result
    unit.result = result
    return None


def _settle(unit: _Unit, result: Deferred[Any]) -> None:
    try:
        unit.result = result.read()
    except (RunInterrupted, Exception) as exc:  # a refusal, or a bug in the reader: its caller gets it
        unit.error = exc
