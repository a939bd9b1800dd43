"""``wait.until_tag_equals`` and ``wait.until_tag``: recorded steps that wait for a tag to reach a
value, or to compare with one (``>=``, ``<`` ...): one step however long they poll.

Event-driven where the tag's driver subscribes (OPC UA), polled every ``poll_ms`` elsewhere; floats
compare with a tolerance. Cancellation is noticed within one poll. The outcome (the value seen, or
the ConfirmTimeout) is recorded, so a replay follows the same path without waiting again.

Every argument is checked before the first read: a bad one raises InvalidArgument (a FatalError: the
step is not retried) naming the parameter; the tag layer checks the path itself (TagPathError,
UnknownTag) before anything is read too.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable
from typing import Any

from exchange._arguments import optional_number, positive_number, shown
from exchange._engine import ON_ERROR, current_run, library_step
from exchange._tags.convert import values_equal
from exchange._tags.results import TagWaitResult
from exchange._values.model import DataType
from exchange.errors import InvalidArgument
from exchange.workflows.steps.tags import tag_service

__all__ = ["until_tag", "until_tag_equals"]

_CALL = "wait.until_tag_equals"
_CALL_OP = "wait.until_tag"
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}
OPERATORS = ("==", "!=", *_ORDER)
_TEXT_TYPES = (DataType.BOOLEAN, DataType.STRING)


class _Wanted:
    """What a wait is for, as its timeout error names it: ``>= 40.0``."""

    def __init__(self, op: str, value: Any) -> None:
        self.op, self.value = op, value

    def __repr__(self) -> str:
        return f"{self.op} {self.value!r}"


@library_step("wait.until_tag_equals", per_call=(ON_ERROR,))
def until_tag_equals(
    path: str,
    expected: Any,
    timeout_ms: int = 10000,
    poll_ms: int = 250,
    tolerance: float | None = None,
    *,
    on_error: str | None = None,
) -> TagWaitResult:
    """Wait until ``path`` reads ``expected`` (Good quality); ConfirmTimeout after ``timeout_ms``.

    ``path`` a tag path (str); ``expected`` a value (not None, not NaN: neither ever equals a
    reading); ``timeout_ms`` and ``poll_ms`` finite numbers > 0; ``tolerance`` None or a finite
    number >= 0. A bad argument raises InvalidArgument before anything is read.

    Returns ``{path, value, quality, timestamp, elapsed_ms}`` of the value that matched. The
    ConfirmTimeout names the path, the expected and the last seen value; it is a FatalError (not
    retried). An unknown or malformed path raises UnknownTag/TagPathError at once.

    ``on_error`` (``"hold"`` or ``"raise"``; None: the workflow's ``on_step_error``) decides for this
    call alone what a failure does; the step wrapper takes it out of the call and checks it first.
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


def _comparison(op: str, value: Any, data_type: DataType | None, tolerance: float | None) -> Callable[[Any], bool]:
    if op == "==":
        return lambda reading: values_equal(reading, value, data_type, tolerance)
    if op == "!=":
        return lambda reading: not values_equal(reading, value, data_type, tolerance)
    compare = _ORDER[op]

    def ordered(reading: Any) -> bool:  # a reading that is not a number never satisfies an order
        return isinstance(reading, int | float) and not isinstance(reading, bool) and compare(reading, value)

    return ordered


@library_step("wait.until_tag", per_call=(ON_ERROR,))
def until_tag(
    path: str,
    op: str,
    value: Any,
    timeout_ms: int = 10000,
    poll_ms: int = 250,
    tolerance: float | None = None,
    *,
    on_error: str | None = None,
) -> TagWaitResult:
    """Wait until ``path`` reads a Good value for which ``reading OP value`` holds; one recorded step
    however long it waits (a replay answers the recorded outcome without reading).

    ``op`` one of ``==``, ``!=``, ``>=``, ``<=``, ``>``, ``<``; ``value`` a finite number for the
    order comparisons (never a bool), anything a tag reads for ``==``/``!=`` (floats compare with
    ``tolerance``, as in :func:`until_tag_equals`); ``timeout_ms``, ``poll_ms`` finite numbers > 0.
    An order comparison on a Boolean or String tag, or any other bad argument, raises
    InvalidArgument before anything is read. A reading with Bad quality never satisfies the wait.

    Returns ``{path, value, quality, timestamp, elapsed_ms}`` of the reading that satisfied it.
    ConfirmTimeout (a FatalError, not retried) names the path, the comparison (``>= 40.0``) and
    the last value seen. Event-driven where the driver subscribes (OPC UA), polled elsewhere.

    ``on_error`` (``"hold"`` or ``"raise"``; None: the workflow's ``on_step_error``) decides for this
    call alone what a failure does; the step wrapper takes it out of the call and checks it first.
    """
    if not isinstance(path, str):
        raise InvalidArgument(f"{_CALL_OP}: path must be a tag path (a string), got {shown(path)}")
    if not isinstance(op, str) or op.strip() not in OPERATORS:
        raise InvalidArgument(f"{_CALL_OP}: op must be one of {', '.join(OPERATORS)}, got {shown(op)}")
    op = op.strip()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise InvalidArgument(f"{_CALL_OP}: value must be a value a tag can read, got {shown(value)}")
    if op in _ORDER and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)):
        raise InvalidArgument(f"{_CALL_OP}: {op} needs a finite number to compare with, got {shown(value)}")
    timeout_s = positive_number(_CALL_OP, "timeout_ms", timeout_ms) / 1000
    poll_s = positive_number(_CALL_OP, "poll_ms", poll_ms) / 1000
    tolerance = optional_number(_CALL_OP, "tolerance", tolerance, minimum=0)
    svc = tag_service()
    tag = svc.tag(path)
    if op in _ORDER and tag.data_type in _TEXT_TYPES:
        raise InvalidArgument(f"{_CALL_OP}: tag {tag.path!r} is {tag.data_type.value}: it has no order for {op}")
    ctx = current_run()
    started = time.monotonic()
    seen = svc.wait_for(
        tag.path,
        _comparison(op, value, tag.data_type, tolerance),
        timeout_s=timeout_s,
        poll_s=poll_s,
        check_cancelled=ctx.check_cancelled if ctx is not None else None,
        sleep=ctx.sleep if ctx is not None else None,
        expected=_Wanted(op, value),
    )
    return {"path": tag.path, **seen.to_dict(), "elapsed_ms": round((time.monotonic() - started) * 1000, 3)}
