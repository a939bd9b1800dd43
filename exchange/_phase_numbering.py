"""The numbers of a Phase Logic Interface: what Exchange writes to a phase's command tag and what
the PLC's state tag holds, in the two numberings the config offers (``numbering = "pli"`` or
``"packml"``; ../shared/DESIGN.md, "Equipment phases").

``pli`` is the numbering of the ISA-88 phase state machine as batch systems' phase logic interfaces
number it (Start 1 ... Abort 8; Idle 1 ... Aborted 13, Permissive 17). ``packml`` is PackML's
(ISA-TR88.00.02) CntrlCmd and StateCurrent. Names are upper case; a number of no name is the PLC's
own business and is shown as the number.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Numbering:
    """One numbering: command name -> the number written, state number -> its name."""

    name: str
    commands: dict[str, int]
    states: dict[int, str]

    def state_name(self, number: int) -> str:
        """The state's name, or the number as text when the numbering has none for it."""
        return self.states.get(number, str(number))


PLI: Final = Numbering(
    name="pli",
    commands={"START": 1, "PAUSE": 2, "RESUME": 3, "HOLD": 4, "RESTART": 5, "STOP": 6, "RESET": 7, "ABORT": 8},
    states={1: "IDLE", 2: "RUNNING", 3: "COMPLETE", 4: "RESTARTING", 5: "RESETTING", 6: "PAUSING", 7: "PAUSED",
            8: "HOLDING", 9: "HELD", 10: "STOPPING", 11: "STOPPED", 12: "ABORTING", 13: "ABORTED",
            17: "PERMISSIVE"},
)
PACKML: Final = Numbering(
    name="packml",
    commands={"RESET": 1, "START": 2, "STOP": 3, "HOLD": 4, "UNHOLD": 5, "SUSPEND": 6, "UNSUSPEND": 7,
              "ABORT": 8, "CLEAR": 9, "COMPLETE": 10},
    states={1: "CLEARING", 2: "STOPPED", 3: "STARTING", 4: "IDLE", 5: "SUSPENDED", 6: "EXECUTE", 7: "STOPPING",
            8: "ABORTING", 9: "ABORTED", 10: "HOLDING", 11: "HELD", 12: "UNHOLDING", 13: "SUSPENDING",
            14: "UNSUSPENDING", 15: "RESETTING", 16: "COMPLETING", 17: "COMPLETE"},
)
NUMBERINGS: Final = {PLI.name: PLI, PACKML.name: PACKML}
