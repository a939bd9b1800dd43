"""Runs waiting for the store: one probe for all of them, and all of them resumed together.

A run whose execution stopped because the store failed (or its lease ran out while the store did not
answer) waits here instead of on a timer of its own. One thread asks the store every
:data:`PROBE_INTERVAL_SECONDS`; the moment it answers, every waiting run is handed back for
execution (by replay). A run that keeps failing while the store answers backs off on its own, so a
single broken run cannot spin: a full disk is such a case (the probe reads, and reads still work).

Its failures count until it ends, or until an execution lasts :data:`STREAK_RESET_SECONDS` before
failing (it was making progress): resuming it does not start the count over, or a run whose every
execution fails at once would be executed hundreds of times a second (measured before: 6,580
executions and 12.6 MB of log in 15 s of a full disk).

:class:`RepeatedLog` keeps what such failures log bounded: one line a minute, whatever the
number of runs and retries, the others at DEBUG and counted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

PROBE_INTERVAL_SECONDS = 0.25
FREE_RETRIES = 3  # consecutive failures a run may have before it backs off on its own
BACKOFF_MAX_SECONDS = 10.0  # also how long a run waits at most once a full disk has space again
STREAK_RESET_SECONDS = 60.0  # an execution that lasted this long before failing starts the count over
REPEAT_LOG_SECONDS = 60.0


class RepeatedLog:
    """A log line that may recur many times a second (every run meeting the same outage): logged at
    most once per ``interval_s`` at ``level``, saying how many more there were since; the others go
    to DEBUG. Thread-safe."""

    def __init__(self, logger: logging.Logger, level: int = logging.WARNING,
                 interval_s: float = REPEAT_LOG_SECONDS) -> None:
        self._log = logger
        self._level = level
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._logged_at: float | None = None
        self._unlogged = 0

    def log(self, message: str, *args: object, exc_info: bool = False) -> None:
        """Log ``message % args`` (with the exception being handled when ``exc_info``)."""
        now = time.monotonic()
        with self._lock:
            due = self._logged_at is None or now - self._logged_at >= self._interval_s
            unlogged = self._unlogged
            if due:
                self._logged_at, self._unlogged = now, 0
            else:
                self._unlogged += 1
        if not due:
            self._log.debug(message, *args, exc_info=exc_info)
        elif unlogged:
            self._log.log(self._level, message + " (and %s more like it in the last %.0f s, logged at DEBUG)",
                          *args, unlogged, self._interval_s, exc_info=exc_info)
        else:
            self._log.log(self._level, message, *args, exc_info=exc_info)


class StoreWaiter:
    """``probe()`` raises while the store fails; ``resume(run_id)`` executes a waiting run again."""

    def __init__(self, probe: Callable[[], object], resume: Callable[[str], None]) -> None:
        self._probe = probe
        self._resume = resume
        self._lock = threading.Lock()
        self._waiting: dict[str, float] = {}  # run id -> monotonic time it may resume
        self._failures: dict[str, int] = {}
        self._resumed_at: dict[str, float] = {}  # run id -> monotonic time its execution was handed out
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="exchange-store-waiter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def add(self, run_id: str) -> None:
        """The run stopped on a store failure: resume it once the store answers, after its backoff."""
        now = time.monotonic()
        with self._lock:
            resumed_at = self._resumed_at.pop(run_id, None)
            failures = self._failures.get(run_id, 0)
            if resumed_at is not None and now - resumed_at >= STREAK_RESET_SECONDS:
                failures = 0  # that execution got somewhere: not the same streak of failures
            failures += 1
            self._failures[run_id] = failures
            self._waiting[run_id] = now + self.backoff_seconds(failures)
        self._wake.set()

    @staticmethod
    def backoff_seconds(failures: int) -> float:
        """How long a run waits after its ``failures``-th failure in a row (then the probe decides)."""
        return 0.0 if failures <= FREE_RETRIES else min(BACKOFF_MAX_SECONDS, 2.0 ** (failures - FREE_RETRIES))

    def resumed(self, run_id: str) -> None:
        """The run is being executed (again): it no longer waits, and its failures still count."""
        with self._lock:
            self._waiting.pop(run_id, None)
            self._resumed_at[run_id] = time.monotonic()

    def succeeded(self, run_id: str) -> None:
        """The run ended normally: forget its failures."""
        self.forget(run_id)

    def forget(self, run_id: str) -> None:
        """The run ended, or is no longer this process's: forget it."""
        with self._lock:
            self._waiting.pop(run_id, None)
            self._failures.pop(run_id, None)
            self._resumed_at.pop(run_id, None)

    def clear(self) -> None:
        with self._lock:
            self._waiting.clear()
            self._failures.clear()
            self._resumed_at.clear()

    def waiting(self) -> list[str]:
        with self._lock:
            return list(self._waiting)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(PROBE_INTERVAL_SECONDS)
            self._wake.clear()
            if self._stop.is_set():
                return
            now = time.monotonic()
            with self._lock:
                due = [run_id for run_id, at in self._waiting.items() if at <= now]
            if not due:
                continue
            try:
                self._probe()
            except Exception as exc:  # still down: ask again at the next interval
                log.debug("the store still fails: %s", exc)
                continue
            with self._lock:
                for run_id in due:
                    self._waiting.pop(run_id, None)
            for run_id in due:
                try:
                    self._resume(run_id)
                except Exception:
                    log.exception("run %s: resuming after a store failure failed", run_id)
