"""One ``phase.run`` call's handshake with the PLC: bring the phase to Idle, start it once, follow
its state while the run's commands reach it, read its reports, reset it.

The handshake lives inside one durable step. Each thing it does that matters after a crash is
committed before it is done (:class:`~exchange.workflows.steps._phase_note.PhaseNote` on the step's
STARTED row, with the command messages it acted on and its events): the stage before the first
write, the command before it is written, each state seen. An execution that resumes the step reads
the note and the PLC's state and carries on from there. A command whose effect is in doubt (its
answer lost, or its writer killed) is resolved from the PLC: the state shows it was taken, or the
command tag still holds its number (the PLC has not looked yet: wait), or neither (it never arrived:
sent again, the only time a command is written twice, and the PLC acts on it once).

What it waits on: the run's mail bell, which the gateway's mail watcher rings when a command
arrives and the state tag's subscription (OPC UA) rings when the state changes; a driver that does
not subscribe is polled every ``poll_s``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from exchange._engine import ENDING_WAITS, RunContext, StepCommands
from exchange._tags.delivery import WaitHooks
from exchange._timefmt import iso_utc
from exchange.errors import (
    CommunicationError,
    PhaseAborted,
    PhaseError,
    PhaseOwnedElsewhere,
    PhaseStopped,
    PhaseTimeout,
    WriteInDoubt,
)
from exchange.workflows.steps import _phase_note as notes
from exchange.workflows.steps._phase_note import PhaseNote
from exchange.workflows.steps._phase_plc import PhasePlc, Reading

log = logging.getLogger(__name__)

RESEND_SETTLE_S = 0.5  # a command in doubt is written again only if not taken in two looks this far apart
SUBSCRIBED_LOOK_S = 30.0  # the state is read anyway this often, should a change not be told
ENDING = ENDING_WAITS  # the run commands a phase on its way between two states acts on at once
FREE_OWNER = 0


class Handshake:
    """One call's handshake (see the module docstring). ``audit`` is the run's tag-write listener,
    ``hooks`` the run's device-wait hooks; ``timeout_s`` the call's (None: no limit)."""

    def __init__(self, ctx: RunContext, plc: PhasePlc, params: Mapping[str, Any], *, timeout_s: float | None,
                 poll_s: float, audit: Any, hooks: WaitHooks) -> None:
        self.ctx, self.plc, self.params = ctx, plc, dict(params)
        self.timeout_s, self.poll_s = timeout_s, poll_s
        self.audit, self.hooks = audit, hooks
        self.config = plc.phase
        self.words = plc.words
        step = ctx.step
        resumed = step.note if step is not None else None
        self.note = PhaseNote.from_json(plc.name, resumed) or PhaseNote(plc.name)
        self.resumed_in_doubt = step is not None and step.resumed_in_doubt
        self.commands = StepCommands(ctx)
        self.bell = ctx.mail_event  # rung by the mail watcher, and by the state tag's subscription
        self.link_lost_since: float | None = None
        self.not_taken_since: float | None = None  # a command in doubt first seen not taken (monotonic)
        self.reports_lost_since: float | None = None  # Complete, its reports not read yet (monotonic)
        self.ended: dict[str, Any] | None = None  # the call's outcome when the run's STOP or ABORT ended it
        self.ready_since = time.monotonic()

    # ---- the call --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Drive the phase to Complete and back to Idle; its reports (see phase.run)."""
        reading = self._look(explicit=True)
        self._check_owner(reading)
        if self.note.stage == notes.READY and self.resumed_in_doubt and reading.state is not None \
                and reading.state not in (self.words.idle, "PERMISSIVE", "STOPPED", "ABORTED"):
            # Resumed with no note of how far it got (a step held after it started the phase, RESUMEd;
            # a run retried): the phase running, held or Complete is this call's. Stopped or Aborted, it
            # is reset and started again, which is what the operator's RESUME asks for.
            self.note.stage, self.note.started_at = notes.RUNNING, time.time()
        subscription = self.plc.subscribe(self.bell.ring, self.poll_s)
        try:
            return self._drive(reading)
        finally:
            subscription.cancel()

    def _drive(self, reading: Reading) -> dict[str, Any]:
        last_read = time.monotonic()
        while True:
            self.ctx.check_cancelled()
            state = reading.state
            self._take_commands(state)  # first: a STOP waiting when the call begins ends it before any write
            if self.ended is not None:
                return self.ended
            if state is None:
                self._link_lost(reading)
            else:
                self.link_lost_since = None
                if state != self.note.state:
                    self._seen(state)
                done = self._act(reading)
                if done is not None:
                    return done
                self._take_commands(state)  # again when the state changed: a command left waiting may fit now
                if self.ended is not None:
                    return self.ended
            # A command on its way is looked at every poll (its doubt is resolved by looking twice);
            # else the state's watch rings the bell (a subscription, or the device's shared poller).
            settled = (state is not None and self.note.stage == notes.RUNNING and self.note.sent is None
                       and self.reports_lost_since is None)
            wait_s = self._bounded(SUBSCRIBED_LOOK_S if settled else self.poll_s)
            self.ctx.flush_progress_if_due(wait_s)
            self.bell.wait(self.commands.pause_seconds(wait_s))
            self.bell.clear()
            explicit = time.monotonic() - last_read >= SUBSCRIBED_LOOK_S
            reading = self._look(explicit=explicit)
            last_read = time.monotonic()

    def _bounded(self, wait_s: float) -> float:
        """``wait_s``, cut to the call's own timeout (not while held) and to the run's deadline."""
        note = self.note
        if self.timeout_s is not None and note.stage == notes.RUNNING and note.held_by is None and note.started_at:
            wait_s = min(wait_s, max(0.0, note.started_at + note.held_s + self.timeout_s - time.time()) + 0.001)
        until_deadline = self.ctx.seconds_until_deadline()
        return wait_s if until_deadline is None else min(wait_s, until_deadline + 0.001)

    # ---- what each state asks for ------------------------------------------------------------------
    def _act(self, reading: Reading) -> dict[str, Any] | None:
        state = reading.state
        assert state is not None
        note = self.note
        if note.sent is not None:
            self._follow_command(reading)
        for _ in range(len(notes.STAGES)):  # a stage reached in this pass acts on the same reading
            stage = note.stage
            if stage == notes.READY:
                self._make_ready(reading)
            elif stage == notes.STARTING:
                self._resolve_start(reading)
            elif stage == notes.RUNNING:
                self._running(state)
                if self.ended is not None:
                    return self.ended
            else:
                return self._resetting(reading)
            if note.stage == stage or note.sent is not None:
                return None
        return None

    def _make_ready(self, reading: Reading) -> None:
        state = reading.state
        assert state is not None
        if state == self.words.idle:
            self._start()
            return
        leftover = self.words.leftover.get(state)
        if leftover is not None and self.note.sent is None:
            self._send(leftover, why=f"the phase was left {state}")
            return
        if state == "PERMISSIVE":
            self._progress(f"phase {self.plc.name}: waiting on the PLC's permissive", state)
            self._check_call_deadline(self.ready_since_wall())
            return
        if not self.words.is_settled(state) or self.note.sent is not None:
            return  # on its way (Resetting, Clearing ...): the command's own timeout bounds it
        if time.monotonic() - self.ready_since > self.config.start_timeout_s:
            raise PhaseTimeout(f"phase {self.plc.name} is {state}, not Idle, after {self.config.start_timeout_s:g} s: "
                               f"another batch system or the PLC's panel is running it; nothing was written",
                               self.plc.name, state)
        self._progress(f"phase {self.plc.name}: {state}, waiting for Idle", state)

    def ready_since_wall(self) -> float:
        return time.time() - (time.monotonic() - self.ready_since)

    def _start(self) -> None:
        note = self.note
        note.stage = notes.STARTING
        self._commit()  # before the first byte: a crash from here on resolves the start from the state
        writes = self.plc.plan_start_writes(self.params, self.config.owner_id)
        if writes:
            self.plc.tags.deliver(writes, listener=self.audit, hooks=self.hooks)
            self._confirm_params()
        note.started_at = time.time()
        self._send("START", why="parameters written")

    def _confirm_params(self) -> None:
        """Read the parameters back: each must hold what was written (the PLC may clamp or refuse)."""
        names = list(self.params)
        if not names:
            return
        planned = self.plc.tags.prepare_write([self.config.params[n] for n in names], list(self.params.values()))
        values = self.plc.read_values([item.tag.path for item in planned])
        from exchange._tags.convert import values_equal  # noqa: PLC0415 - only a phase with parameters needs it

        for name, item, value in zip(names, planned, values, strict=True):
            if not value.quality.is_good or not values_equal(value.value, item.value, item.tag.data_type, None):
                raise PhaseError(f"phase {self.plc.name}: parameter {name!r} ({item.tag.path}) reads "
                                 f"{value.value!r} ({value.quality.value}) after writing {item.value!r}; "
                                 f"Start was not sent", self.plc.name, self.note.state)

    def _resolve_start(self, reading: Reading) -> None:
        """Stage STARTING found on resume, or Start just written: has the PLC taken it?"""
        state = reading.state
        assert state is not None
        if notes.took_effect("START", state):
            self._enter_running(state)
            return
        if self.note.sent is None and state == self.words.idle and self.resumed_in_doubt:
            # Killed between the stage's commit and Start's write: parameters may be written, Start is not.
            self.resumed_in_doubt = False
            writes = self.plc.plan_start_writes(self.params, self.config.owner_id)
            if writes:
                self.plc.tags.deliver(writes, listener=self.audit, hooks=self.hooks,
                                      resumed_in_doubt="an earlier execution was stopped while writing them")
                self._confirm_params()
            self.note.started_at = time.time()
            self._send("START", why="parameters written (after a restart)")

    def _enter_running(self, state: str) -> None:
        note = self.note
        note.stage = notes.RUNNING
        if not note.started_at:
            note.started_at = time.time()
        self._commit()

    def _running(self, state: str) -> None:
        note, words = self.note, self.words
        if state == "HELD" and note.held_by is None:
            self._held(by=notes.OPERATOR if note.last == "HOLD" else notes.EQUIPMENT)
        elif state == words.running and note.held_by is not None:
            self._unheld()
        elif state == "COMPLETE":
            self._complete()
        elif state == "STOPPED":
            self._fail(PhaseStopped, state)
            return
        elif state == "ABORTED":
            self._fail(PhaseAborted, state)
            return
        elif state == words.idle and note.sent is None:
            raise PhaseError(f"phase {self.plc.name} went back to Idle without completing (reset from elsewhere?)",
                             self.plc.name, state)
        if note.held_by is None and note.stage == notes.RUNNING:
            self._check_call_deadline(note.started_at + note.held_s)

    def _held(self, *, by: str) -> None:
        note = self.note
        note.held_by, note.held_since = by, time.time()
        note.state_before = self.ctx.state_written or "RUNNING"
        if by == notes.EQUIPMENT:
            log.warning("run %s: phase %s held by the equipment (the PLC)", self.ctx.run_id, self.plc.name)
            with self.ctx.caused_by("equipment"):
                self._commit(state="HELD")
        else:
            self._commit(state="HELD")
        self.commands.again()  # a RESUME sent while it was holding may be taken now

    def _unheld(self) -> None:
        note = self.note
        note.held_s += time.time() - note.held_since
        before = note.state_before or "RUNNING"
        note.held_by, note.state_before = None, None
        self._commit(state=before)
        self.commands.again()

    def _complete(self) -> None:
        reports, problem = self.plc.read_reports()
        if problem is not None:  # read again next time round, up to the devices' comm_timeout_s
            now = time.monotonic()
            self.reports_lost_since = self.reports_lost_since or now
            limit_s = max(self.plc.tags.comm_timeout_s(self.plc.tags.tag(path).device)
                          for path in self.config.reports.values())
            if now - self.reports_lost_since > limit_s:
                raise CommunicationError(f"phase {self.plc.name} is Complete but its reports could not be read "
                                         f"for {limit_s:g} s: {problem}")
            self._progress(f"phase {self.plc.name}: Complete, reading its reports: {problem}", "COMPLETE")
            return
        note = self.note
        note.stage, note.reports = notes.RESETTING, reports
        self._send("RESET", why="the phase is Complete")

    def _resetting(self, reading: Reading) -> dict[str, Any] | None:
        state = reading.state
        if state != self.words.idle:
            if state == "COMPLETE" and self.note.sent is None:
                self._send("RESET", why="the phase is Complete")  # a Reset found settled after a restart
            return None
        if self.plc.owner_tag is not None and reading.owner == self.config.owner_id:
            writes = self.plc.tags.prepare_write([self.plc.owner_tag.path], [FREE_OWNER])
            self.plc.tags.deliver(writes, listener=self.audit, hooks=self.hooks,
                                  resumed_in_doubt=None)
        return {"phase": self.plc.name, "state": "COMPLETE", "reports": self.note.reports,
                "started_at": iso_utc(self.note.started_at), "finished_at": iso_utc(time.time())}

    def _fail(self, error: type[PhaseError], state: str) -> None:
        """The phase went Stopped or Aborted. By the PLC itself: ``error`` raised (a workflow that holds
        on errors holds for an operator). After the run's STOP or ABORT: the run reports the state and
        the call ends with it recorded as its outcome (:attr:`ended`), raised by ``phase.run`` outside
        the step, so the operator's own command does not hold the run."""
        note = self.note
        if note.last not in ENDING:
            raise error(f"phase {self.plc.name} went {state} (by the PLC itself)", self.plc.name, state)
        self._commit(state=state)
        self.ended = {"phase": self.plc.name, "state": state, "reports": {}, "started_at": iso_utc(note.started_at),
                      "finished_at": iso_utc(time.time()),
                      "ended": {"error": error.__name__, "state": state,
                                "message": f"phase {self.plc.name} went {state} (after the run's {note.last})"}}

    # ---- commands to the PLC ---------------------------------------------------------------------
    def _send(self, command: str, *, why: str) -> None:
        """Commit the intent, then write ``command``'s number."""
        note = self.note
        note.sending(command, time.time())
        self.ctx.record_event("phase_command", {"phase": self.plc.name, "command": command,
                                                "number": self.plc.command_number(command), "why": why})
        self._commit()
        self._write(command)

    def _write(self, command: str) -> None:
        try:
            self.plc.send(command, self.audit, self.hooks)
        except WriteInDoubt as exc:
            log.warning("run %s: phase %s: %s's answer was lost; resolved from the state: %s",
                        self.ctx.run_id, self.plc.name, command, exc)
            self.note.sent_in_doubt = True

    def _follow_command(self, reading: Reading) -> None:
        """The last command written: settled (forget it), on its way, in doubt, or late."""
        note = self.note
        command, state = note.sent, reading.state
        assert command is not None and state is not None
        if state in notes.ENDS_IN.get(command, frozenset()):
            note.settled()
            return
        if state in notes.ENDED and command not in notes.LEADS_OUT_OF_END:
            note.settled()  # the phase ended before the command reached it (a gateway was down): moot
            return
        if notes.took_effect(command, state) or reading.command == self.plc.command_number(command):
            self.not_taken_since = None
        if notes.took_effect(command, state):
            note.sent_in_doubt = False
        elif note.sent_in_doubt and reading.command != self.plc.command_number(command):
            # Never reached the PLC: its tag no longer holds the number and its state shows nothing of
            # it, seen twice RESEND_SETTLE_S apart (a PLC may clear the tag a scan before it shows the
            # state it went to).
            if self.not_taken_since is None:
                self.not_taken_since = time.monotonic()
                return
            if time.monotonic() - self.not_taken_since < RESEND_SETTLE_S:
                return
            self.not_taken_since = None
            note.sent_in_doubt = False
            why = f"the phase stayed {state}: the first write never reached it"
            self.ctx.record_event("phase_command", {"phase": self.plc.name, "command": command,
                                                    "number": self.plc.command_number(command), "why": why})
            note.sent_at = time.time()
            self._commit()
            self._write(command)
            return
        limit_s = self.config.start_timeout_s if command == "START" else self.config.command_timeout_s
        if time.time() - note.sent_at > limit_s:
            raise PhaseTimeout(f"phase {self.plc.name}: {command} was sent {limit_s:g} s ago and the phase is "
                               f"{state}", self.plc.name, state)

    def _take_commands(self, state: str | None) -> None:
        words = self.words
        stable = state in ("HELD", words.running) and self.note.stage == notes.RUNNING and self.note.sent is None
        acts_on = None if stable else ENDING
        judge_in = {"HELD": "HELD", words.running: "RUNNING"}.get(state or "", state or "UNKNOWN") if stable \
            else (state or "UNKNOWN")
        judged = self.commands.take(judge_in, acts_on, about={"phase": self.plc.name})
        if judged is None:
            return
        chosen = judged.chosen
        if chosen is None or chosen.name is None:  # only drops
            self._commit(consumed=judged.taken, events=judged.events, outcomes=judged.outcomes)
            return
        if self.note.stage == notes.READY or (self.note.stage == notes.STARTING and self.note.sent is None):
            # Nothing of the phase started: the command ends the call as it ends a checkpoint (raised
            # by phase.run outside the step, from the recorded outcome).
            self._commit(consumed=judged.taken, events=judged.events, outcomes=judged.outcomes)
            self.ended = {"phase": self.plc.name, "state": self.note.state, "reports": {}, "started_at": None,
                          "finished_at": iso_utc(time.time()), "stopped": chosen.received()}
            return
        plc_command = {"RESUME": words.resume}.get(chosen.name, chosen.name)
        if plc_command not in self.plc.numbering.commands:
            self._commit(consumed=judged.taken, events=judged.events, outcomes=judged.outcomes)
            return
        cause = {"caused_by": chosen.actor, "cause": {"cmd": chosen.name, "message_id": chosen.message_id}}
        note = self.note
        note.sending(plc_command, time.time())
        self.ctx.record_event("phase_command", {"phase": self.plc.name, "command": plc_command,
                                                "number": self.plc.command_number(plc_command),
                                                "cmd": chosen.name, **cause})
        self._commit(consumed=judged.taken, events=judged.events, outcomes=judged.outcomes)
        with self.ctx.caused_by(chosen.actor, cause["cause"]):
            self._write(plc_command)

    # ---- looking ---------------------------------------------------------------------------------
    def _look(self, *, explicit: bool) -> Reading:
        return self.plc.look(explicit=explicit)

    def _seen(self, state: str) -> None:
        note = self.note
        note.state = state
        self.ctx.record_event("phase_state", {"phase": self.plc.name, "state": state})
        self._progress(f"phase {self.plc.name}: {state}", state)
        self.commands.again()
        if note.stage != notes.RUNNING or state in ("HELD", "COMPLETE", "STOPPED", "ABORTED"):
            return  # committed with what the state leads to
        self._commit()

    def _link_lost(self, reading: Reading) -> None:
        now = time.monotonic()
        if self.link_lost_since is None:
            self.link_lost_since = now
        device = self.plc.state_tag.device
        limit_s = self.plc.tags.comm_timeout_s(device)
        waited_s = now - self.link_lost_since
        self.hooks.waiting(device, reading.problem or "no answer", waited_s, limit_s)
        if waited_s > limit_s:
            raise CommunicationError(f"phase {self.plc.name}: the state tag {self.plc.state_tag.path} could not be "
                                     f"read for {limit_s:g} s: {reading.problem}")

    def _check_owner(self, reading: Reading) -> None:
        if self.plc.owner_tag is None:
            return
        if reading.owner is None:
            raise CommunicationError(f"phase {self.plc.name}: its owner tag {self.plc.owner_tag.path} could not be "
                                     f"read; nothing was written")
        if reading.owner not in (FREE_OWNER, self.config.owner_id):
            raise PhaseOwnedElsewhere(
                f"phase {self.plc.name} is owned by {reading.owner} (its owner tag {self.plc.owner_tag.path}; "
                f"Exchange is {self.config.owner_id}): nothing was written", self.plc.name, reading.state)

    def _check_call_deadline(self, since_wall: float) -> None:
        if self.timeout_s is None:
            return
        if time.time() - since_wall > self.timeout_s:
            raise PhaseTimeout(f"phase {self.plc.name} did not complete within {self.timeout_s:g} s "
                               f"(time held not counted); it is {self.note.state}", self.plc.name, self.note.state)

    def _progress(self, message: str, state: str) -> None:
        self.ctx.set_progress(message, {"phase": self.plc.name, "state": state})

    def _commit(self, *, consumed: Any = (), events: Any = (), outcomes: Any = None, state: str | None = None
                ) -> None:
        note = self.note
        label = f"{note.stage}, state {note.state}" + (f", {note.sent} sent" if note.sent else "") \
            + (f", held by the {note.held_by}" if note.held_by else "") + (f", run {state}" if state else "") \
            + (f", {len(consumed)} command(s) taken" if consumed else "")
        self.ctx.note_step(note.to_json(), consumed=consumed, events=events, outcomes=outcomes, state=state,
                           label=label)

