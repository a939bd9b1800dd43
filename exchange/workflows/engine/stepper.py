"""Executing one step call durably: replay a recorded outcome, or run it under its retry policy.

The outcome is committed before the call returns or raises. The attempt count and the time of the
next attempt are committed too (a RETRYING row), so a crash during a backoff resumes the same attempt
count and waits only the rest of the backoff.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from exchange.errors import OutputTooLarge, StepOutputError
from exchange.workflows.engine import replay
from exchange.workflows.engine.context import RunContext, StepCall, store_guard
from exchange.workflows.store import codec
from exchange.workflows.store.records import STEP_ERROR, STEP_RETRYING, STEP_SUCCESS, StepRecord

if TYPE_CHECKING:
    from exchange.workflows.engine.decorators import StepDef

log = logging.getLogger(__name__)


@store_guard
def call_step(ctx: RunContext, definition: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if ctx.step is not None:
        # A step called from inside another step is part of the outer step's body: the outer
        # outcome is what gets recorded, so the inner one runs plainly.
        return definition.fn(*args, **kwargs)
    placement = replay.place(ctx, definition.name, quiet_able=False)
    rec = placement.record
    seq = ctx.next_seq
    if rec is not None and rec.status == STEP_SUCCESS:
        replay.advance(ctx, seq)
        return codec.loads(rec.output)
    if rec is not None and rec.status == STEP_ERROR:
        replay.advance(ctx, seq)
        raise replay.rebuild_error(rec)
    ctx.check_cancelled()
    return _execute(ctx, definition, seq, rec, args, kwargs)


def _execute(
    ctx: RunContext,
    definition: StepDef,
    seq: int,
    retrying: StepRecord | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    attempts = retrying.attempts if retrying else 0
    next_attempt_at = retrying.next_attempt_at if retrying else None
    started_at = retrying.started_at if retrying else time.time()
    skipped = retrying.skipped_ops if retrying else ctx.quiet_count
    row_exists = retrying is not None
    store = ctx.runtime.store
    ctx.step = StepCall(seq, definition.name, attempts + 1)
    try:
        while True:
            while next_attempt_at is not None and (remaining := next_attempt_at - time.time()) > 0:
                ctx.sleep(remaining)  # a timed wait may wake a hair early: loop to the recorded time
            attempts += 1
            ctx.step.attempt = attempts
            try:
                value = definition.fn(*args, **kwargs)
            except Exception as exc:
                delay = definition.policy.delay_after(attempts, exc)
                rec = StepRecord(
                    seq=seq,
                    name=definition.name,
                    status=STEP_ERROR if delay is None else STEP_RETRYING,
                    attempts=attempts,
                    error_type=replay.error_type_name(exc),
                    error_message=str(exc),
                    error_blob=replay.encode_error(exc),
                    skipped_ops=skipped,
                    started_at=started_at,
                )
                if delay is None:
                    rec.finished_at = time.time()
                    store.steps.record(ctx.run_id, rec, replace=row_exists)
                    replay.advance(ctx, seq)
                    raise
                next_attempt_at = time.time() + delay
                rec.next_attempt_at = next_attempt_at
                store.record_step_with_events(
                    ctx.run_id,
                    rec,
                    replace=row_exists,
                    new_events=[(
                        "retry",
                        {"step": definition.name, "attempt": attempts, "delay_seconds": round(delay, 3),
                         "error": f"{rec.error_type}: {rec.error_message}"},
                        ctx.actor,
                        None,
                    )],
                )
                row_exists = True
                log.info("run %s step %s attempt %s failed (%s); retry in %.3fs",
                         ctx.run_id, definition.name, attempts, exc, delay)
                continue
            try:
                output = _encode_output(ctx, definition.name, seq, value)
            except (StepOutputError, OutputTooLarge) as exc:
                store.steps.record(
                    ctx.run_id,
                    StepRecord(
                        seq=seq, name=definition.name, status=STEP_ERROR, attempts=attempts,
                        error_type=replay.error_type_name(exc), error_message=str(exc),
                        error_blob=replay.encode_error(exc), skipped_ops=skipped, started_at=started_at,
                        finished_at=time.time(),
                    ),
                    replace=row_exists,
                )
                replay.advance(ctx, seq)
                raise
            rec = StepRecord(
                seq=seq,
                name=definition.name,
                status=STEP_SUCCESS,
                attempts=attempts,
                output=output,
                skipped_ops=skipped,
                started_at=started_at,
                finished_at=time.time(),
            )
            if row_exists:
                store.steps.record(ctx.run_id, rec, replace=True)
            else:
                store.steps.insert_fast(ctx.run_id, rec)
            replay.advance(ctx, seq)
            # What replay will return, so the first execution and a replay see equal values.
            return codec.loads(output)
    finally:
        ctx.step = None


def _encode_output(ctx: RunContext, name: str, seq: int, value: Any) -> str:
    try:
        output = codec.dumps(value)
    except codec.NotJSON as exc:
        raise StepOutputError(
            f"step {name!r} (run {ctx.run_id}, sequence {seq}) returned a value that cannot be stored "
            f"as JSON: {exc}"
        ) from None
    limit = ctx.runtime.config.engine.step_output_max_bytes
    size = len(output.encode("utf-8"))
    if size > limit:
        raise OutputTooLarge(
            f"step {name!r} (run {ctx.run_id}, sequence {seq}) returned {size} bytes, more than the "
            f"{limit}-byte limit for step outputs; store large data elsewhere (a file, a table) and "
            f"return its id"
        )
    return output
