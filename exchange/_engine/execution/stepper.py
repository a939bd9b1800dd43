"""Executing one step call durably: replay a recorded outcome, or run it under its retry policy.

The outcome is committed before the call returns or raises. The attempt count and the time of the
next attempt are committed too (a RETRYING row), so a crash during a backoff resumes the same attempt
count and waits only the rest of the backoff. A step body about to make an irreversible side effect
(a tag write) commits a STARTED row first (:meth:`RunContext.begin_side_effect`); an execution that
finds one runs the step as its next attempt with :attr:`StepCall.resumed_in_doubt` set. A step that
fails for good after its last attempt began such a side effect says so on its ERROR row
(``side_effect``): a retry of the run (:mod:`exchange._store.runs.rerun`) turns the row back
into a STARTED mark, so the step runs again in doubt, as after a crash.

Before a step body starts, the answers that steered the run there are made durable and the
execution's lease is checked; an unreachable store inside the body is an outage (the run is executed
again later), never the step's recorded outcome.

In a workflow declared ``on_step_error="hold"``, or for a step declared (or called) with
``on_error="hold"``, a step that fails after its retries is held for an operator instead of raising
(:mod:`exchange._engine.execution.hold`): a RESUME runs it again from attempt 1, a STOP raises its error; a
HELD row found on replay waits again without executing. A step's ``on_error="raise"`` raises even
in a workflow that holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exchange._engine.execution import hold, replay
from exchange._engine.execution.context import RunContext, StepCall, store_guard
from exchange._engine.execution.retry import RetryPolicy
from exchange._store import (
    HELD_STEP_STATUSES,
    STEP_ERROR,
    STEP_RETRYING,
    STEP_STARTED,
    STEP_SUCCESS,
    NewEvent,
    StepRecord,
    codec,
)
from exchange.errors import NonDeterminismError, OutputTooLarge, StepOutputError, StoreError, StoreLost

log = logging.getLogger(__name__)

ERROR_TYPE_MAX_CHARS = 200  # the column's size
ERROR_MESSAGE_MAX_CHARS = 10_000


@dataclass(frozen=True)
class StepDef:
    name: str
    fn: Callable[..., Any]
    policy: RetryPolicy
    on_error: str | None = None  # "raise" or "hold": overrides the workflow's on_step_error; None: the workflow's

    def holds(self, ctx: RunContext) -> bool:
        """Whether a failure after the retries holds the run (the step's on_error, else the workflow's)."""
        return (self.on_error or ctx.on_step_error) == hold.HOLD


@store_guard
def call_step(ctx: RunContext, definition: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if ctx.step is not None:
        # A step called from inside another step is part of the outer step's body: the outer
        # outcome is what gets recorded, so the inner one runs plainly.
        return definition.fn(*args, **kwargs)
    try:
        placement = replay.place(ctx, definition.name, quiet_able=False)
    except NonDeterminismError as exc:
        exc.arguments = arguments_shape(args, kwargs)  # what the code calls now: a check's report, a hold's log
        raise
    rec = placement.record
    seq = ctx.next_seq
    if rec is not None and rec.status == STEP_SUCCESS:
        replay.advance(ctx, seq)
        return codec.loads(rec.output)
    if rec is not None and rec.status == STEP_ERROR:
        replay.advance(ctx, seq)
        raise replay.rebuild_error(rec)
    if ctx.check_only:  # a step in progress (retrying, in doubt, held): executing it is past the record
        raise replay.HistoryEnded(seq, definition.name, f"the step is in progress ({rec.status})"
                                  if rec is not None else "the recorded history ends here")
    # Left: a RETRYING row (resume its backoff), a STARTED one (an attempt died in its side effect) or
    # a HELD one (wait for the operator again); or no row, a first call.
    if rec is not None or ctx.quiet_count > ctx.quiet_durable:
        ctx.check_cancelled()
        ctx.make_answers_durable()
    # (A first call with no answers to write is checked once, right before its body: _execute.)
    return _execute(ctx, definition, seq, rec, args, kwargs)


def arguments_shape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The types of a call's arguments, not their values: ``(str, int, speed=float)``."""
    shown = [type(value).__name__ for value in args]
    shown += [f"{key}={type(value).__name__}" for key, value in kwargs.items()]
    return "(" + ", ".join(shown) + ")"


def error_fields(exc: BaseException) -> tuple[str, str]:
    """The error's type name and message as the store can hold them: within the columns' sizes, no
    NUL byte, nothing that cannot be encoded (a step's error must be recordable whatever it says)."""
    try:
        message = str(exc)
    except Exception as broken:  # a __str__ that raises must not make the failure unrecordable
        message = f"<str() of the error failed: {type(broken).__name__}>"
    type_name = storable_text(replay.error_type_name(exc))
    if len(type_name) > ERROR_TYPE_MAX_CHARS:
        type_name = "..." + type_name[-(ERROR_TYPE_MAX_CHARS - 3):]
    return type_name, storable_text(message, ERROR_MESSAGE_MAX_CHARS)


def storable_text(text: str, max_chars: int | None = None) -> str:
    """``text`` with NUL bytes and unencodable characters escaped, cut at ``max_chars``."""
    clean = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    if max_chars is not None and len(clean) > max_chars:
        clean = clean[:max_chars] + f"... ({len(clean) - max_chars} more characters)"
    return clean


def _execute(
    ctx: RunContext,
    definition: StepDef,
    seq: int,
    retrying: StepRecord | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    store = ctx.store
    clock = store.clock
    if retrying is None:  # a first call
        in_doubt, attempts, next_attempt_at = False, 0, None
        started_at, skipped = clock.now(), ctx.quiet_count
    else:
        in_doubt = retrying.status == STEP_STARTED
        # An attempt cut off in its side effect is executed again as the same attempt (a crash does
        # not use up the retry budget); its STARTED row stays the mark of that attempt.
        attempts = retrying.attempts - (1 if in_doubt else 0)
        next_attempt_at = retrying.next_attempt_at
        started_at, skipped = retrying.started_at, retrying.skipped_ops
    # When the next attempt may start, on the monotonic clock. A backoff this execution computed is
    # measured from the failure it follows; only a recorded one (a resumed run) is converted from
    # store time, once. Converting a fresh one back from the store clock would let a wall-clock step
    # or a new offset to the store's clock, measured while the retry row was committed, shorten the
    # wait: a retry must never go out before its delay (a server's Retry-After) has passed.
    attempt_due: float | None = None
    if next_attempt_at is not None:
        attempt_due = time.monotonic() + clock.seconds_until_passed(next_attempt_at)
    call = ctx.step = StepCall(
        seq, definition.name, attempts + 1, started_at=started_at, skipped_ops=skipped,
        row_exists=retrying is not None, resumed_in_doubt=in_doubt, side_effect_marked=in_doubt,
        note=codec.loads(retrying.output) if in_doubt and retrying is not None and retrying.output else None,
    )
    if in_doubt:
        log.warning("run %s step %s (sequence %s): attempt %s began a side effect and its outcome was not "
                    "recorded; it is in doubt", ctx.run_id, definition.name, seq, attempts + 1)
    try:
        if retrying is not None and retrying.status in HELD_STEP_STATUSES:
            # Held when the run was last executed: wait for the operator again, never execute first.
            fresh = _held_until_resumed(ctx, call, retrying, replay.rebuild_error(retrying))
            attempts, attempt_due, started_at = 0, None, fresh.started_at
        while True:
            if attempt_due is not None:
                _wait_until(ctx, attempt_due)
            attempts += 1
            call.attempt = attempts
            ctx.check_cancelled()
            ctx.lease.await_valid()  # the side effect starts only under a lease this process knows valid
            try:
                value = definition.fn(*args, **kwargs)
            except StoreError as exc:
                raise StoreLost(ctx.run_id, exc) from exc  # the store's outage, not the step's outcome
            except Exception as exc:
                delay = definition.policy.delay_after(attempts, exc)
                error_type, error_message = error_fields(exc)
                rec = StepRecord(
                    seq=seq,
                    name=definition.name,
                    status=STEP_ERROR if delay is None else STEP_RETRYING,
                    attempts=attempts,
                    error_type=error_type,
                    error_message=error_message,
                    error_blob=replay.encode_error(exc),
                    skipped_ops=skipped,
                    started_at=started_at,
                )
                if delay is None and definition.holds(ctx):
                    doubt = hold.leaves_write_in_doubt(exc, call)
                    fresh = _held_until_resumed(ctx, call, hold.hold(ctx, call, rec, in_doubt=doubt), exc)
                    attempts, attempt_due, started_at = 0, None, fresh.started_at
                    continue
                if delay is None:
                    rec.finished_at = clock.now()
                    rec.side_effect = call.side_effect_marked  # a retry of the run finds it in doubt
                    _record_outcome(ctx, call, rec)
                    replay.advance(ctx, seq)
                    raise
                attempt_due = time.monotonic() + delay
                rec.next_attempt_at = clock.now() + delay
                store.record_step_with_events(
                    ctx.fence,
                    rec,
                    replace=call.row_exists,
                    new_events=[*call.take_events(), NewEvent(
                        "retry",
                        {"step": definition.name, "attempt": attempts, "delay_seconds": round(delay, 3),
                         "error": f"{error_type}: {error_message}"},
                        ctx.actor,
                        None,
                    )],
                )
                call.row_exists = True
                call.side_effect_marked = False  # the next attempt marks its own start
                log.info("run %s step %s attempt %s failed (%s); retry in %.3fs",
                         ctx.run_id, definition.name, attempts, error_message, delay)
                continue
            try:
                output = _encode_output(ctx, definition.name, seq, value)
            except (StepOutputError, OutputTooLarge) as exc:
                error_type, error_message = error_fields(exc)
                _record_outcome(ctx, call, StepRecord(
                    seq=seq, name=definition.name, status=STEP_ERROR, attempts=attempts,
                    error_type=error_type, error_message=error_message,
                    error_blob=replay.encode_error(exc), skipped_ops=skipped, started_at=started_at,
                    finished_at=clock.now(), side_effect=call.side_effect_marked,
                ))
                replay.advance(ctx, seq)
                raise
            _record_outcome(ctx, call, StepRecord(
                seq=seq,
                name=definition.name,
                status=STEP_SUCCESS,
                attempts=attempts,
                output=output,
                skipped_ops=skipped,
                started_at=started_at,
                finished_at=clock.now(),
            ))
            replay.advance(ctx, seq)
            # What replay will return, so the first execution and a replay see equal values.
            return codec.as_read_back(value, output)
    except StoreLost:
        raise  # the store is away: the events go with the outcome that was not recorded
    except BaseException:
        if call.events:  # ended without an outcome (a cancel, a stop): keep what the wire saw
            ctx.flush_step_events(call)
        raise
    finally:
        ctx.step = None


def _record_outcome(ctx: RunContext, call: StepCall, rec: StepRecord) -> None:
    """Commit the step's outcome ``rec``, with the audit events of its attempt in the same commit."""
    if call.events:
        ctx.store.record_step_with_events(ctx.fence, rec, replace=call.row_exists, new_events=call.take_events())
    else:
        ctx.store.steps.record(ctx.fence, rec, replace=call.row_exists)


def _held_until_resumed(ctx: RunContext, call: StepCall, held: StepRecord, error: BaseException) -> StepRecord:
    """Wait for the operator's command on the ``held`` row. RESUME: returns the fresh row, ``call``
    set up for a first attempt (resumed in doubt when a write is). STOP: the row is the step's ERROR
    outcome; ``error`` (the step's, as it would have been raised without the hold) is raised."""
    row = hold.await_command(ctx, call, held)
    if row.status == STEP_ERROR:
        replay.advance(ctx, call.seq)
        raise error
    call.resumed_in_doubt = call.side_effect_marked = row.status == STEP_STARTED
    call.started_at = row.started_at
    call.note = None  # a fresh start: its row carries no note, as a resumed execution would find it
    return row


def _wait_until(ctx: RunContext, due: float) -> None:
    """Wait until ``time.monotonic()`` reaches ``due`` (cancellable, see :meth:`RunContext.sleep`)."""
    while (remaining := due - time.monotonic()) > 0:
        ctx.sleep(remaining)  # a timed wait may wake a hair early: loop to the recorded time


def _encode_output(ctx: RunContext, name: str, seq: int, value: Any) -> str:
    try:
        output = codec.dumps(value)
    except codec.NotJSON as exc:
        raise StepOutputError(
            f"step {name!r} (run {ctx.run_id}, sequence {seq}) returned a value that cannot be stored "
            f"as JSON: {exc}"
        ) from None
    limit = ctx.settings.step_output_max_bytes
    if len(output) * 4 <= limit:  # a character is at most 4 bytes of UTF-8: within the limit
        return output
    size = len(output.encode("utf-8"))
    if size > limit:
        raise OutputTooLarge(
            f"step {name!r} (run {ctx.run_id}, sequence {seq}) returned {size} bytes, more than the "
            f"{limit}-byte limit for step outputs; store large data elsewhere (a file, a table) and "
            f"return its id"
        )
    return output
