"""A delivery listener for tests: it keeps what a delivery reported, and the waits it made."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from exchange._tags.delivery import WaitHooks
from exchange._tags.table import TagWrite


@dataclass
class Heard:
    """What a delivery reported, as (kind, tag paths, how), and its waits as (device, reason)."""

    events: list[tuple[str, list[str], str]] = field(default_factory=list)
    waits: list[tuple[str, str]] = field(default_factory=list)

    def written(self, items: Sequence[TagWrite], confirmed_by: str) -> None:
        self.events.append(("written", [i.tag.path for i in items], confirmed_by))

    def in_doubt(self, items: Sequence[TagWrite], error: str, resolution: str) -> None:
        self.events.append(("in_doubt", [i.tag.path for i in items], resolution))

    def failed(self, items: Sequence[TagWrite], quality: str, error: str) -> None:
        self.events.append(("failed", [i.tag.path for i in items], quality))

    def hooks(self, check: Callable[[], None] | None = None) -> WaitHooks:
        """Hooks that note every wait and sleep for real (``check`` may end the wait)."""

        def waiting(device: str, reason: str, waited_s: float, timeout_s: float) -> None:
            self.waits.append((device, reason))

        if check is None:
            return WaitHooks(waiting=waiting, sleep=time.sleep)
        return WaitHooks(waiting=waiting, sleep=time.sleep, check=check)
