"""The PLC side of an equipment phase: ``[simulation.phases."UNIT/PHASE"]`` plays the phase logic
that a batch system commands over a Phase Logic Interface (../shared/DESIGN.md, "Equipment phases").

Each step the machine looks at the phase's command tag. A command number other than 0 is taken (the
tag goes back to 0, as a PLC acknowledges a command, so the next write is seen even with the same
number): accepted in the current state it starts the transition, else it is ignored, as a PLC
ignores a command its state does not allow. A transient state (Holding, Restarting, Stopping,
Aborting, Resetting; PackML's Starting, Completing, Unholding, ...) lasts ``transition_ms``. The
running state (PLI Running, PackML Execute) counts toward ``duration_s``, not while held; when it is
reached the ``reports`` are written and the phase completes.

With ``[watchdog]`` configured the PLC watches its heartbeat too: when the heartbeat tag has not
changed for three periods, every running phase holds by itself (an equipment-initiated hold), as
the PLC program of docs/plant-features.md does. Tests make the PLC act by itself with
:meth:`PhaseMachine.command` (hold it, stop it, abort it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from exchange._config_phases import PhaseConfig
from exchange._config_simulation import SimulatedPhaseConfig
from exchange._phase_numbering import NUMBERINGS

STALE_HEARTBEAT_PERIODS = 3


@dataclass(frozen=True)
class Behaviour:
    """One numbering's state machine: what each state accepts, where transients settle."""

    idle: str
    running: str
    complete_via: str | None  # a transient on the way to Complete (PackML Completing), or None
    accepts: Mapping[str, Mapping[str, str]]  # state -> command -> the state it goes to
    settles: Mapping[str, str]  # transient state -> the state it reaches


_PLI_ABORTABLE = ("IDLE", "RUNNING", "HOLDING", "HELD", "RESTARTING", "PAUSING", "PAUSED", "STOPPING", "COMPLETE",
                  "STOPPED")
PLI_BEHAVIOUR = Behaviour(
    idle="IDLE", running="RUNNING", complete_via=None,
    accepts={
        "IDLE": {"START": "RUNNING"},
        "RUNNING": {"HOLD": "HOLDING", "PAUSE": "PAUSING", "STOP": "STOPPING"},
        "HELD": {"RESTART": "RESTARTING", "STOP": "STOPPING"},
        "PAUSED": {"RESUME": "RUNNING", "HOLD": "HOLDING", "STOP": "STOPPING"},
        "COMPLETE": {"RESET": "RESETTING"},
        "STOPPED": {"RESET": "RESETTING"},
        "ABORTED": {"RESET": "RESETTING"},
        **{state: {} for state in ("HOLDING", "RESTARTING", "PAUSING", "STOPPING", "RESETTING", "ABORTING")},
    },
    settles={"HOLDING": "HELD", "RESTARTING": "RUNNING", "PAUSING": "PAUSED", "STOPPING": "STOPPED",
             "ABORTING": "ABORTED", "RESETTING": "IDLE"},
)
PACKML_BEHAVIOUR = Behaviour(
    idle="IDLE", running="EXECUTE", complete_via="COMPLETING",
    accepts={
        "IDLE": {"START": "STARTING", "STOP": "STOPPING"},
        "EXECUTE": {"HOLD": "HOLDING", "SUSPEND": "SUSPENDING", "STOP": "STOPPING"},
        "HELD": {"UNHOLD": "UNHOLDING", "STOP": "STOPPING"},
        "SUSPENDED": {"UNSUSPEND": "UNSUSPENDING", "STOP": "STOPPING"},
        "COMPLETE": {"RESET": "RESETTING", "STOP": "STOPPING"},
        "STOPPED": {"RESET": "RESETTING"},
        "ABORTED": {"CLEAR": "CLEARING"},
        **{state: {"STOP": "STOPPING"} for state in ("STARTING", "HOLDING", "UNHOLDING", "SUSPENDING",
                                                    "UNSUSPENDING", "COMPLETING", "RESETTING")},
        **{state: {} for state in ("STOPPING", "ABORTING", "CLEARING")},
    },
    settles={"STARTING": "EXECUTE", "HOLDING": "HELD", "UNHOLDING": "EXECUTE", "SUSPENDING": "SUSPENDED",
             "UNSUSPENDING": "EXECUTE", "COMPLETING": "COMPLETE", "STOPPING": "STOPPED", "ABORTING": "ABORTED",
             "RESETTING": "IDLE", "CLEARING": "STOPPED"},
)
BEHAVIOURS = {"pli": PLI_BEHAVIOUR, "packml": PACKML_BEHAVIOUR}


class PhaseMachine:
    """One simulated phase over the plant's points (see the module docstring).

    ``read(path)`` and ``write(path, value)`` reach the plant's points by tag path; the engine gives
    them under its lock, once per step.
    """

    def __init__(self, phase: PhaseConfig, simulated: SimulatedPhaseConfig, heartbeat: str | None = None,
                 heartbeat_period_s: float = 1.0) -> None:
        self.phase = phase
        self.simulated = simulated
        self.numbering = NUMBERINGS[phase.numbering]
        self.behaviour = BEHAVIOURS[phase.numbering]
        self._numbers = {name: number for number, name in self.numbering.states.items()}
        self.heartbeat = heartbeat
        self.heartbeat_period_s = heartbeat_period_s
        self.reset()

    def reset(self) -> None:
        """Idle, nothing run, nothing taken (the plant's reset)."""
        self.state = self.behaviour.idle
        self.ran_s = 0.0  # time spent running toward duration_s
        self._transient_left_s = 0.0
        self._inside: list[str] = []  # commands the PLC gives itself (a test's hold, stop, abort)
        self._heartbeat_value: Any = None
        self._heartbeat_still_s = 0.0
        self.commands_taken: list[str] = []  # every command acted on, by name (tests count the Starts)

    @property
    def state_number(self) -> int:
        return self._numbers[self.state]

    def command(self, name: str) -> None:
        """The PLC gives itself ``name`` (HOLD, STOP, ABORT, ...) at the next step."""
        self._inside.append(name.upper())

    def finish(self) -> None:
        """The phase's work is done at the next step it runs (a test ends a long phase when it wants)."""
        self.ran_s = max(self.ran_s, self.simulated.duration_s)

    def step(self, dt_s: float, read: Callable[[str], Any], write: Callable[[str, Any], None]) -> None:
        """One step of ``dt_s`` simulated seconds."""
        number = read(self.phase.command)
        if isinstance(number, int) and number != 0:
            write(self.phase.command, 0)  # acknowledged: the next write is seen, even of the same number
            name = next((c for c, n in self.numbering.commands.items() if n == number), None)
            if name is not None:
                self._take(name)
        while self._inside:
            self._take(self._inside.pop(0))
        self._watch_heartbeat(dt_s, read)
        self._advance(dt_s, write)
        write(self.phase.state, self.state_number)

    def _take(self, name: str) -> None:
        if name == "ABORT" and self.state not in ("ABORTING", "ABORTED"):
            self._go("ABORTING")
            self.commands_taken.append(name)
            return
        target = self.behaviour.accepts.get(self.state, {}).get(name)
        if target is None:
            return  # not allowed in this state: a PLC ignores it
        self.commands_taken.append(name)
        if name == "START":
            self.ran_s = 0.0
        self._go(target)

    def _go(self, state: str) -> None:
        self.state = state
        self._transient_left_s = self.simulated.transition_ms / 1000 if state in self.behaviour.settles else 0.0

    def _advance(self, dt_s: float, write: Callable[[str, Any], None]) -> None:
        if self.state in self.behaviour.settles:
            self._transient_left_s -= dt_s
            if self._transient_left_s <= 1e-9:
                self._go(self.behaviour.settles[self.state])
            return
        if self.state == self.behaviour.running:
            self.ran_s += dt_s
            if self.ran_s >= self.simulated.duration_s - 1e-9:
                for name, value in self.simulated.reports.items():
                    write(self.phase.reports[name], value)
                self._go(self.behaviour.complete_via or "COMPLETE")

    def _watch_heartbeat(self, dt_s: float, read: Callable[[str], Any]) -> None:
        if self.heartbeat is None:
            return
        value = read(self.heartbeat)
        if value != self._heartbeat_value:
            self._heartbeat_value, self._heartbeat_still_s = value, 0.0
            return
        self._heartbeat_still_s += dt_s
        if (self._heartbeat_still_s >= STALE_HEARTBEAT_PERIODS * self.heartbeat_period_s
                and self.state == self.behaviour.running):
            self._take("HOLD")  # the supervisor is gone: the PLC holds its phase by itself
