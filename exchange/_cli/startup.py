"""The phases of a gateway's start, timed for its log (and for ``bench/recovery.py``).

The gateway logs one INFO line once its recovered runs are handed to workers::

    start-up: imports 412 ms, config 30 ms, store 15 ms, apps 3 ms, services 1 ms, recovery 43 ms (began 1764161971.123)

``began`` is when the process began importing the command (the time before it is the interpreter's
own start; in a process forked from one that had imported it, as the test suite's zygote does, when
the gateway command began); each phase lasts from the end of the one before. ``recovery`` is the
node lock, the take-over of this node's unfinished runs and handing them to workers (for a standby,
also its wait).
"""

from __future__ import annotations

import os
import time

from exchange._cli import STARTED_AT, STARTED_IN_PID


class Phases:
    """Marks the end of each start-up phase; the first, ``imports``, ends when this is made."""

    def __init__(self) -> None:
        self.began_at = STARTED_AT if os.getpid() == STARTED_IN_PID else time.time()
        self.marks: list[tuple[str, float]] = []
        self.mark("imports")

    def mark(self, phase: str) -> None:
        self.marks.append((phase, time.time()))

    def __str__(self) -> str:
        spans, previous = [], self.began_at
        for phase, at in self.marks:
            spans.append(f"{phase} {(at - previous) * 1000:.0f} ms")
            previous = at
        return f"{', '.join(spans)} (began {self.began_at:.3f})"
