"""Operations a workflow performs on its own run: receiving messages and commands, reporting its
state, durable sleep.

They are recorded so replay follows the path the run took (see :mod:`exchange.workflows._engine.replay`):
a receive that got something is a step row together with the consumption of the messages, in one
commit; one that got nothing, and a finished sleep, are quiet operations that leave no row (their
answers are made durable before the next side effect). They belong to the workflow body: called
inside a step they raise :class:`~exchange.errors.OperationInStepError`.
"""

from __future__ import annotations

import time
from typing import Any

from exchange._timefmt import iso_utc
from exchange.workflows._engine import commands, replay, waitpoints
from exchange.workflows._engine.context import RunContext
from exchange.workflows._store import codec
from exchange.workflows._store.records import (
    MESSAGE_CONSUMED,
    MESSAGE_DROPPED,
    STEP_SUCCESS,
    MessageRecord,
    StepRecord,
)

RECV_COMMAND_STEP = "exchange.recvCommand"
RECV_STEP = "exchange.recv"
SLEEP_OP = "exchange.sleep"

# A sleep this long or longer records its wake-up time before it starts, so a run recovered after a
# crash sleeps only what is left. A shorter one (a polling loop's pause) writes nothing: recovery
# takes a lease (5 s by default) anyway, and sleeping up to 2 s more after it costs nothing a plant
# would notice, while a thousand looping runs would otherwise commit a row per loop each.
RECORDED_SLEEP_MIN_SECONDS = 2.0


def _wait_for_messages(ctx: RunContext, topic: str, timeout_seconds: float, limit: int) -> list[MessageRecord]:
    """Wait until something arrives, the timeout passes, or the run must stop.

    With a mail watcher (a gateway) the wait costs no query: the mailbox is read when the wait starts
    and again only when the watcher says messages arrived since this topic's last empty look (the
    generation is noted before the read, so a message committed during it moves the generation and
    is read next time round). Without one it is polled every ``mailbox_poll_ms``.
    """
    store = ctx.store
    poll_seconds = ctx.settings.mailbox_poll_ms / 1000
    deadline = time.monotonic() + max(0.0, timeout_seconds)
    while True:
        ctx.check_cancelled()
        ctx.mail_event.clear()
        generation = ctx.mail_generation
        if not ctx.mail_watched or ctx.mail_checked.get(topic) != generation:
            waitpoints.reached(waitpoints.READ, ctx.run_id, topic)
            found = store.mailbox.pending(ctx.run_id, topic, limit)
            if found:
                return found
            waitpoints.reached(waitpoints.READ_EMPTY, ctx.run_id, topic)
            ctx.mail_checked[topic] = generation
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return []
        waitpoints.reached(waitpoints.SLEEP, ctx.run_id, topic)
        ctx.mail_event.wait(remaining if ctx.mail_watched else min(remaining, poll_seconds))


def record_answer(ctx: RunContext, name: str, output: Any) -> Any:
    """Record a step ``name`` that answered ``output`` at the current position (a live call of an
    in-run operation whose answer a replay must give back); returns the answer as stored."""
    return _record_receive(ctx, name, output, [], [])


def _record_receive(
    ctx: RunContext,
    name: str,
    output: Any,
    consumed: list[MessageRecord],
    events: list[tuple[str, Any, str | None, str | None]],
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
    ctx.store.report_state(ctx.fence, state, actor=ctx.actor,
                           label=f"the run's state ({state}, after sequence {ctx.next_seq - 1})")
    ctx.state_written = state


def recv_command(
    ctx: RunContext, current_state: str | None, topic: str, timeout_seconds: float, max_messages: int
) -> dict[str, Any] | None:
    ctx.require_workflow_body("recvCommand")
    state = commands.normalise_state(current_state if current_state is not None else ctx.state or "RUNNING")
    placement = replay.place(ctx, RECV_COMMAND_STEP, quiet_able=True)
    if placement.position is replay.Position.QUIET:
        replay.finish_quiet(ctx, durable=True)
        ctx.state = state
        return None
    if placement.position is replay.Position.RECORDED:
        assert placement.record is not None
        replay.advance(ctx, placement.record.seq)
        ctx.state = state
        result: dict[str, Any] | None = codec.loads(placement.record.output)
        if isinstance(result, dict) and "sentAt" in result:  # recorded before the keys were snake_case
            result["sent_at"] = result.pop("sentAt")
        return result
    ctx.flush_progress_if_due(timeout_seconds)
    _write_state(ctx, state)
    found = _wait_for_messages(ctx, topic, timeout_seconds, max(1, max_messages))
    if not found:
        replay.finish_quiet(ctx, durable=False)
        return None
    messages = []
    for m in found:
        payload = codec.loads(m.payload)
        body = payload if isinstance(payload, dict) else {"cmd": payload}
        messages.append({
            "id": m.id,
            "cmd": body.get("cmd"),
            "reason": body.get("reason", m.reason),
            "actor": body.get("actor", m.actor),
            "sent_at": iso_utc(m.sent_at),
            "args": body.get("args"),
        })
    verdict = commands.choose(messages, state)
    events: list[tuple[str, Any, str | None, str | None]] = [
        ("command_dropped", {"cmd": msg.get("cmd"), "message_id": msg["id"], "state": state},
         msg.get("actor"), why)
        for msg, why in verdict.dropped
    ]
    outcomes: dict[int, tuple[str, str | None]] = {msg["id"]: (MESSAGE_DROPPED, why) for msg, why in verdict.dropped}
    if verdict.chosen is not None:
        events.append((
            "command",
            {"cmd": verdict.chosen["cmd"], "message_id": verdict.chosen["id"], "state": state},
            verdict.chosen.get("actor"),
            verdict.chosen.get("reason"),
        ))
        outcomes[verdict.chosen["id"]] = (MESSAGE_CONSUMED, f"accepted in state {state}")
    kept = {msg["id"] for msg in verdict.kept}  # sent after the chosen one: judged by the next receive
    taken = [m for m in found if m.id not in kept]
    chosen: dict[str, Any] | None = _record_receive(ctx, RECV_COMMAND_STEP, verdict.chosen, taken, events,
                                                    outcomes=outcomes)
    return chosen


def recv(ctx: RunContext, topic: str, timeout_seconds: float) -> Any:
    """One message of ``topic`` (its payload), or None after ``timeout_seconds``."""
    ctx.require_workflow_body("recv")
    placement = replay.place(ctx, RECV_STEP, quiet_able=True)
    if placement.position is replay.Position.QUIET:
        replay.finish_quiet(ctx, durable=True)
        return None
    if placement.position is replay.Position.RECORDED:
        assert placement.record is not None
        replay.advance(ctx, placement.record.seq)
        return codec.loads(placement.record.output)
    ctx.flush_progress_if_due(timeout_seconds)
    found = _wait_for_messages(ctx, topic, timeout_seconds, 1)
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
    deadline = time.monotonic() + ctx.store.clock.seconds_until(wake_at)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            ctx.check_cancelled()
            return
        ctx.sleep(remaining)
