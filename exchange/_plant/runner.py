"""The gateway's thread for schedules, triggers and command tags."""

from __future__ import annotations

import logging
import threading

from exchange._engine import Runtime
from exchange._plant.edges import EdgeWatcher
from exchange._plant.schedules import Scheduler
from exchange._tags.service import TagService

log = logging.getLogger(__name__)

STORE_RETRY_SECONDS = 1.0


class PlantFeatures:
    """Started by the gateway once it serves; does nothing when none is configured."""

    def __init__(self, runtime: Runtime, tags: TagService) -> None:
        config = runtime.config
        self.scheduler = Scheduler(runtime, dict(config.schedules))
        self.edges = EdgeWatcher(runtime, tags, dict(config.triggers), dict(config.command_tags))
        self.runtime = runtime
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def configured(self) -> bool:
        return bool(self.scheduler.schedules or self.edges.paths)

    def start(self) -> None:
        if self.scheduler.schedules:
            self._threads.append(threading.Thread(target=self._schedules, name="exchange-schedules", daemon=True))
        if self.edges.paths:
            self._threads.append(threading.Thread(target=self._watch, name="exchange-triggers", daemon=True))
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)

    def _schedules(self) -> None:
        while not self._stop.is_set():
            try:
                soonest = self.scheduler.run_due()
                wait = max(0.0, min(1.0, self.runtime.store.clock.seconds_until(soonest)))
            except Exception:  # the store is away, a bad expression: try again
                log.exception("schedules failed; trying again")
                wait = STORE_RETRY_SECONDS
            self._stop.wait(wait)

    def _watch(self) -> None:
        try:
            self.edges.subscribe()
        except Exception:  # a device down at start: its tags are polled
            log.exception("subscribing to the triggers' tags failed; polling them")
        try:
            while not self._stop.is_set():
                try:
                    self.edges.poll()
                except Exception:
                    log.exception("triggers failed; trying again")
                    self._stop.wait(STORE_RETRY_SECONDS)
                self.edges.wait(self._stop)
        finally:
            self.edges.close()
