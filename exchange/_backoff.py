"""Exponential backoff for reconnects and retries: a first delay, doubling up to a ceiling.

One helper for every place that waits between attempts at something that is down: the Modbus,
OPC UA and EtherNet/IP drivers between connection attempts, and the tag layer between deliveries
of a write to a device that cannot be reached. It only computes delays; the caller decides how to
wait (sleep, a retry-at time, an event-loop timer), so it never blocks and holds no clock.

Not thread-safe: each user keeps its own instance under the lock it already holds.
"""

from __future__ import annotations

__all__ = ["Backoff"]


class Backoff:
    """Delays ``first_s``, ``2 * first_s``, ``4 * first_s``, ... capped at ``max_s``.

    :meth:`next_s` returns the delay to wait now and doubles the one after it; :meth:`reset` (call
    it once the thing works again) starts over at ``first_s``. Both bounds are seconds, with
    ``0 < first_s <= max_s`` (ValueError otherwise: a zero delay would retry in a busy loop).
    """

    __slots__ = ("first_s", "max_s", "_next_s")

    def __init__(self, first_s: float, max_s: float) -> None:
        if not 0 < first_s <= max_s:
            raise ValueError(f"backoff needs 0 < first_s <= max_s, got {first_s!r} and {max_s!r}")
        self.first_s = first_s
        self.max_s = max_s
        self._next_s = first_s

    @classmethod
    def from_ms(cls, first_ms: float, max_ms: float) -> Backoff:
        """The same, from the ``reconnect_min_ms`` / ``reconnect_max_ms`` a device's settings give."""
        return cls(first_ms / 1000, max_ms / 1000)

    def next_s(self) -> float:
        """The delay to wait now; the following call returns twice as much, up to ``max_s``."""
        delay = self._next_s
        self._next_s = min(delay * 2, self.max_s)
        return delay

    def reset(self) -> None:
        """Start over at ``first_s`` (the connection works again)."""
        self._next_s = self.first_s

    def __repr__(self) -> str:
        return f"Backoff(first_s={self.first_s!r}, max_s={self.max_s!r}, next={self._next_s!r})"
