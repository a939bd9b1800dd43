"""The runs executing in this process: who they are, how many, and waking them when mail arrives.

The executor attaches a run's :class:`~exchange._engine.execution.context.RunContext` before its
body runs and detaches it after (whatever the ending); between the two, :meth:`LocalRuns.get` finds
it. Everything here is thread-safe: the executor's workers attach and detach while the dispatcher,
the lease keeper, the mail watcher and the API's metrics look. The contexts themselves are the
runs'; this class only keeps the table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from exchange._engine.execution import RunContext


class LocalRuns:
    """The table of runs executing in this process (run id -> its context), behind one lock."""

    def __init__(self) -> None:
        self._runs: dict[str, RunContext] = {}
        self._lock = threading.Lock()

    def attach(self, ctx: RunContext) -> None:
        """``ctx``'s run executes here from now on (replacing any context left for its id)."""
        with self._lock:
            self._runs[ctx.run_id] = ctx

    def detach(self, run_id: str) -> None:
        """``run_id`` no longer executes here; nothing happens when it was not attached."""
        with self._lock:
            self._runs.pop(run_id, None)

    def get(self, run_id: str) -> RunContext | None:
        """The context of ``run_id`` if it executes here, else None."""
        with self._lock:
            return self._runs.get(run_id)

    def workflows(self, clock: Callable[[], float]) -> tuple[float, dict[str, str]]:
        """Run id -> workflow of every run executing here now (the ``[record]`` sampler's runs), and
        ``clock()`` read under the same lock: a run found had attached before that time (its start
        was written before it), and detaches after it (its end is written after)."""
        with self._lock:
            return clock(), {run_id: ctx.workflow for run_id, ctx in self._runs.items()}

    def count(self) -> int:
        """How many runs execute in this process now."""
        with self._lock:
            return len(self._runs)

    def notify_mail(self, run_id: str) -> None:
        """Messages arrived for ``run_id``: wake it if it executes here (a watcher or a local send)."""
        ctx = self.get(run_id)
        if ctx is not None:
            ctx.mail_arrived()

    def notify_all_mail(self) -> None:
        """Messages may have arrived for any run executing here: each reads its mailbox once more.
        The runs are woken outside the lock (a wake-up never waits behind an attach)."""
        with self._lock:
            local = list(self._runs.values())
        for ctx in local:
            ctx.mail_arrived()
