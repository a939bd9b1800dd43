"""``wait.until_tag_equals``: a recorded step that waits for a tag to reach a value.

Event-driven where the tag's driver subscribes (OPC UA), polled every ``poll_ms`` elsewhere; floats
compare with a tolerance. Cancellation is noticed within one poll. The outcome (the value seen, or
the ConfirmTimeout) is recorded, so a replay follows the same path without waiting again.

Every argument is checked before the first read: a bad one raises InvalidArgument (a FatalError: the
step is not retried) naming the parameter; the tag layer checks the path itself (TagPathError,
UnknownTag) before anything is read too.
"""

from __future__ import annotations

import math
import time
from typing import Any

from exchange._arguments import optional_number, positive_number, shown
from exchange.errors import InvalidArgument
from exchange.workflows._engine.context import current_run
from exchange.workflows._engine.decorators import step
from exchange.workflows.steps.tags import tag_service

__all__ = ["until_tag_equals"]

_CALL = "wait.until_tag_equals"


@step(name="wait.until_tag_equals")
def until_tag_equals(
    path: str,
    expected: Any,
    timeout_ms: int = 10000,
    poll_ms: int = 250,
    tolerance: float | None = None,
) -> dict[str, Any]:
    """Wait until ``path`` reads ``expected`` (Good quality); ConfirmTimeout after ``timeout_ms``.

    ``path`` a tag path (str); ``expected`` a value (not None, not NaN: neither ever equals a
    reading); ``timeout_ms`` and ``poll_ms`` finite numbers > 0; ``tolerance`` None or a finite
    number >= 0. A bad argument raises InvalidArgument before anything is read.

    Returns ``{path, value, quality, timestamp, elapsed_ms}`` of the value that matched. The
    ConfirmTimeout names the path, the expected and the last seen value; it is a FatalError (not
    retried). An unknown or malformed path raises UnknownTag/TagPathError at once.
    """
    if not isinstance(path, str):
        raise InvalidArgument(f"{_CALL}: path must be a tag path (a string), got {shown(path)}")
    if expected is None or (isinstance(expected, float) and math.isnan(expected)):
        raise InvalidArgument(f"{_CALL}: expected must be a value a tag can read, got {shown(expected)}")
    timeout_s = positive_number(_CALL, "timeout_ms", timeout_ms) / 1000
    poll_s = positive_number(_CALL, "poll_ms", poll_ms) / 1000
    tolerance = optional_number(_CALL, "tolerance", tolerance, minimum=0)
    svc = tag_service()
    ctx = current_run()
    tag = svc.tag(path)
    started = time.monotonic()
    seen = svc.wait_for_value(
        tag.path,
        expected,
        timeout_s=timeout_s,
        poll_s=poll_s,
        check_cancelled=ctx.check_cancelled if ctx is not None else None,
        sleep=ctx.sleep if ctx is not None else None,
        tolerance=tolerance,
    )
    return {
        "path": tag.path,
        **seen.to_dict(),
        "elapsed_ms": round((time.monotonic() - started) * 1000, 3),
    }
