"""A run's wait for the units it asked for, honouring HOLD, RESUME, STOP and ABORT.

The wait is a mailbox wait (:func:`~exchange._engine.execution.mail.wait_for_mail`): a grant is a
message committed with the grant, and the run's commands are looked at on its command topic, so
the wait costs no query while nothing arrives and is woken at once by a release on any gateway or
by an operator. Commands are judged by the ISA-88 policy
(:func:`~exchange._engine.model.commands.judge_commands`), as the commanded tag wait judges them:
while the request waits, in RUNNING (HOLD, STOP and ABORT are acted on); while it is held, in
HELD (RESUME, STOP and ABORT). The wait takes the messages of the command topic only when the
policy chooses one of those: anything else stays in the mailbox for the workflow's next
``recvCommand``.

- HOLD: the request becomes HELD and the run reports HELD, in one commit with the HOLD's
  consumption (:meth:`~exchange._store.runs.units.UnitTable.hold`): the grant pass passes over it,
  and another run may take the units it waited for. Its timeout does not run while held.
- RESUME: the request waits again in its place (priority, then its first request time) and the
  run reports RUNNING, in one commit, granted at once when the units are free.
- STOP or ABORT (waiting or held): the request is withdrawn and the wait ends ``{"stopped":
  command}`` (the caller records it with the command's consumption); the run's state is left as it
  was (the workflow reports the state its stop leaves).
- A grant committed before the command was seen wins: the command stays for the workflow's next
  ``recvCommand``.

The request's row is the wait's durable state: an execution that resumes the wait after a kill or
a takeover finds its request WAITING or HELD (and the run's state as the hold left it) and waits on
as it was, with the time it was held kept out of its timeout
(:meth:`~exchange._store.runs.units.UnitTable.held_seconds`). A cancel ends the wait as it ends
every wait.

A wait for a grant that was already recorded (a retry or a fork asking again for the units of a
replayed ``units.acquire``; ``may_end`` false) honours HOLD and RESUME the same way, but has no
timeout and takes no STOP or ABORT: the workflow's recorded path goes on past that point, so the
wait cannot end it another way; a STOP waits for the workflow's next ``recvCommand``, and a cancel
ends the run.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Any

from exchange._engine.execution import MailLook, Receipt, RunContext, wait_for_mail
from exchange._engine.model import commands
from exchange._store import GRANT_TOPIC, MessageRecord, NewEvent, UnitRequest, codec

WAITING, HELD, GRANTED = "WAITING", "HELD", "GRANTED"
COMMAND_LOOK_LIMIT = 1000  # commands looked at while waiting for units
IDLE_WAIT_SECONDS = 3600.0  # one wait without timeout; a grant or a command ends it at once
# The state each stage of the request judges commands in, and the commands it acts on there.
JUDGED_IN = {WAITING: "RUNNING", HELD: "HELD"}
ACTS_ON = {WAITING: ("HOLD", *commands.ENDING_WAITS), HELD: ("RESUME", *commands.ENDING_WAITS)}


class UnitWait:
    """One wait of the run ``ctx`` for its ``request`` (see the module docstring). ``timeout_s``:
    from the request time, held time left out; ``may_end``: whether a STOP, an ABORT or the timeout
    may end the wait (false for a grant already recorded).

    A thousand runs wait at once: a wait keeps only its own state (the looks at the command topic
    are shared by every wait of a step, and the grant's is judged by a method)."""

    __slots__ = ("ctx", "request", "step", "timeout_s", "may_end", "held_s")

    def __init__(self, ctx: RunContext, request: UnitRequest, *, step: str, timeout_s: float | None,
                 may_end: bool = True) -> None:
        self.ctx, self.request, self.step, self.timeout_s, self.may_end = ctx, request, step, timeout_s, may_end
        self.held_s = ctx.store.units.held_seconds(request) if timeout_s and may_end else 0.0

    def _is_grant(self, found: list[MessageRecord]) -> bool:
        """Whether ``found`` holds this request's grant (another request's, left by an earlier
        acquire, is not this wait's)."""
        return bool(_grants_of(found, self.request.id))

    def _looks(self, stage: str) -> MailLook:
        """The look at the command topic while the request is in ``stage``."""
        return _command_look(self.step, stage, self.may_end)

    # ---- the wait --------------------------------------------------------------------------------
    def run(self) -> Receipt | UnitRequest:
        """The granted request (``may_end`` false), or what the step records: the grant with its
        message(s), ``{"timed_out": true}``, or ``{"stopped": command}`` with its consumption."""
        ctx = self.ctx
        grant = MailLook(GRANT_TOPIC, 10, wanted=self._is_grant, note=_notes(self.step)[0])
        if self.request.status != GRANTED:
            self._show()
        while True:
            request = self.request
            if request.status == GRANTED:
                return self._granted()
            if request.status not in JUDGED_IN:  # ended elsewhere: the run's end (raised here), or a crash
                ctx.check_cancelled()  # between a timeout's or a STOP's withdrawal and its record
                return self._ended()
            got = wait_for_mail(ctx, [grant, self._looks(request.status)], self._wait_seconds())
            if got is None:
                if request.status == WAITING and self._timed_out():
                    if ctx.store.units.cancel(ctx.fence, request.id, f"not granted within {self.timeout_s:g} s"):
                        return Receipt({"timed_out": True})
                self._fresh()  # granted meanwhile: its message is taken next time round
                continue
            look, found = got
            if look is grant:
                if self.may_end:  # committed with the grant: the answer is in hand, nothing more to read
                    messages = _grants_of(found, request.id)
                    units = codec.loads(messages[0].payload)["units"]
                    return Receipt({"request": request.id, "units": list(units)}, messages)
                self._fresh()
                continue
            ended = self._act(commands.judge_commands(found, JUDGED_IN[request.status],
                                                      about={"units": request.wanted}))
            if ended is not None:
                return ended

    def _wait_seconds(self) -> float:
        wait_s = IDLE_WAIT_SECONDS
        deadline = self._deadline()
        if deadline is not None and self.request.status == WAITING:
            wait_s = min(wait_s, max(0.0, self.ctx.store.clock.seconds_until(deadline)))
        until_run_deadline = self.ctx.seconds_until_deadline()
        if until_run_deadline is not None:  # the run's deadline cancels it: check_cancelled raises then
            wait_s = min(wait_s, until_run_deadline + 0.001)
        return wait_s

    def _deadline(self) -> float | None:
        if self.timeout_s is None or not self.may_end:
            return None
        return self.request.requested_at + self.timeout_s + self.held_s

    def _timed_out(self) -> bool:
        deadline = self._deadline()
        return deadline is not None and self.ctx.store.clock.seconds_until(deadline) <= 0

    def _fresh(self) -> None:
        found = self.ctx.store.units.get(self.ctx.run_id, self.request.seq)
        assert found is not None  # the run's own request
        self.request = found

    # ---- commands ----------------------------------------------------------------------------------
    def _act(self, judged: commands.JudgedCommands) -> Receipt | None:
        """Act on the command the policy chose; the step's outcome when it ends the wait."""
        ctx, request, chosen = self.ctx, self.request, judged.chosen
        assert chosen is not None and chosen.name is not None  # the look wants only a chosen command
        if chosen.name in commands.ENDING_WAITS:
            if ctx.store.units.cancel(ctx.fence, request.id, f"{chosen.name} received while the run waited"):
                return Receipt({"stopped": chosen.received()}, judged.taken, judged.events, judged.outcomes)
            self._fresh()  # granted first: the STOP stays for the workflow's next receive
            return None
        state = commands.REPORTED_AFTER[chosen.name] or HELD
        cause = {"cmd": chosen.name, "message_id": chosen.message_id}
        events = [*judged.events, NewEvent("state", {"state": state, "caused_by": chosen.actor, "cause": cause},
                                           ctx.actor, None)]
        turn = ctx.store.units.hold if chosen.name == "HOLD" else ctx.store.units.resume
        ctx.lease.await_valid()
        done = turn(ctx.fence, request.id, consumed=[m.id for m in judged.taken], outcomes=judged.outcomes,
                    new_events=events, state=state, why=chosen.reason if isinstance(chosen.reason, str) else None)
        if done:
            ctx.state = ctx.state_written = state
            for stage in JUDGED_IN:  # the stage changed: what waits is judged afresh
                ctx.mail_checked.pop(self._looks(stage).mark, None)
        self._fresh()
        if done and self.request.status == WAITING:
            self.held_s = ctx.store.units.held_seconds(self.request) if self.timeout_s and self.may_end else 0.0
        self._show(chosen.reason)
        return None

    # ---- outcomes ----------------------------------------------------------------------------------
    def _granted(self) -> Receipt | UnitRequest:
        """The grant, recorded with the consumption of its message(s) (or, for a grant already
        recorded, its message(s) consumed now)."""
        ctx, request = self.ctx, self.request
        if not self.may_end:
            ctx.store.units.take_grant(ctx.fence, request)
            return request
        messages = _grants_of(ctx.store.mailbox.pending(ctx.run_id, GRANT_TOPIC, 100), request.id)
        return Receipt({"request": request.id, "units": list(request.granted or [])}, messages)

    def _ended(self) -> Receipt | UnitRequest:
        """A request withdrawn before its outcome was recorded: by a STOP or an ABORT (still waiting
        in the mailbox: taken now), else by its timeout."""
        if not self.may_end:
            return self.request
        found = self.ctx.store.mailbox.pending(self.ctx.run_id, commands.COMMAND_TOPIC, COMMAND_LOOK_LIMIT)
        judged = commands.judge_commands(found, "RUNNING")
        if judged.chosen is not None and judged.chosen.name in commands.ENDING_WAITS:
            return Receipt({"stopped": judged.chosen.received()}, judged.taken, judged.events, judged.outcomes)
        return Receipt({"timed_out": True})

    def _show(self, reason: Any = None) -> None:
        ctx = self.ctx
        if self.request.status == HELD:
            ctx.set_progress(f"held: {reason or 'no reason given'}",
                             {"held": True, "waiting_for_units": self.request.wanted})
            ctx.flush_progress()
        else:
            wanted = self.request.wanted
            waiting_for = " or ".join(wanted) if self.request.any_of else " and ".join(wanted)
            ctx.set_progress(f"waiting for unit {waiting_for}", {"waiting_for_units": wanted})
            ctx.flush_progress_if_due(IDLE_WAIT_SECONDS)


@functools.cache
def _notes(step: str) -> tuple[str, dict[str, str]]:
    """The marks of the looks of a wait of ``step``: its grant's, and its commands' per stage."""
    return f"{step}: grant", {stage: f"{step}: commands while {stage.lower()}" for stage in JUDGED_IN}


@functools.cache
def _command_look(step: str, stage: str, may_end: bool) -> MailLook:
    """The look at the command topic of a wait of ``step`` in ``stage``: it wants the commands the
    policy acts on there (a HOLD or a RESUME, and a STOP or an ABORT when the wait ``may_end``)."""
    acts_on: Collection[str] = ACTS_ON[stage] if may_end else ACTS_ON[stage][:1]

    def wanted(found: list[MessageRecord]) -> bool:
        chosen = commands.judge_commands(found, JUDGED_IN[stage]).chosen
        return chosen is not None and chosen.name in acts_on
    return MailLook(commands.COMMAND_TOPIC, COMMAND_LOOK_LIMIT, wanted=wanted, note=_notes(step)[1][stage])


def _grants_of(found: list[MessageRecord], request_id: int) -> list[MessageRecord]:
    """The grant messages of request ``request_id`` among ``found``."""
    return [m for m in found if codec.loads(m.payload).get("request") == request_id]
