"""Each device's link as the tag service last found it: up when its last request was answered, down
when it could not be reached, with when that changed and why. Operators and monitoring read it
(``/metrics``' ``exchange_device_link_up``); a device nobody asked anything yet is not listed."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class LinkState:
    up: bool
    since: float  # epoch seconds of the last change between up and down
    error: str | None  # why it is down


class LinkStates:
    """Thread-safe; recording costs a dictionary lookup when nothing changed."""

    def __init__(self) -> None:
        self._states: dict[str, LinkState] = {}
        self._lock = threading.Lock()

    def reached(self, device: str) -> None:
        state = self._states.get(device)
        if state is None or not state.up:
            with self._lock:
                self._states[device] = LinkState(True, time.time(), None)

    def lost(self, device: str, error: str) -> None:
        state = self._states.get(device)
        with self._lock:
            since = state.since if state is not None and not state.up else time.time()
            self._states[device] = LinkState(False, since, error)

    def snapshot(self) -> dict[str, LinkState]:
        """Per device asked at least once: its link state now."""
        with self._lock:
            return dict(self._states)
