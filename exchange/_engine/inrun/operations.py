"""Operations a workflow performs on its own run: receiving messages and commands, reporting its
state, durable sleep, the time it has left.

They are recorded so replay follows the path the run took (see :mod:`exchange._engine.execution.replay`):
a receive that got something is a step row together with the consumption of the messages, in one
commit; one that got nothing, and a finished sleep, are quiet operations that leave no row (their
answers are made durable before the next side effect). They belong to the workflow body: called
inside a step they raise :class:`~exchange.errors.OperationInStepError`.
"""

from __future__ import annotations

import time
from typing import Any, cast

from exchange._engine.execution import (
    QUIET,
    Position,
    Receipt,
    RunContext,
    finish_in_flight_sleep,
    finish_quiet,
    place,
    replay_or_record,
    wait_for_messages,
)
from exchange._engine.model import commands
from exchange._store import codec

RECV_COMMAND_STEP = "exchange.recvCommand"
RECV_STEP = "exchange.recv"
SLEEP_OP = "exchange.sleep"

# A sleep this long or longer records its wake-up time before it starts, so a run recovered after a
# crash sleeps only what is left. A shorter one (a polling loop's pause) writes nothing: recovery
# takes a lease (5 s by default) anyway, and sleeping up to 2 s more after it costs nothing a plant
# would notice, while a thousand looping runs would otherwise commit a row per loop each.
RECORDED_SLEEP_MIN_SECONDS = 2.0


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


def recv_command(
    ctx: RunContext, current_state: str | None, topic: str, timeout_seconds: float, max_messages: int
) -> dict[str, Any] | None:
    ctx.require_workflow_body("recvCommand")
    state = commands.normalise_state(current_state if current_state is not None else ctx.state or "RUNNING")
    result = replay_or_record(ctx, RECV_COMMAND_STEP, _receive_command, ctx, state, topic, timeout_seconds,
                              max_messages, quiet_answer=None)
    ctx.state = state  # live, _receive_command reported it already; a replay reports it as the run did
    if isinstance(result, dict) and "sentAt" in result:  # recorded before the keys were snake_case
        result["sent_at"] = result.pop("sentAt")
    return cast("dict[str, Any] | None", result)


def _receive_command(ctx: RunContext, state: str, topic: str, timeout_seconds: float, max_messages: int) -> Any:
    ctx.flush_progress_if_due(timeout_seconds)
    _write_state(ctx, state)
    found = wait_for_messages(ctx, topic, timeout_seconds, max(1, max_messages))
    if not found:
        return QUIET
    judged = commands.judge_commands(found, state)
    answer = None if judged.chosen is None else judged.chosen.received()
    return Receipt(answer, judged.taken, judged.events, judged.outcomes)


def recv(ctx: RunContext, topic: str, timeout_seconds: float) -> Any:
    """One message of ``topic`` (its payload), or None after ``timeout_seconds``."""
    ctx.require_workflow_body("recv")
    return replay_or_record(ctx, RECV_STEP, _receive, ctx, topic, timeout_seconds, quiet_answer=None)


def _receive(ctx: RunContext, topic: str, timeout_seconds: float) -> Any:
    ctx.flush_progress_if_due(timeout_seconds)
    found = wait_for_messages(ctx, topic, timeout_seconds, 1)
    if not found:
        return QUIET
    message = found[0]
    return Receipt(codec.loads(message.payload), [message])


def sleep_in_run(ctx: RunContext, total_seconds: float, chunk_seconds: float) -> None:
    """Durable sleep: the wake-up time (store clock) is recorded before sleeping, and a restart sleeps
    only the rest; a sleep shorter than :data:`RECORDED_SLEEP_MIN_SECONDS` is not recorded (a restart
    sleeps it again in full)."""
    ctx.require_workflow_body("sleep_chunked")
    placement = place(ctx, SLEEP_OP, quiet_able=True, is_sleep=True)
    if placement.position is Position.QUIET:
        finish_quiet(ctx, durable=True)
        return
    if placement.position is Position.RECORDED:  # pragma: no cover - sleeps are never rows
        raise AssertionError("a sleep cannot be a recorded step")
    if placement.position is Position.IN_FLIGHT_SLEEP:
        assert ctx.quiet_wake_at is not None
        _sleep_until(ctx, ctx.quiet_wake_at, chunk_seconds)
        finish_in_flight_sleep(ctx)
        return
    ctx.flush_progress_if_due(total_seconds)
    ctx.check_cancelled()
    wake_at = ctx.store.clock.now() + max(0.0, total_seconds)
    if total_seconds < RECORDED_SLEEP_MIN_SECONDS:
        _sleep_until(ctx, wake_at, chunk_seconds)
        finish_quiet(ctx, durable=False)  # made durable with the next side effect, like a poll
        return
    ctx.store.runs.set_fields(
        ctx.fence, f"a sleep's wake-up time (after sequence {ctx.next_seq - 1}, {ctx.quiet_count})",
        quiet_after_seq=ctx.next_seq - 1, quiet_ops=ctx.quiet_count, quiet_wake_at=wake_at,
    )
    ctx.quiet_durable = ctx.quiet_count  # the tail holds every answer before this sleep too
    _sleep_until(ctx, wake_at, chunk_seconds)
    finish_quiet(ctx, durable=True)


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


def time_left(ctx: RunContext) -> float | None:
    """The seconds the run has left before its deadline (None: no deadline); raises
    Cancelled("timeout") when they are up, as ``check_cancelled`` would."""
    if ctx.deadline_at is None:
        return None
    left = ctx.store.clock.seconds_until(ctx.deadline_at)
    if left <= 0:
        ctx.check_cancelled()  # raises Cancelled("timeout") and marks the run so
    return max(0.0, left)
