"""Counters a gateway keeps about its own store traffic, for ``/metrics``: cheap to update on the hot
path (a lock-free add under the GIL is close enough for monitoring), read at scrape time."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

# seconds: a local SQLite commit takes ~0.1-1 ms, a PostgreSQL one over a LAN 1-5 ms
LATENCY_BUCKETS_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass
class Histogram:
    """Counts per upper bound (cumulative when read), a sum and a count, as Prometheus wants them."""

    bounds: tuple[float, ...] = LATENCY_BUCKETS_SECONDS
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_SECONDS) + 1))
    total: float = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count)`` pairs, the last one ``+Inf``."""
        running = 0
        pairs: list[tuple[str, int]] = []
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts):
            running += count
            pairs.append((bound, running))
        return pairs


@dataclass
class StoreStats:
    unit_seconds: Histogram = field(default_factory=Histogram)  # a group-committed write, caller's view
    steps_recorded: int = 0
