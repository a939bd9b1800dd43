"""Durable sleep for workflows."""

from __future__ import annotations

import time

from exchange._arguments import number, positive_number
from exchange._engine import current_run, sleep_in_run, store_guard

__all__ = ["sleep_chunked", "sleep_ms"]


@store_guard
def sleep_chunked(total_ms: float, chunk_ms: float = 250) -> None:
    """Sleep ``total_ms``, noticing cancellation every ``chunk_ms``.

    ``total_ms`` must be a finite number >= 0 and ``chunk_ms`` a finite number > 0: anything else
    (NaN, an infinity, a negative number, a bool, a string) raises InvalidArgument before the sleep
    starts or anything is recorded.

    Inside a run the wake-up time is recorded before sleeping, so after a restart only the rest is
    slept; the sleep leaves no step row (idle loops keep the store small). Outside a run it is a plain
    sleep in chunks.
    """
    total = number("sleep_chunked", "total_ms", total_ms, minimum=0)
    chunk = positive_number("sleep_chunked", "chunk_ms", chunk_ms)
    ctx = current_run()
    if ctx is None:
        deadline = time.monotonic() + total / 1000
        while (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(remaining, chunk / 1000))
        return
    sleep_in_run(ctx, total / 1000, chunk / 1000)


def sleep_ms(ms: float) -> None:
    """Sleep ``ms`` milliseconds, durably: ``sleep_chunked(ms)`` (cancellation noticed at once; a
    restart sleeps only the rest of a long sleep). ``ms`` a finite number >= 0 (InvalidArgument
    otherwise, before anything is recorded)."""
    number("sleep_ms", "ms", ms, minimum=0)
    sleep_chunked(total_ms=ms)
