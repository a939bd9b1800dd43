"""Wake-ups for the ends of runs executing in this process: per run for a client waiting on one run
(``Runtime.wait_for``), and for anyone for a follower that re-reads the store after any end.

A waiter registers its bell before its first read of the run, so an end between that read and the
wait still rings it (a Condition notified then would be missed until the next pause ran out). Each
end rings the bells of its own run only: a thousand clients each waiting on its own run are not all
woken, and do not all read the store, each time one of the runs ends.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from exchange._doorbell import Doorbell


class RunEnds:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bells: dict[str, set[Doorbell]] = {}
        self._any_end = threading.Condition()

    @contextmanager
    def bell(self, run_id: str) -> Iterator[Doorbell]:
        """A bell rung when ``run_id`` ends here (or is cancelled) while the block runs; the
        waiter clears it before each wait."""
        bell = Doorbell()
        with self._lock:
            self._bells.setdefault(run_id, set()).add(bell)
        try:
            yield bell
        finally:
            with self._lock:
                bells = self._bells.get(run_id)
                if bells is not None:
                    bells.discard(bell)
                    if not bells:
                        del self._bells[run_id]

    def ended(self, run_id: str) -> None:
        """``run_id`` ended here, or changed so that its waiters should look again (a cancel)."""
        with self._lock:
            bells = list(self._bells.get(run_id, ()))
        for bell in bells:
            bell.ring()
        with self._any_end:
            self._any_end.notify_all()

    def pause(self, timeout_seconds: float) -> None:
        """Wait ``timeout_seconds``, or less when any run ends here."""
        with self._any_end:
            self._any_end.wait(timeout_seconds)
