"""Watching a tag for changes on any device: a driver's own subscription where it has one (OPC UA),
else one shared poller per device and interval.

A step that follows a tag for a long time (``phase.run`` following a phase's state) asks to be
called when the value changes. Polled alone, 200 runs following 200 phases on one Modbus PLC would
each send a request every interval; :class:`DevicePoller` reads every watched tag of a device in one
request per interval (the driver batches them) and calls back only the watchers whose value
changed. A callback runs on the poller's thread (or the driver's): it must be quick, e.g. ring a bell.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Protocol

from exchange._drivers.base import Subscription as Watch  # a watch is cancelled as a subscription is

__all__ = ["DevicePoller", "OnChange", "Reader", "Watch"]
from exchange._tags.table import TagDef
from exchange._values import QualifiedValue

log = logging.getLogger(__name__)

OnChange = Callable[[QualifiedValue], None]


class Reader(Protocol):
    def read_tags(self, tags: list[TagDef], *, explicit: bool = False) -> list[QualifiedValue]: ...


@dataclass
class _Watcher:
    tag: TagDef
    on_change: OnChange
    last: tuple[object, str] | None = None  # (value, quality) last told


@dataclass
class DevicePoller:
    """Every watched tag of one device, read together every ``interval_s`` on a thread of its own,
    which ends when the last watch is cancelled (or the poller is closed)."""

    reader: Reader
    device: str
    interval_s: float
    _watchers: dict[int, _Watcher] = field(default_factory=dict)
    _ids: count[int] = field(default_factory=count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _closed: bool = False

    def watch(self, tag: TagDef, on_change: OnChange) -> Watch:
        """Call ``on_change`` with the tag's value at the next poll and then at every change."""
        with self._lock:
            watch_id = next(self._ids)
            self._watchers[watch_id] = _Watcher(tag, on_change)
            if self._thread is None or not self._thread.is_alive():
                self._wake.clear()
                self._thread = threading.Thread(target=self._run, name=f"tag-watch-{self.device}", daemon=True)
                self._thread.start()
        return _Cancel(self, watch_id)

    def cancel(self, watch_id: int) -> None:
        with self._lock:
            self._watchers.pop(watch_id, None)
            if not self._watchers:
                self._wake.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._watchers.clear()
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed or not self._watchers:
                    self._thread = None
                    return
                self._wake.clear()  # a cancel from now on cuts this pause short
                watchers = list(self._watchers.values())
            tags = list({watcher.tag.path: watcher.tag for watcher in watchers}.values())  # each tag once
            try:
                values = dict(zip((t.path for t in tags), self.reader.read_tags(tags), strict=True))
            except Exception as exc:  # noqa: BLE001 - a closed service, a bug in a driver: say it, go on
                log.warning("watching device %s: read failed: %s", self.device, exc)
                values = {}
            for watcher in watchers:
                value = values.get(watcher.tag.path)
                if value is None:
                    continue
                seen = (value.value, value.quality.value)
                if seen != watcher.last:
                    watcher.last = seen
                    try:
                        watcher.on_change(value)
                    except Exception:  # one watcher's failure must not stop the others' news
                        log.exception("watching %s: a callback failed", watcher.tag.path)
            self._wake.wait(self.interval_s)


@dataclass(frozen=True)
class _Cancel:
    poller: DevicePoller
    watch_id: int

    def cancel(self) -> None:
        self.poller.cancel(self.watch_id)
