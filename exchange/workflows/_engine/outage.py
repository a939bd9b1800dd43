"""Runs waiting for the store: one probe for all of them, and all of them resumed together.

A run whose execution stopped because the store failed (or its lease ran out while the store did not
answer) waits here instead of on a timer of its own. One thread asks the store every
:data:`PROBE_INTERVAL_SECONDS`; the moment it answers, every waiting run is handed back for
execution (by replay). A run that keeps failing while the store answers backs off on its own, so a
single broken run cannot spin.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

PROBE_INTERVAL_SECONDS = 0.25
FREE_RETRIES = 3  # consecutive failures a run may have before it backs off on its own
BACKOFF_MAX_SECONDS = 30.0


class StoreWaiter:
    """``probe()`` raises while the store fails; ``resume(run_id)`` executes a waiting run again."""

    def __init__(self, probe: Callable[[], object], resume: Callable[[str], None]) -> None:
        self._probe = probe
        self._resume = resume
        self._lock = threading.Lock()
        self._waiting: dict[str, float] = {}  # run id -> monotonic time it may resume
        self._failures: dict[str, int] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="exchange-store-waiter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def add(self, run_id: str) -> None:
        """The run stopped on a store failure: resume it once the store answers."""
        with self._lock:
            failures = self._failures.get(run_id, 0) + 1
            self._failures[run_id] = failures
            backoff = 0.0 if failures <= FREE_RETRIES else min(BACKOFF_MAX_SECONDS, 2.0 ** (failures - FREE_RETRIES))
            self._waiting[run_id] = time.monotonic() + backoff
        self._wake.set()

    def succeeded(self, run_id: str) -> None:
        """The run ended normally: forget its failures."""
        with self._lock:
            self._failures.pop(run_id, None)
            self._waiting.pop(run_id, None)

    def forget(self, run_id: str) -> None:
        with self._lock:
            self._waiting.pop(run_id, None)
            self._failures.pop(run_id, None)

    def clear(self) -> None:
        with self._lock:
            self._waiting.clear()
            self._failures.clear()

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
