"""``wait.until_tag_equals`` and ``wait.until_tag``: recorded steps that wait for a tag to reach a
value, or to compare with one (``>=``, ``<`` ...): one step however long they poll.

Given ``on_hold`` or ``on_resume`` a wait honours the run's commands while it waits (HOLD holds the
run and pauses the timeout, RESUME waits on, STOP raises StopRequested, ABORT AbortRequested),
still one step; see
:mod:`exchange.workflows.steps._wait_commands`. Without them commands stay in the mailbox for the
workflow's next ``recvCommand`` or ``checkpoint``, as they always did.

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
from typing import Any, cast

from exchange._arguments import optional_number, positive_number, shown
from exchange._engine import ON_ERROR, RunContext, current_run, library_step, stop_error
from exchange._tags.convert import values_equal
from exchange._tags.results import TagWaitResult
from exchange._tags.service import Bell
from exchange._tags.table import TagDef
from exchange._values import QualifiedValue
from exchange._values.model import DataType
from exchange.errors import InvalidArgument, OutsideRunError
from exchange.workflows.steps._wait_commands import CommandedWait
from exchange.workflows.steps.tags import tag_service

__all__ = ["until_tag", "until_tag_equals"]

_CALL = "wait.until_tag_equals"
_CALL_OP = "wait.until_tag"
_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}
OPERATORS = ("==", "!=", *_ORDER)
_TEXT_TYPES = (DataType.BOOLEAN, DataType.STRING)
Callback = Callable[[], Any]


class _Wanted:
    """What a wait is for, as its timeout error names it: ``>= 40.0``."""

    def __init__(self, op: str, value: Any) -> None:
        self.op, self.value = op, value

    def __repr__(self) -> str:
        return f"{self.op} {self.value!r}"


def until_tag_equals(
    path: str,
    expected: Any,
    timeout_ms: int = 10000,
    poll_ms: int = 250,
    tolerance: float | None = None,
    *,
    on_hold: Callback | None = None,
    on_resume: Callback | None = None,
    on_error: str | None = None,
) -> TagWaitResult:
    """Wait until ``path`` reads ``expected`` (Good quality); ConfirmTimeout after ``timeout_ms``.

    ``path`` a tag path (str); ``expected`` a value (not None, not NaN: neither ever equals a
    reading); ``timeout_ms`` and ``poll_ms`` finite numbers > 0; ``tolerance`` None or a finite
    number >= 0. A bad argument raises InvalidArgument before anything is read.

    Returns ``{path, value, quality, timestamp, elapsed_ms, holds, held_ms}`` of the value that
    matched (``elapsed_ms`` counts the time held; ``holds`` the HOLDs honoured, 0 without
    callbacks). The ConfirmTimeout names the path, the expected and the last seen value; it is a
    FatalError (not retried). An unknown or malformed path raises UnknownTag/TagPathError at once.

    ``on_hold`` / ``on_resume`` (None or functions without arguments; either given, the wait
    honours the run's commands): HOLD calls ``on_hold()``, the run reports HELD and the timeout
    stops running until RESUME, which calls ``on_resume()``, reports RUNNING and waits on; STOP
    (running or held) raises StopRequested carrying the command, ABORT AbortRequested (a
    StopRequested too). Still one recorded step; a gateway
    restart while held holds again without calling ``on_hold`` again. They need a run, and the
    wait to be a step of the workflow (not called inside another step): OutsideRunError /
    InvalidArgument otherwise. Without them a command waits in the mailbox until the wait ends.

    ``on_error`` (``"hold"`` or ``"raise"``; None: the workflow's ``on_step_error``) decides for this
    call alone what a failure does; the step wrapper takes it out of the call and checks it first.
    """
    return _ended(_until_tag_equals(path, expected, timeout_ms, poll_ms, tolerance, on_hold, on_resume,
                                    on_error=on_error))


@library_step("wait.until_tag_equals", per_call=(ON_ERROR,))
def _until_tag_equals(
    path: Any, expected: Any, timeout_ms: Any, poll_ms: Any, tolerance: Any, on_hold: Any, on_resume: Any, *,
    on_error: str | None = None,
) -> dict[str, Any]:
    if not isinstance(path, str):
        raise InvalidArgument(f"{_CALL}: path must be a tag path (a string), got {shown(path)}")
    if expected is None or (isinstance(expected, float) and math.isnan(expected)):
        raise InvalidArgument(f"{_CALL}: expected must be a value a tag can read, got {shown(expected)}")
    timeout_s = positive_number(_CALL, "timeout_ms", timeout_ms) / 1000
    poll_s = positive_number(_CALL, "poll_ms", poll_ms) / 1000
    tolerance = optional_number(_CALL, "tolerance", tolerance, minimum=0)
    hold, resume = _callback(_CALL, "on_hold", on_hold), _callback(_CALL, "on_resume", on_resume)
    tag = tag_service().tag(path)
    return _wait(_CALL, tag, _comparison("==", expected, tag.data_type, tolerance), expected, timeout_s, poll_s,
                 hold, resume)


def _comparison(op: str, value: Any, data_type: DataType | None, tolerance: float | None) -> Callable[[Any], bool]:
    if op == "==":
        return lambda reading: values_equal(reading, value, data_type, tolerance)
    if op == "!=":
        return lambda reading: not values_equal(reading, value, data_type, tolerance)
    compare = _ORDER[op]

    def ordered(reading: Any) -> bool:  # a reading that is not a number never satisfies an order
        return isinstance(reading, int | float) and not isinstance(reading, bool) and compare(reading, value)

    return ordered


def until_tag(
    path: str,
    op: str,
    value: Any,
    timeout_ms: int = 10000,
    poll_ms: int = 250,
    tolerance: float | None = None,
    *,
    on_hold: Callback | None = None,
    on_resume: Callback | None = None,
    on_error: str | None = None,
) -> TagWaitResult:
    """Wait until ``path`` reads a Good value for which ``reading OP value`` holds; one recorded step
    however long it waits (a replay answers the recorded outcome without reading).

    ``op`` one of ``==``, ``!=``, ``>=``, ``<=``, ``>``, ``<``; ``value`` a finite number for the
    order comparisons (never a bool), anything a tag reads for ``==``/``!=`` (floats compare with
    ``tolerance``, as in :func:`until_tag_equals`); ``timeout_ms``, ``poll_ms`` finite numbers > 0.
    An order comparison on a Boolean or String tag, or any other bad argument, raises
    InvalidArgument before anything is read. A reading with Bad quality never satisfies the wait.

    Returns ``{path, value, quality, timestamp, elapsed_ms, holds, held_ms}`` of the reading that
    satisfied it. ConfirmTimeout (a FatalError, not retried) names the path, the comparison
    (``>= 40.0``), the timeout (the time held not counted) and the last value seen. Event-driven
    where the driver subscribes (OPC UA), polled elsewhere.

    ``on_hold`` / ``on_resume``: the wait honours HOLD, RESUME and STOP, as in
    :func:`until_tag_equals` ("wait until the totaliser reaches 20 L or time out, holding the dose
    on HOLD" is one call and one step).

    ``on_error`` (``"hold"`` or ``"raise"``; None: the workflow's ``on_step_error``) decides for this
    call alone what a failure does; the step wrapper takes it out of the call and checks it first.
    """
    return _ended(_until_tag(path, op, value, timeout_ms, poll_ms, tolerance, on_hold, on_resume,
                             on_error=on_error))


@library_step("wait.until_tag", per_call=(ON_ERROR,))
def _until_tag(
    path: Any, op: Any, value: Any, timeout_ms: Any, poll_ms: Any, tolerance: Any, on_hold: Any, on_resume: Any, *,
    on_error: str | None = None,
) -> dict[str, Any]:
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
    hold, resume = _callback(_CALL_OP, "on_hold", on_hold), _callback(_CALL_OP, "on_resume", on_resume)
    tag = tag_service().tag(path)
    if op in _ORDER and tag.data_type in _TEXT_TYPES:
        raise InvalidArgument(f"{_CALL_OP}: tag {tag.path!r} is {tag.data_type.value}: it has no order for {op}")
    return _wait(_CALL_OP, tag, _comparison(op, value, tag.data_type, tolerance), _Wanted(op, value), timeout_s,
                 poll_s, hold, resume)


def _callback(call: str, name: str, value: Any) -> Callback | None:
    if value is not None and not callable(value):
        raise InvalidArgument(f"{call}: {name} must be None or a function without arguments, got {shown(value)}")
    return cast("Callback | None", value)


def _commanded_run(call: str) -> RunContext:
    """The run a wait with callbacks takes its commands from: the wait must be the run's own step."""
    ctx = current_run()
    if ctx is None:
        raise OutsideRunError(f"{call}: on_hold/on_resume follow a run's commands; call it inside a workflow run")
    if ctx.step is None or ctx.step.name != call:
        raise InvalidArgument(f"{call}: on_hold/on_resume need the wait to be a step of the workflow, not part of "
                              f"step {ctx.step.name if ctx.step else None!r}; wait in the workflow itself")
    return ctx


def _wait(call: str, tag: TagDef, predicate: Callable[[Any], bool], expected: Any, timeout_s: float,
          poll_s: float, on_hold: Callback | None, on_resume: Callback | None) -> dict[str, Any]:
    """The wait's outcome, recorded as the step's: the reading and the counts, or ``{"stopped": ...}``."""
    svc = tag_service()
    if on_hold is None and on_resume is None:  # as it always was: commands are not looked at
        ctx = current_run()
        started = time.monotonic()
        seen = svc.wait_for(
            tag.path,
            predicate,
            timeout_s=timeout_s,
            poll_s=poll_s,
            check_cancelled=ctx.check_cancelled if ctx is not None else None,
            sleep=ctx.sleep if ctx is not None else None,
            expected=expected,
        )
        return {"path": tag.path, **seen.to_dict(), "elapsed_ms": round((time.monotonic() - started) * 1000, 3),
                "holds": 0, "held_ms": 0.0}
    ctx = _commanded_run(call)

    def stretch(rest_s: float, check: Callable[[], None], bell: Bell) -> QualifiedValue:
        return svc.wait_for(tag.path, predicate, timeout_s=rest_s, poll_s=poll_s, check_cancelled=check,
                            expected=expected, bell=bell, timeout_named_s=timeout_s)

    wanted = expected if isinstance(expected, _Wanted) else _Wanted("==", expected)
    wait = CommandedWait(ctx, on_hold=on_hold, on_resume=on_resume, about={"wait": tag.path},
                         waiting_for=f"{tag.path} {wanted!r}")
    outcome = wait.run(stretch, timeout_s)
    reading = outcome.pop("reading", None)
    if reading is None:
        return {"path": tag.path, **outcome}
    return {"path": tag.path, **reading.to_dict(), **outcome}


def _ended(outcome: dict[str, Any]) -> TagWaitResult:
    """The wait's result, or the StopRequested (AbortRequested) its recorded outcome says a STOP
    (ABORT) ended it with."""
    stopped = outcome.get("stopped")
    if stopped is not None:
        raise stop_error(stopped)
    return cast(TagWaitResult, outcome)
