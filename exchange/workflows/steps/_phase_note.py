"""How far one ``phase.run`` call has got, as its step's STARTED row keeps it
(:meth:`~exchange._engine.RunContext.note_step`): what an execution that resumes the step after a
crash or a takeover needs to re-attach to the phase without sending Start twice.

Stages, in order: ``ready`` (bringing a phase left Complete, Stopped or Aborted back to Idle, or
waiting out Permissive; nothing of this call started), ``starting`` (parameters, owner and Start are
being written: whether Start reached the PLC is resolved from the state), ``running`` (Start taken:
the state is followed and the run's commands reach the phase), ``resetting`` (Complete seen, the
reports read and kept here, Reset sent).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

READY, STARTING, RUNNING, RESETTING = "ready", "starting", "running", "resetting"
STAGES = (READY, STARTING, RUNNING, RESETTING)
OPERATOR, EQUIPMENT = "operator", "equipment"  # who held the phase


@dataclass
class PhaseNote:
    phase: str
    stage: str = READY
    sent: str | None = None  # the last command written whose effect the state has not shown yet
    sent_at: float = 0.0  # wall clock, when it was written
    sent_in_doubt: bool = False  # its answer was lost, or the execution that wrote it died
    last: str | None = None  # the last command written, settled or not (who held or stopped the phase)
    state: str | None = None  # the last state seen
    held_by: str | None = None  # OPERATOR or EQUIPMENT while the phase is held
    held_since: float = 0.0  # wall clock
    held_s: float = 0.0  # time held so far: the call's timeout is paused while held
    state_before: str | None = None  # the run's reported state before the hold
    started_at: float = 0.0  # wall clock, when Start was sent
    reports: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, phase: str, data: Any) -> PhaseNote | None:
        """The note an earlier attempt left, or None when it left none (or one of another phase)."""
        if not isinstance(data, dict) or data.get("phase") != phase or data.get("stage") not in STAGES:
            return None
        known = {key: data[key] for key in cls.__dataclass_fields__ if key in data}
        note = cls(**known)
        note.sent_in_doubt = note.sent is not None  # the execution that wrote it is gone
        return note

    def sending(self, command: str, now: float) -> None:
        self.sent, self.sent_at, self.sent_in_doubt, self.last = command, now, False, command

    def settled(self) -> None:
        self.sent, self.sent_in_doubt = None, False


# What a command leads to: the states on its way, and the settled state it ends in (PLI and PackML
# names together: a name means one thing in both).
ON_ITS_WAY = {
    "START": frozenset({"RUNNING", "STARTING", "EXECUTE"}),
    "HOLD": frozenset({"HOLDING"}),
    "RESTART": frozenset({"RESTARTING"}),
    "UNHOLD": frozenset({"UNHOLDING"}),
    "STOP": frozenset({"STOPPING"}),
    "ABORT": frozenset({"ABORTING"}),
    "RESET": frozenset({"RESETTING"}),
    "CLEAR": frozenset({"CLEARING"}),
}
ENDS_IN = {
    "START": frozenset({"RUNNING", "EXECUTE", "COMPLETE", "HELD", "STOPPED", "ABORTED"}),
    "HOLD": frozenset({"HELD"}),
    "RESTART": frozenset({"RUNNING", "COMPLETE"}),
    "UNHOLD": frozenset({"EXECUTE", "COMPLETE"}),
    "STOP": frozenset({"STOPPED"}),
    "ABORT": frozenset({"ABORTED"}),
    "RESET": frozenset({"IDLE"}),
    "CLEAR": frozenset({"STOPPED"}),
}

ENDED = frozenset({"COMPLETE", "STOPPED", "ABORTED"})  # where a Hold, Restart or Stop means nothing any more
LEADS_OUT_OF_END = frozenset({"RESET", "CLEAR", "ABORT"})


def took_effect(command: str, state: str) -> bool:
    """Whether ``state`` shows the PLC took ``command`` (on its way, or there)."""
    return state in ON_ITS_WAY.get(command, frozenset()) or state in ENDS_IN.get(command, frozenset())
