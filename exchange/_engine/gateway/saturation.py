"""Saying so when a gateway's workers are all busy while runs wait to start.

A plant's runs are long-lived: a gateway whose ``[engine] workers`` are all taken by runs that wait
for days starts nothing more until one of them ends, and a run queued behind them sits ENQUEUED
(a command sent to it waits in its mailbox). That is the limit working as configured, but nobody
would guess it from a run list, so the dispatcher reports it: a warning when it starts, naming the
limit and how many runs wait, repeated while it lasts, and a line when a worker is free again.

Looking costs one counting read of the store, made only while every worker is busy and at most
once per ``look_seconds``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from exchange.errors import StoreError

log = logging.getLogger(__name__)

LOOK_SECONDS = 30.0
REPEAT_SECONDS = 600.0


class Saturation:
    def __init__(
        self,
        workers: int,
        count_waiting: Callable[[], int],
        *,
        look_seconds: float = LOOK_SECONDS,
        repeat_seconds: float = REPEAT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``count_waiting``: how many runs a claim could take now (a store read)."""
        self.workers = workers
        self._count_waiting = count_waiting
        self._look_seconds = look_seconds
        self._repeat_seconds = repeat_seconds
        self._clock = clock
        self._next_look = 0.0
        self._warned_at: float | None = None

    @property
    def warned(self) -> bool:
        """Whether the last look found runs waiting for a worker (and said so)."""
        return self._warned_at is not None

    def observe(self, free_workers: int) -> None:
        """Called by the dispatch loop with the number of free workers each time it looks."""
        if free_workers > 0:
            if self._warned_at is not None:
                log.info("a worker is free again (%d of %d); the runs waiting for one start now",
                         free_workers, self.workers)
                self._warned_at = None
            self._next_look = 0.0
            return
        now = self._clock()
        if now < self._next_look:
            return
        self._next_look = now + self._look_seconds
        try:
            waiting = self._count_waiting()
        except StoreError as exc:  # the claim's own retries report the store; try again next look
            log.debug("counting the runs waiting for a worker failed: %s", exc)
            return
        if waiting <= 0:
            return
        if self._warned_at is None or now - self._warned_at >= self._repeat_seconds:
            log.warning(
                "all %d workers of this gateway are busy and %d run(s) wait ENQUEUED for one: they start only "
                "as running runs end (raise [engine] workers, or add a gateway on this store)",
                self.workers, waiting,
            )
            self._warned_at = now
