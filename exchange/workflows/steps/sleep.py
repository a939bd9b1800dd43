"""Durable sleep for workflows."""

from __future__ import annotations

import time

from exchange.workflows.engine import inrun
from exchange.workflows.engine.context import current_run, store_guard


@store_guard
def sleep_chunked(total_ms: float, chunk_ms: float = 250) -> None:
    """Sleep ``total_ms``, noticing cancellation every ``chunk_ms``.

    Inside a run the wake-up time is recorded before sleeping, so after a restart only the rest is
    slept; the sleep leaves no step row (idle loops keep the store small). Outside a run it is a plain
    sleep in chunks.
    """
    if total_ms < 0 or chunk_ms <= 0:
        raise ValueError(f"sleep_chunked needs total_ms >= 0 and chunk_ms > 0, got {total_ms}, {chunk_ms}")
    ctx = current_run()
    if ctx is None:
        deadline = time.monotonic() + total_ms / 1000
        while (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(remaining, chunk_ms / 1000))
        return
    inrun.sleep(ctx, total_ms / 1000, chunk_ms / 1000)
