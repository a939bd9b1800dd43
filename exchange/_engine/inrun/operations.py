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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from exchange._engine.execution import answers, replay
from exchange._engine.execution.context import RunContext
from exchange._engine.inrun import waitpoints
from exchange._engine.model import commands
from exchange._store import codec
from exchange._store.records import (
    MESSAGE_CONSUMED,
    MESSAGE_DROPPED,
    MessageRecord,
)
from exchange._timefmt import iso_utc

RECV_COMMAND_STEP = "exchange.recvCommand"
RECV_STEP = "exchange.recv"
SLEEP_OP = "exchange.sleep"

# A sleep this long or longer records its wake-up time before it starts, so a run recovered after a
# crash sleeps only what is left. A shorter one (a polling loop's pause) writes nothing: recovery
# takes a lease (5 s by default) anyway, and sleeping up to 2 s more after it costs nothing a plant
# would notice, while a thousand looping runs would otherwise commit a row per loop each.
RECORDED_SLEEP_MIN_SECONDS = 2.0


@dataclass(frozen=True)
class MailLook:
    """One thing a wait looks for in the run's mailbox: the messages of ``topic`` (at most
    ``limit``) that ``wanted`` accepts. ``note`` names the look's "read since the last ring" mark:
    two looks at one topic for different purposes (a receive, and a prompt's look for a STOP) keep
    marks of their own, so one that ignores a message never hides it from the other."""

    topic: str
    limit: int
    wanted: Callable[[list[MessageRecord]], bool] = bool
    note: str = ""

    @property
    def mark(self) -> str:
        return self.note or self.topic


def wait_for_mail(ctx: RunContext, looks: list[MailLook], timeout_seconds: float
                  ) -> tuple[MailLook, list[MessageRecord]] | None:
    """Wait until one of ``looks`` finds what it wants (the look and what it found), the timeout
    passes (None), or the run must stop (raises).

    With a mail watcher (a gateway) the wait costs no query: each look reads the mailbox when the
    wait starts and again only when the watcher says messages arrived since that look's last read
    that found nothing wanted (the generation is noted before the read, so a message committed
    during it moves the generation and is read next time round). Without one it polls every
    ``mailbox_poll_ms``.
    """
    store = ctx.store
    poll_seconds = ctx.settings.mailbox_poll_ms / 1000
    deadline = time.monotonic() + max(0.0, timeout_seconds)
    while True:
        ctx.check_cancelled()
        ctx.mail_event.clear()
        generation = ctx.mail_generation
        for look in looks:
            if ctx.mail_watched and ctx.mail_checked.get(look.mark) == generation:
                continue
            waitpoints.reached(waitpoints.READ, ctx.run_id, look.mark)
            found = store.mailbox.pending(ctx.run_id, look.topic, look.limit)
            if found and look.wanted(found):
                return look, found
            waitpoints.reached(waitpoints.READ_EMPTY, ctx.run_id, look.mark)
            ctx.mail_checked[look.mark] = generation
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        waitpoints.reached(waitpoints.SLEEP, ctx.run_id, looks[0].mark)
        ctx.mail_event.wait(remaining if ctx.mail_watched else min(remaining, poll_seconds))


def _wait_for_messages(ctx: RunContext, topic: str, timeout_seconds: float, limit: int) -> list[MessageRecord]:
    """The first messages of ``topic`` to arrive within ``timeout_seconds`` (see :func:`wait_for_mail`)."""
    got = wait_for_mail(ctx, [MailLook(topic, limit)], timeout_seconds)
    return [] if got is None else got[1]


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
    result = answers.replay_or_record(
        ctx, RECV_COMMAND_STEP, lambda: _receive_command(ctx, state, topic, timeout_seconds, max_messages),
        quiet_answer=None)
    ctx.state = state  # live, _receive_command reported it already; a replay reports it as the run did
    if isinstance(result, dict) and "sentAt" in result:  # recorded before the keys were snake_case
        result["sent_at"] = result.pop("sentAt")
    return cast("dict[str, Any] | None", result)


def _receive_command(ctx: RunContext, state: str, topic: str, timeout_seconds: float, max_messages: int) -> Any:
    ctx.flush_progress_if_due(timeout_seconds)
    _write_state(ctx, state)
    found = _wait_for_messages(ctx, topic, timeout_seconds, max(1, max_messages))
    if not found:
        return answers.QUIET
    judged = judge_commands(found, state)
    return answers.Receipt(judged.chosen, judged.taken, judged.events, judged.outcomes)


@dataclass(frozen=True)
class JudgedCommands:
    """What a receive of commands does with the messages it read (see :func:`commands.choose`)."""

    chosen: dict[str, Any] | None  # the command returned to the workflow
    taken: list[MessageRecord]  # consumed: the chosen one and those dropped before it
    events: list[tuple[str, Any, str | None, str | None]]
    outcomes: dict[int, tuple[str, str | None]]


def judge_commands(found: list[MessageRecord], state: str) -> JudgedCommands:
    """Judge the command messages ``found`` (oldest first) in ``state``: the chosen one, those
    dropped (with why), and those sent after the chosen one, left in the mailbox."""
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
    return JudgedCommands(verdict.chosen, [m for m in found if m.id not in kept], events, outcomes)


def recv(ctx: RunContext, topic: str, timeout_seconds: float) -> Any:
    """One message of ``topic`` (its payload), or None after ``timeout_seconds``."""
    ctx.require_workflow_body("recv")
    return answers.replay_or_record(ctx, RECV_STEP, lambda: _receive(ctx, topic, timeout_seconds), quiet_answer=None)


def _receive(ctx: RunContext, topic: str, timeout_seconds: float) -> Any:
    ctx.flush_progress_if_due(timeout_seconds)
    found = _wait_for_messages(ctx, topic, timeout_seconds, 1)
    if not found:
        return answers.QUIET
    message = found[0]
    return answers.Receipt(codec.loads(message.payload), [message])


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


def time_left(ctx: RunContext) -> float | None:
    """The seconds the run has left before its deadline (None: no deadline); raises
    Cancelled("timeout") when they are up, as ``check_cancelled`` would."""
    if ctx.deadline_at is None:
        return None
    left = ctx.store.clock.seconds_until(ctx.deadline_at)
    if left <= 0:
        ctx.check_cancelled()  # raises Cancelled("timeout") and marks the run so
    return max(0.0, left)
