"""The thread a run's request for units is written on, so that a run waiting for units costs what a
run waiting in ``recvCommand`` costs.

A run asks for units and then waits, often for long, on its own thread. The request is a SQLAlchemy
Core transaction of a dozen statements (:meth:`~exchange._store.runs.units.UnitTable.request`); made
on the run's thread, it left about 20 kB per waiting run behind after it ended: glibc keeps, per
thread, a cache of the blocks that thread freed (its *tcache*) and arenas the threads' leftovers
fragment, and a thread's stack keeps every page its deepest call touched. A thousand runs waiting in
``units.acquire`` held 1.3x the memory of a thousand waiting in ``recvCommand`` (bench/units.py).
Made here, on one thread of the process, the request leaves the waiting thread as a ``recvCommand``
leaves it.

It costs no concurrency: changes of units are one at a time anyway (SQLite has one writer; on
PostgreSQL each takes a table lock first). The thread starts on demand and ends once idle for
:data:`IDLE_SECONDS` (a daemon: nothing waits for it at exit); a forked child starts its own.
Only the run's own request goes through here: it waits for nothing that waits for this thread.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

IDLE_SECONDS = 5.0  # the thread ends after this long without a call
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
    """Calls made one at a time, in order, on a thread of their own (see the module docstring)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()  # _calls' puts and _serving
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._serving = False

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` made on the lane's thread: its result, or its exception raised here."""
        call = _Call(fn, args, kwargs)
        with self._lock:
            self._calls.put(call)
            if not self._serving:
                self._serving = True
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
                with self._lock:  # a call put meanwhile finds _serving still true: it is served first
                    if self._calls.empty():
                        self._serving = False
                        return
                continue
            try:
                call.result = call.fn(*call.args, **call.kwargs)
            except BaseException as exc:  # the caller's to handle, as if it had made the call itself
                call.error = exc
            call.done.release()
            del call  # nothing of a call outlives it here while the lane idles


UNIT_LANE = UnitLane()
os.register_at_fork(after_in_child=UNIT_LANE._reset)  # the parent's thread is not the child's
