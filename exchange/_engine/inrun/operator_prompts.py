"""``operator.prompt`` in a run: open a prompt, wait for a person's answer, return it (recorded).

The wait is a mailbox wait (:func:`~exchange._engine.execution.mail.wait_for_mail`): a final answer is
a message on the prompt's own topic, committed with the prompt's change
(:mod:`exchange._store.runs.prompts`), so a thousand runs waiting on prompts cost what waiting
in ``recvCommand`` costs, and a prompt answered while no gateway executed the run is found when it
resumes. The same wait looks for a STOP or an ABORT on the command topic (other commands stay for
the next ``recvCommand``); a cancel ends it as it ends every wait.

What the run got is one recorded step (``exchange.prompt``), committed with the consumption of the
message: the answer, or ``{"timed_out": true}``, or ``{"stopped": command}`` (a STOP or an ABORT); a
replay gives it back (re-raising :class:`~exchange.errors.PromptTimeout`, or
:class:`~exchange.errors.StopRequested` / :class:`~exchange.errors.AbortRequested` by the command). The
prompt's own row says where a crash left it: a prompt closed by a timeout, a STOP or an ABORT whose
step was not yet recorded finishes that way when the run resumes.
"""

from __future__ import annotations

from typing import Any

from exchange._engine.execution import MailLook, Receipt, RunContext, replay_or_record, wait_for_mail
from exchange._engine.model import commands
from exchange._store import CLOSED, OPEN, TIMED_OUT, MessageRecord, PromptRecord, answer_topic, codec
from exchange.errors import InvalidArgument, PromptTimeout

PROMPT_STEP = "exchange.prompt"
STOP_LOOK_LIMIT = 1000  # commands looked at for a STOP or an ABORT while a prompt waits
IDLE_WAIT_SECONDS = 3600.0  # one wait of a prompt without timeout; a message or a stop ends it at once


def ends_in_stop(found: list[MessageRecord]) -> bool:
    """Whether a STOP or an ABORT is among these command messages (a wait outside ``recvCommand`` ends)."""
    return commands.stop_or_abort_among(commands.Command.parse(m) for m in found) is not None


def prompt_in_run(ctx: RunContext, key: str, text: str, fields: dict[str, Any], role: str, verify_role: str | None,
           timeout_s: float | None) -> dict[str, Any]:
    """The answer to the prompt ``key`` (its arguments checked by the caller), waiting for it;
    PromptTimeout after ``timeout_s``, StopRequested for a STOP, AbortRequested for an ABORT (see the
    module docstring)."""
    ctx.require_workflow_body("operator.prompt")
    recorded = replay_or_record(ctx, PROMPT_STEP, _open_and_wait, ctx, key, text, fields, role, verify_role,
                                timeout_s)
    return _outcome(key, recorded, timeout_s)


def _open_and_wait(ctx: RunContext, key: str, text: str, fields: dict[str, Any], role: str,
                   verify_role: str | None, timeout_s: float | None) -> Any:
    ctx.make_answers_durable()  # people act on a prompt: what the run received before is durable first
    ctx.lease.await_valid()
    seq = ctx.next_seq
    now = ctx.store.clock.now()
    row = ctx.store.prompts.open(ctx.fence, PromptRecord(
        run_id=ctx.run_id, key=key, seq=seq, text=text, fields=fields, role=role, verify_role=verify_role,
        status=OPEN, opened_at=now, deadline_at=None if timeout_s is None else now + timeout_s))
    if row.seq != seq:
        raise InvalidArgument(f"operator.prompt: the key {key!r} was used by the prompt at sequence {row.seq} "
                              f"of this run; a prompt's key is unique within its run")
    ctx.flush_progress_if_due(IDLE_WAIT_SECONDS)
    return _wait(ctx, row)


def _outcome(key: str, recorded: Any, timeout_s: float | None) -> dict[str, Any]:
    if isinstance(recorded, dict) and recorded.get("timed_out"):
        raise PromptTimeout(key, timeout_s or 0.0)
    if isinstance(recorded, dict) and "stopped" in recorded:
        raise commands.stop_error(recorded["stopped"])
    return dict(recorded)


def _wait(ctx: RunContext, row: PromptRecord) -> Receipt:
    """What the run gets for the open prompt ``row``, to record."""
    answer = MailLook(answer_topic(row.key), 1)
    stop = MailLook(commands.COMMAND_TOPIC, STOP_LOOK_LIMIT, wanted=ends_in_stop, note=f"prompt {row.key}: stop")
    status = row.status
    while True:
        if status == TIMED_OUT:
            return Receipt({"timed_out": True})
        if status == CLOSED:  # closed by a STOP or an ABORT that is still waiting in the mailbox
            return take_stop(ctx, ctx.store.mailbox.pending(ctx.run_id, commands.COMMAND_TOPIC, STOP_LOOK_LIMIT))
        wait_seconds = IDLE_WAIT_SECONDS
        if row.deadline_at is not None:
            wait_seconds = min(wait_seconds, max(0.0, ctx.store.clock.seconds_until(row.deadline_at)))
        got = wait_for_mail(ctx, [answer, stop], wait_seconds)
        if got is None:
            if row.deadline_at is not None and ctx.store.clock.seconds_until(row.deadline_at) <= 0:
                why = f"not answered within {row.deadline_at - row.opened_at:g} s"
                if ctx.store.prompts.close(ctx.fence, row.key, TIMED_OUT, why):
                    status = TIMED_OUT
                # else an answer came first: its message is read next time round
            continue
        look, found = got
        if look is answer:
            message = found[0]
            return Receipt(codec.loads(message.payload), [message])
        ending = commands.stop_or_abort_among(commands.Command.parse(m) for m in found)
        if ctx.store.prompts.close(ctx.fence, row.key, CLOSED, f"{ending} received while the prompt waited"):
            return take_stop(ctx, found)
        # else an answer came first: the command stays for the next recvCommand


def take_stop(ctx: RunContext, found: list[MessageRecord], waiting: str = "a prompt") -> Receipt:
    """A wait's step (a prompt's, a unit's) as stopped by the STOP or ABORT among ``found`` (ABORT
    when both are: it has the higher priority), consuming it (and the commands before it, dropped as
    superseded, as a ``recvCommand`` would)."""
    judged = commands.judge_commands(found, ctx.state or "RUNNING")
    if judged.chosen is None or judged.chosen.name not in commands.ENDING_WAITS:  # pragma: no cover
        raise AssertionError(f"run {ctx.run_id}: {waiting} ended by STOP or ABORT found neither waiting")
    return Receipt({"stopped": judged.chosen.received()}, judged.taken, judged.events, judged.outcomes)
