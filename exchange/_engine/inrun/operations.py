"""Operations a workflow performs on its own run: receiving messages and commands, reporting its
state, durable sleep.

They are recorded so replay follows the path the run took (see :mod:`exchange._engine.execution.replay`):
a receive that got something is a step row together with the consumption of the messages, in one
commit; one that got nothing, and a finished sleep, are quiet operations that leave no row (their
answers are made durable before the next side effect). They belong to the workflow body: called
inside a step they raise :class:`~exchange.errors.OperationInStepError`.
"""

from __future__ import annotations

import time
from typing import Any, cast

from exchange._engine.execution import replay
from exchange._engine.execution.context import RunContext
from exchange._engine.execution.mail import wait_for_messages
from exchange._engine.model import commands
from exchange._store import codec
from exchange._store.records import STEP_SUCCESS, MessageRecord, NewEvent, StepRecord

RECV_COMMAND_STEP = "exchange.recvCommand"
RECV_STEP = "exchange.recv"
SLEEP_OP = "exchange.sleep"

# A sleep this long or longer records its wake-up time before it starts, so a run recovered after a
# crash sleeps only what is left. A shorter one (a polling loop's pause) writes nothing: recovery
# takes a lease (5 s by default) anyway, and sleeping up to 2 s more after it costs nothing a plant
# would notice, while a thousand looping runs would otherwise commit a row per loop each.
RECORDED_SLEEP_MIN_SECONDS = 2.0


def record_answer(ctx: RunContext, name: str, output: Any) -> Any:
    """Record a step ``name`` that answered ``output`` at the current position (a live call of an
    in-run operation whose answer a replay must give back); returns the answer as stored."""
    return _record_receive(ctx, name, output, [], [])


def _record_receive(
    ctx: RunContext,
    name: str,
    output: Any,
    consumed: list[MessageRecord],
    events: list[NewEvent],
    run_fields: dict[str, Any] | None = None,
    outcomes: dict[int, tuple[str, str | None]] | None = None,
) -> Any:
    seq = ctx.next_seq
    now = ctx.store.clock.now()
    text = codec.dumps(output)
    ctx.store.record_step_with_events(
        ctx.fence,
        StepRecord(seq=seq, name=name, status=STEP_SUCCESS, attempts=1, output=text,
                   skipped_ops=ctx.quiet_count, started_at=now, finished_at=now),
        replace=False,
        consumed_ids=[m.id for m in consumed],
        new_events=events,
        run_fields=run_fields,
        outcomes=outcomes,
    )
    replay.advance(ctx, seq)
    return codec.loads(text)


def set_state(ctx: RunContext, state: str) -> None:
    """Report the run's ISA-88 state without receiving anything (no command is consumed or dropped)."""
    state = commands.normalise_state(state)
    if ctx.replaying():
        ctx.state = state
        return
    _write_state(ctx, state)


def _write_state(ctx: RunContext, state: str) -> None:
    ctx.state = state
    if ctx.state_written == state:
        return  # a replay that reports what the row already holds writes nothing
    ctx.store.report_state(ctx.fence, state, actor=ctx.actor, extra=ctx.cause,
                           label=f"the run's state ({state}, after sequence {ctx.next_seq - 1})")
    ctx.state_written = state


def replayed_answer(ctx: RunContext, name: str, empty: Any) -> tuple[bool, Any]:
    """Place the quiet-able in-run operation ``name`` (a receive, a read) at the current position:
    ``(True, answer)`` when a replay answers it (``empty`` for a quiet one, the recorded output
    otherwise), ``(False, None)`` when it is live and must be done now."""
    placement = replay.place(ctx, name, quiet_able=True)
    if placement.position is replay.Position.QUIET:
        replay.finish_quiet(ctx, durable=True)
        return True, empty
    if placement.position is replay.Position.RECORDED:
        assert placement.record is not None
        replay.advance(ctx, placement.record.seq)
        return True, codec.loads(placement.record.output)
    return False, None


def recv_command(
    ctx: RunContext, current_state: str | None, topic: str, timeout_seconds: float, max_messages: int
) -> dict[str, Any] | None:
    ctx.require_workflow_body("recvCommand")
    state = commands.normalise_state(current_state if current_state is not None else ctx.state or "RUNNING")
    replayed, result = replayed_answer(ctx, RECV_COMMAND_STEP, None)
    if replayed:
        ctx.state = state
        if isinstance(result, dict) and "sentAt" in result:  # recorded before the keys were snake_case
            result["sent_at"] = result.pop("sentAt")
        return cast("dict[str, Any] | None", result)
    ctx.flush_progress_if_due(timeout_seconds)
    _write_state(ctx, state)
    found = wait_for_messages(ctx, topic, timeout_seconds, max(1, max_messages))
    if not found:
        replay.finish_quiet(ctx, durable=False)
        return None
    judged = commands.judge_commands(found, state)
    answer = None if judged.chosen is None else judged.chosen.received()
    chosen: dict[str, Any] | None = _record_receive(ctx, RECV_COMMAND_STEP, answer, judged.taken,
                                                    judged.events, outcomes=judged.outcomes)
    return chosen


def record_receive(
    ctx: RunContext, name: str, output: Any, consumed: list[MessageRecord],
    events: list[NewEvent], outcomes: dict[int, tuple[str, str | None]] | None = None,
) -> Any:
    """Record step ``name`` answering ``output`` at the current position, consuming ``consumed``
    (each with its outcome, default CONSUMED) and logging ``events``, in one commit; returns the
    answer as stored."""
    return _record_receive(ctx, name, output, consumed, events, outcomes=outcomes)


def recv(ctx: RunContext, topic: str, timeout_seconds: float) -> Any:
    """One message of ``topic`` (its payload), or None after ``timeout_seconds``."""
    ctx.require_workflow_body("recv")
    replayed, answer = replayed_answer(ctx, RECV_STEP, None)
    if replayed:
        return answer
    ctx.flush_progress_if_due(timeout_seconds)
    found = wait_for_messages(ctx, topic, timeout_seconds, 1)
    if not found:
        replay.finish_quiet(ctx, durable=False)
        return None
    message = found[0]
    return _record_receive(ctx, RECV_STEP, codec.loads(message.payload), [message], [])


def sleep(ctx: RunContext, total_seconds: float, chunk_seconds: float) -> None:
    """Durable sleep: the wake-up time (store clock) is recorded before sleeping, and a restart sleeps
    only the rest; a sleep shorter than :data:`RECORDED_SLEEP_MIN_SECONDS` is not recorded (a restart
    sleeps it again in full)."""
    ctx.require_workflow_body("sleep_chunked")
    placement = replay.place(ctx, SLEEP_OP, quiet_able=True, is_sleep=True)
    if placement.position is replay.Position.QUIET:
        replay.finish_quiet(ctx, durable=True)
        return
    if placement.position is replay.Position.RECORDED:  # pragma: no cover - sleeps are never rows
        raise AssertionError("a sleep cannot be a recorded step")
    if placement.position is replay.Position.IN_FLIGHT_SLEEP:
        assert ctx.quiet_wake_at is not None
        _sleep_until(ctx, ctx.quiet_wake_at, chunk_seconds)
        replay.finish_in_flight_sleep(ctx)
        return
    ctx.flush_progress_if_due(total_seconds)
    ctx.check_cancelled()
    wake_at = ctx.store.clock.now() + max(0.0, total_seconds)
    if total_seconds < RECORDED_SLEEP_MIN_SECONDS:
        _sleep_until(ctx, wake_at, chunk_seconds)
        replay.finish_quiet(ctx, durable=False)  # made durable with the next side effect, like a poll
        return
    ctx.store.runs.set_fields(
        ctx.fence, f"a sleep's wake-up time (after sequence {ctx.next_seq - 1}, {ctx.quiet_count})",
        quiet_after_seq=ctx.next_seq - 1, quiet_ops=ctx.quiet_count, quiet_wake_at=wake_at,
    )
    ctx.quiet_durable = ctx.quiet_count  # the tail holds every answer before this sleep too
    _sleep_until(ctx, wake_at, chunk_seconds)
    replay.finish_quiet(ctx, durable=True)


def _sleep_until(ctx: RunContext, wake_at: float, chunk_seconds: float) -> None:
    """Sleep until store time ``wake_at``, measured on the monotonic clock from now.

    The wait is not cut into chunks: cancellation, a gateway stop and a lost lease set the run's
    event and end it at once, so a sleeping run wakes only when its time is up. (``chunk_seconds``
    is the authoring API's promise of how soon cancellation is noticed; this keeps it.)
    """
    deadline = time.monotonic() + ctx.store.clock.seconds_until_passed(wake_at)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            ctx.check_cancelled()
            return
        ctx.sleep(remaining)
