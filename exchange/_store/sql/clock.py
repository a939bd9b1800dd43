"""One clock for every gateway: the store's.

Leases decide which gateway may execute a run, and sleeps, retry times and run deadlines outlive the
process that set them; if each machine used its own wall clock, a skewed or stepped clock would hand
a run to a second gateway too early or make a resumed sleep too long. So lease times are computed by
the database itself inside the statements that set and compare them (:func:`now_sql`), and the times
the engine computes in Python come from :class:`StoreClock`: the local clock corrected by the offset
to the store's clock, measured when the store opens and again at every lease renewal.

Waiting is measured with the monotonic clock: a durable time is turned into "seconds from now" once,
when the wait starts, so a wall-clock step during a wait does not change it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# An offset within the measurement's own uncertainty (half the round trip, plus SQLite's millisecond
# resolution) is noise, not skew: the local clock is used as it is, so times written and read back
# on one machine agree exactly.
NOISE_SECONDS = 0.002

# Seconds since the epoch as a double, read from the database server's clock.
_NOW_SQL = {
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)",
}


def now_sql(dialect: str) -> str:
    """An SQL expression for the store's current time in epoch seconds."""
    return _NOW_SQL[dialect]


class StoreClock:
    """The store's time, read locally: ``time.time()`` plus the measured offset to the store."""

    def __init__(self, read_store_now: Callable[[], float]) -> None:
        self._read_store_now = read_store_now
        self._offset_seconds = 0.0
        self._uncertainty_seconds = 0.0
        self._lock = threading.Lock()

    @property
    def offset_seconds(self) -> float:
        return self._offset_seconds

    @property
    def uncertainty_seconds(self) -> float:
        """How far the offset may be off: half the round trip of the last measurement."""
        return self._uncertainty_seconds

    def sync(self) -> float:
        """Measure the offset again (one query); returns it. The midpoint of the round trip is taken
        as the moment the store read its clock."""
        sent = time.time()
        store_now = self._read_store_now()
        received = time.time()
        uncertainty = (received - sent) / 2
        offset = store_now - (sent + received) / 2
        if abs(offset) <= uncertainty + NOISE_SECONDS:
            offset = 0.0
        with self._lock:
            self._offset_seconds = offset
            self._uncertainty_seconds = uncertainty
        return offset

    def now(self) -> float:
        """The store's current time in epoch seconds."""
        return time.time() + self._offset_seconds

    def seconds_until(self, at: float) -> float:
        """Seconds from now until store time ``at`` (negative when it has passed)."""
        return at - self.now()

    def seconds_until_passed(self, at: float) -> float:
        """Seconds to wait from now so that store time ``at`` has surely passed: :meth:`seconds_until`
        plus the offset's uncertainty. A recorded retry time or a sleep's end read back by another
        process must never be reached early (a server's Retry-After), and a measurement whose query
        reached the store late makes the local reading of the store's clock run ahead by up to
        half the round trip."""
        return at - self.now() + self._uncertainty_seconds
