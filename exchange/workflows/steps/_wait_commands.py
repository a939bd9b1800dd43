"""A tag wait that honours the run's commands (``wait.until_tag(..., on_hold=..., on_resume=...)``).

The wait stays one durable step. Between two looks at the tag it looks at the run's command topic
(:class:`~exchange._engine.StepCommands`: a store read only when the mail watcher says mail arrived)
and wakes on the run's mail bell, so a command is noticed at once, not one poll later. Commands are
judged by the ISA-88 policy: while waiting (judged in RUNNING) HOLD, STOP and ABORT are taken, a
RESUME or RESET is dropped as ``recvCommand`` drops it; while held (judged in HELD) RESUME, STOP and
ABORT. The run
reports RUNNING while the wait waits, HELD once ``on_hold`` has returned.

- HOLD: ``on_hold()`` runs (its steps run inside this step, their tag writes audited with it, caused
  by the HOLD's sender), then the run reports HELD and the wait waits, without reading the tag, for
  RESUME or STOP. The timeout does not run while held.
- RESUME: ``on_resume()`` runs, the run reports RUNNING and the wait goes on with the rest of its
  timeout (reading the tag afresh).
- STOP or ABORT: the step ends with ``{"stopped": command, ...}`` recorded as its outcome, and
  ``wait.until_tag`` raises StopRequested (AbortRequested) from it outside the step, so a replay
  raises it again and a workflow with ``on_step_error="hold"`` does not hold the run for the
  operator's own STOP.

Crash safety: each command is consumed in the commit that records what it caused, on the step's
STARTED row (:meth:`~exchange._engine.RunContext.note_step`, a :class:`WaitNote`): HOLD consumed with
stage ``holding`` before ``on_hold`` runs, stage ``held`` (and the state HELD) once it returned;
likewise ``resuming`` / ``waiting`` around ``on_resume``. An execution that resumes the step after a
crash or a takeover reads the note: a callback that returned is never run again (held: it waits for
RESUME again without calling ``on_hold``); one cut off mid-way is run once more, with the step
resumed in doubt so its tag writes are resolved by their ``on_doubt`` (read back, never resent
blindly): making the plant safe twice beats not at all. The note keeps the time waited so far and,
while waiting, the wall-clock time the stretch began, so the resumed wait waits only the rest (the
time the gateway was down counts as waited, as the plant went on). The first note is committed when
the wait starts (with the state RUNNING, unless the run reports it already): one commit per call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from exchange._engine import ENDING_WAITS, RunContext, StepCommands
from exchange._values import QualifiedValue

WAITING, HOLDING, HELD, RESUMING, STOPPED = "waiting", "holding", "held", "resuming", "stopped"
STAGES = (WAITING, HOLDING, HELD, RESUMING, STOPPED)
ENDING = ENDING_WAITS  # the commands that end the wait (accepted waiting or held)
# One look for RESUME/STOP while held: the mail bell (a command, a cancel) ends it at once, and the
# run's deadline cuts it short.
HELD_WAIT_S = 10.0
NOTE_KIND = "wait"


class _Command(Protocol):  # what the wait uses of a judged command (exchange._engine.model.commands)
    @property
    def name(self) -> str | None: ...

    def received(self) -> dict[str, Any]: ...


class JudgedCommands(Protocol):  # what StepCommands.take hands back, as the wait uses it
    @property
    def chosen(self) -> _Command | None: ...

    @property
    def taken(self) -> Sequence[Any]: ...

    @property
    def events(self) -> Sequence[Any]: ...

    @property
    def outcomes(self) -> Mapping[int, tuple[str, str | None]]: ...


# One stretch of waiting: (the rest of the timeout in s, the check to call before each look, the bell
# that ends a pause) -> the reading that satisfied the wait, or ConfirmTimeout.
Stretch = Callable[[float, Callable[[], None], "_Bell"], QualifiedValue]


@dataclass
class WaitNote:
    """How far a commanded wait has got, as its step's STARTED row keeps it (times: wall clock)."""

    started_at: float  # the call began
    stage: str = WAITING
    waited_s: float = 0.0  # counted against the timeout before ``since``
    since: float = 0.0  # the current stretch of waiting began (stage WAITING)
    held_s: float = 0.0  # held so far (holds that ended)
    held_since: float = 0.0  # the current hold began
    holds: int = 0
    command: dict[str, Any] | None = None  # the HOLD, RESUME, STOP or ABORT acted on last
    kind: str = NOTE_KIND

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> WaitNote | None:
        """The note an interrupted attempt left, or None (none, or not a wait's)."""
        if not isinstance(data, dict) or data.get("kind") != NOTE_KIND or data.get("stage") not in STAGES:
            return None
        return cls(**{key: data[key] for key in cls.__dataclass_fields__ if key in data})


class _Bell:
    """The run's mail bell, its waits cut to when the next look at the mailbox is due (without a
    mail watcher nothing rings it for a command: the mailbox is looked at every ``mailbox_poll_ms``)."""

    def __init__(self, ctx: RunContext, commands: StepCommands) -> None:
        self._bell, self._commands = ctx.mail_event, commands

    def ring(self) -> None:
        self._bell.ring()

    def wait(self, timeout_seconds: float | None = None) -> bool:
        wanted_s = 3600.0 if timeout_seconds is None else timeout_seconds
        return self._bell.wait(self._commands.pause_seconds(wanted_s))

    def clear(self) -> None:
        self._bell.clear()


class _CommandTaken(Exception):
    """Ends a stretch of waiting: a command the wait acts on is waiting (raised by the check)."""

    def __init__(self, judged: JudgedCommands) -> None:
        super().__init__("a command to act on")
        self.judged = judged


class CommandedWait:
    """One wait call's handling of HOLD, RESUME and STOP (see the module docstring). ``ctx`` is the
    run, inside this wait's own step; ``about`` goes into the ``command`` events; ``waiting_for``
    (``"[plant]Dose/Total >= 20.0"``) into the progress shown after a RESUME."""

    def __init__(self, ctx: RunContext, *, on_hold: Callable[[], Any] | None,
                 on_resume: Callable[[], Any] | None, about: dict[str, Any], waiting_for: str) -> None:
        self.ctx, self.on_hold, self.on_resume, self.about = ctx, on_hold, on_resume, about
        self.waiting_for = waiting_for
        self.commands = StepCommands(ctx)
        self.bell = _Bell(ctx, self.commands)
        step = ctx.step
        assert step is not None  # the wait is its own step (checked by the caller)
        # Only the note of this very attempt, cut off by a crash or a takeover, counts: a step held on
        # its failure (a timeout) and RESUMEd starts afresh with no note (the stepper drops it), and
        # so does its wait.
        noted = WaitNote.from_json(step.note) if step.resumed_in_doubt else None
        now_wall, now = time.time(), time.monotonic()
        self.note = noted or WaitNote(started_at=now_wall, since=now_wall)
        self.resumed = noted is not None
        # The note's wall-clock times as monotonic ones, converted once (a clock step later changes nothing).
        self.started = now - max(0.0, now_wall - self.note.started_at)
        self.since = now - max(0.0, now_wall - self.note.since)

    # ---- the call ----------------------------------------------------------------------------------
    def run(self, stretch: Stretch, timeout_s: float) -> dict[str, Any]:
        """Wait (``stretch`` after ``stretch``) until the tag satisfies the wait; ``{"reading": ...}``
        and the counts, or ``{"stopped": command}`` and the counts."""
        if self.resumed:
            self._recover()
        else:  # the timeout made durable, and the state the run reports while it waits
            self._no_longer_in_doubt()  # an earlier attempt's doubt is not this fresh wait's callbacks'
            self._commit(None, state=None if self.ctx.state_written == "RUNNING" else "RUNNING")
        while self.note.stage != STOPPED:
            try:
                seen = stretch(max(0.0, timeout_s - self._waited_s()), self._check, self.bell)
            except _CommandTaken as taken:
                self._act(taken.judged)
                continue
            return {"reading": seen, **self._counts()}
        return {"stopped": self.note.command, **self._counts()}

    def _counts(self) -> dict[str, Any]:
        return {"holds": self.note.holds, "held_ms": round(self.note.held_s * 1000, 3),
                "elapsed_ms": round((time.monotonic() - self.started) * 1000, 3)}

    def _waited_s(self) -> float:
        return self.note.waited_s + (time.monotonic() - self.since if self.note.stage == WAITING else 0.0)

    # ---- after a crash -------------------------------------------------------------------------------
    def _recover(self) -> None:
        """Carry on from the note a resumed attempt found."""
        stage = self.note.stage
        if stage == HOLDING:  # on_hold was cut off: run it again, its writes resolved as in doubt
            self._finish_hold()
        elif stage == RESUMING:  # on_resume was cut off: likewise
            self._finish_resume()
        self._no_longer_in_doubt()
        if self.note.stage == HELD:
            self._show_held()
            self._held()

    def _no_longer_in_doubt(self) -> None:
        # What was in doubt (a callback cut off) has been done again; the callbacks this attempt runs
        # from now on write afresh, so their tag writes must not be treated as in doubt.
        step = self.ctx.step
        if step is not None:
            step.resumed_in_doubt = False

    # ---- commands ----------------------------------------------------------------------------------
    def _check(self) -> None:
        """Before each look at the tag: the run's cancel, then a command to act on ends the stretch."""
        self.ctx.check_cancelled()
        judged = self.commands.take("RUNNING", about=self.about)
        if judged is None:
            return
        if judged.chosen is None or judged.chosen.name is None:  # only drops: recorded, the wait goes on
            self._commit(judged)
            return
        raise _CommandTaken(judged)

    def _act(self, judged: JudgedCommands) -> None:
        chosen = judged.chosen
        assert chosen is not None and chosen.name is not None
        note = self.note
        note.waited_s = self._waited_s()
        note.command = chosen.received()
        if chosen.name in ENDING:
            note.stage = STOPPED
            self._commit(judged)
            return
        # HOLD (the only other command RUNNING accepts). Consumed with the stage before on_hold runs.
        note.stage, note.holds, note.held_since = HOLDING, note.holds + 1, time.time()
        with self._caused_by(note.command):
            self.ctx.set_progress(f"holding: {self._reason()}", {"held": True})
            if self.on_hold is None:
                note.stage = HELD
                self._commit(judged, state="HELD")
            else:
                self._commit(judged)
                self._finish_hold()
        self._show_held()
        self._held()

    def _finish_hold(self) -> None:
        """Stage HOLDING: call on_hold, then report HELD with the stage HELD in one commit."""
        with self._caused_by(self.note.command):
            if self.on_hold is not None:
                self.on_hold()
            self.note.stage = HELD
            self._commit(None, state="HELD")

    def _held(self) -> None:
        """Held: wait for RESUME (returns, waiting again) or STOP (returns, stage STOPPED)."""
        self.commands.again()  # a command that waited while the wait was running may be taken now
        while True:
            self.ctx.check_cancelled()
            judged = self.commands.take("HELD", about=self.about)
            if judged is not None:
                chosen = judged.chosen
                if chosen is None or chosen.name is None:
                    self._commit(judged)
                elif chosen.name in ENDING:
                    self.note.stage, self.note.command = STOPPED, chosen.received()
                    self._commit(judged)
                    return
                else:  # RESUME, the only other command HELD accepts
                    self._resume(judged)
                    return
            until_deadline = self.ctx.seconds_until_deadline()
            wait_s = HELD_WAIT_S if until_deadline is None else min(HELD_WAIT_S, until_deadline + 0.001)
            self.ctx.flush_progress_if_due(wait_s)
            self.bell.wait(wait_s)
            self.bell.clear()


    def _resume(self, judged: JudgedCommands) -> None:
        chosen = judged.chosen
        assert chosen is not None
        note = self.note
        note.held_s += max(0.0, time.time() - note.held_since)
        note.command = chosen.received()
        if self.on_resume is None:
            self._wait_again(judged)
            return
        note.stage = RESUMING
        self._commit(judged)
        self._finish_resume()

    def _finish_resume(self) -> None:
        """Stage RESUMING: call on_resume, then report RUNNING and wait again (one commit)."""
        with self._caused_by(self.note.command):
            if self.on_resume is not None:
                self.on_resume()
            self._wait_again(None)

    def _wait_again(self, judged: JudgedCommands | None) -> None:
        note = self.note
        note.stage, note.since = WAITING, time.time()
        self.since = time.monotonic()
        with self._caused_by(note.command):
            self.ctx.set_progress(f"waiting for {self.waiting_for}", {"held": False})
            self._commit(judged, state="RUNNING")
        self.commands.again()  # a HOLD sent while held was dropped; one sent since is taken now

    # ---- recording ---------------------------------------------------------------------------------
    def _commit(self, judged: JudgedCommands | None, *, state: str | None = None) -> None:
        if judged is None:
            self.ctx.note_step(self.note.to_json(), state=state)
            return
        self.ctx.note_step(self.note.to_json(), consumed=judged.taken, events=judged.events,
                           outcomes=judged.outcomes, state=state)

    def _caused_by(self, command: dict[str, Any] | None) -> Any:
        command = command or {}
        return self.ctx.caused_by(command.get("actor"), {"cmd": command.get("cmd"), "message_id": command.get("id")})

    def _reason(self) -> str:
        reason = (self.note.command or {}).get("reason")
        return str(reason) if reason else "no reason given"

    def _show_held(self) -> None:
        self.ctx.set_progress(f"held: {self._reason()}", {"held": True})
        self.ctx.flush_progress()
