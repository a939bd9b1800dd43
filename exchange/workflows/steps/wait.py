"""``wait.until_tag_equals``: a recorded step that waits for a tag to reach a value.

Event-driven where the tag's driver subscribes (OPC UA), polled every ``poll_ms`` elsewhere; floats
compare with a tolerance. Cancellation is noticed within one poll. The outcome (the value seen, or
the ConfirmTimeout) is recorded, so a replay follows the same path without waiting again.
"""

from __future__ import annotations

import time
from typing import Any

from exchange.workflows.engine.context import current_run
from exchange.workflows.engine.decorators import step
from exchange.workflows.steps.tags import tag_service

__all__ = ["until_tag_equals"]


@step(name="wait.until_tag_equals")
def until_tag_equals(
    path: str,
    expected: Any,
    timeout_ms: int = 10000,
    poll_ms: int = 250,
    tolerance: float | None = None,
) -> dict[str, Any]:
    """Wait until ``path`` reads ``expected`` (Good quality); ConfirmTimeout after ``timeout_ms``.

    Returns ``{path, value, quality, timestamp, elapsed_ms}`` of the value that matched. The
    ConfirmTimeout names the path, the expected and the last seen value; it is a FatalError (not
    retried). An unknown or malformed path raises UnknownTag/TagPathError at once.
    """
    svc = tag_service()
    ctx = current_run()
    tag = svc.tag(path)
    started = time.monotonic()
    seen = svc.wait_for_value(
        tag.path,
        expected,
        timeout_s=timeout_ms / 1000,
        poll_s=poll_ms / 1000,
        check_cancelled=ctx.check_cancelled if ctx is not None else None,
        sleep=ctx.sleep if ctx is not None else None,
        tolerance=tolerance,
    )
    return {
        "path": tag.path,
        **seen.to_dict(),
        "elapsed_ms": round((time.monotonic() - started) * 1000, 3),
    }
