"""``[watchdog]``: the heartbeat a PLC watches to know that a gateway commands it.

The active gateway writes the tag every ``period_ms``: a counter from 1 to 32767 and round again
(never 0, which a PLC's register holds after its own restart), or, on a Boolean tag, true and false
in turn. When the gateway dies, is paused or loses the device, the value stands still and the PLC's
watchdog timer runs out: its program holds the phases (docs/plant-features.md shows the PLC side).
A standby writes nothing until it takes over: the gateway starts the watchdog once it is active.

A beat that fails (the device is away, an answer was lost) is logged once a minute and the next
beat is written on time; nothing is queued, since an old heartbeat means nothing.
"""

from __future__ import annotations

import logging
import threading
import time

from exchange._config_phases import WatchdogConfig
from exchange._tags.service import TagService
from exchange._values import DataType
from exchange.errors import ExchangeError

log = logging.getLogger(__name__)

COUNTER_MAX = 32767  # fits every integer type a PLC register may be (Int16 the smallest)
FAILURE_LOG_SECONDS = 60.0


class Watchdog:
    """Writes ``config.tag`` every ``config.period_ms`` in a thread of its own (:meth:`start`)."""

    def __init__(self, tags: TagService, config: WatchdogConfig) -> None:
        assert config.tag is not None, "a watchdog needs its tag"
        self.tags = tags
        self.path = config.tag
        self.period_seconds = config.period_ms / 1000
        self.boolean = tags.tag(self.path).data_type is DataType.BOOLEAN
        self.beats = 0  # beats written
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_failure_log = float("-inf")

    def value(self, beat: int) -> bool | int:
        """What beat number ``beat`` (from 0) writes."""
        return beat % 2 == 0 if self.boolean else beat % COUNTER_MAX + 1

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="exchange-watchdog", daemon=True)
        self._thread.start()
        log.info("watchdog: writing %s every %s ms", self.path, int(self.period_seconds * 1000))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        due = time.monotonic()
        beat = 0
        while not self._stop.is_set():
            try:
                self.tags.write([self.path], [self.value(beat)])
                self.beats += 1
            except ExchangeError as exc:
                now = time.monotonic()
                if now - self._last_failure_log >= FAILURE_LOG_SECONDS:
                    self._last_failure_log = now
                    log.warning("watchdog: writing %s failed (%s); the PLC sees the heartbeat stand still",
                                self.path, exc)
            beat += 1
            due += self.period_seconds
            # A write that took longer than a period skips the beats it missed: never a burst.
            due = max(due, time.monotonic())
            self._stop.wait(max(0.0, due - time.monotonic()))
