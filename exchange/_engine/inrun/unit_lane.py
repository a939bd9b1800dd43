"""The threads a run's request for units is written on, so that a run waiting for units costs what a
run waiting in ``recvCommand`` costs.

A run asks for units and then waits, often for long, on its own thread. The request is a SQLAlchemy
Core transaction of a dozen statements (:meth:`~exchange._store.runs.units.UnitTable.request`); made
on the run's thread, it left about 20 kB per waiting run behind after it ended: glibc keeps, per
thread, a cache of the blocks that thread freed (its *tcache*) and arenas the threads' leftovers
fragment, and a thread's stack keeps every page its deepest call touched. A thousand runs waiting in
``units.acquire`` held 1.3x the memory of a thousand waiting in ``recvCommand`` (bench/units.py).
Made here, the request leaves the waiting thread as a ``recvCommand`` leaves it; what the lane's own
threads keep is paid once per process, not once per waiting run.

At most :data:`LANE_THREADS` threads serve the calls, in the order they came. The changes of units
are one at a time anyway (SQLite has one writer; on PostgreSQL each takes a table lock first), but
what comes before the lock (a read, a connection, BEGIN) goes side by side on PostgreSQL, as it did on
the runs' own threads: through one thread, a thousand runs took 1.5x as long to all be waiting. The
threads start on demand and end once idle for :data:`IDLE_SECONDS` (daemons: nothing waits for them
at exit); a forked child starts its own. Only the runs' own requests go through here: they wait for
nothing that waits for the lane.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

LANE_THREADS = 4  # at most half the SQLAlchemy pool (backends.SQLALCHEMY_POOL)
IDLE_SECONDS = 5.0  # a thread ends after this long without a call
THREAD_NAME = "exchange-run-units"  # "exchange-run": its writes count as a run's (fault injection)


class _Call:
    """One call: what to call, and its outcome once ``done`` is released."""

    __slots__ = ("fn", "args", "kwargs", "done", "result", "error")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        # Held until the call is made. A bare lock, not a Future: its Condition allocates on the
        # caller's thread what the caller, a waiting run, would keep (see the module docstring).
        self.done = threading.Lock()
        self.done.acquire()
        self.result: Any = None
        self.error: BaseException | None = None


class UnitLane:
    """Calls made on threads of their own, at most ``threads`` at a time, taken in the order they
    came (see the module docstring)."""

    def __init__(self, threads: int = LANE_THREADS) -> None:
        self._threads = threads
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()  # _calls' puts and _serving
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._serving = 0  # threads serving calls

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` made on a thread of the lane: its result, or its exception raised here."""
        call = _Call(fn, args, kwargs)
        with self._lock:
            self._calls.put(call)
            if self._serving < self._threads:
                self._serving += 1
                threading.Thread(target=self._serve, name=THREAD_NAME, daemon=True).start()
        call.done.acquire()  # released once the call is made
        if call.error is not None:
            raise call.error
        return cast(T, call.result)

    def _serve(self) -> None:
        while True:
            try:
                call = self._calls.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:  # a call put meanwhile counted this thread as serving: it is served first
                    if self._calls.empty():
                        self._serving -= 1
                        return
                continue
            try:
                call.result = call.fn(*call.args, **call.kwargs)
            except BaseException as exc:  # the caller's to handle, as if it had made the call itself
                call.error = exc
            call.done.release()
            del call  # nothing of a call outlives it here while the lane idles


UNIT_LANE = UnitLane()
os.register_at_fork(after_in_child=UNIT_LANE._reset)  # the parent's threads are not the child's
