"""The PLC program of one phase, as docs/phases-plc.md tells a plant engineer to write it.

A second PLC, independent of Exchange's simulator (``simulators/``): written from the docs page, with
its own numbers (not ``exchange._phase_numbering``), so a wrong number on either side shows. The
class is pure: no sockets, no threads of its own. A server (``opcua_phase``, ``modbus_phase``) hands
it every client write (:meth:`PhaseLogic.written`), calls :meth:`PhaseLogic.step` every few ms
with the time, and publishes :meth:`PhaseLogic.values`; a test reads the plain attributes and acts
as the PLC by itself (:meth:`hold`, :meth:`stop`, :meth:`abort`, :meth:`set_permissive`,
:meth:`set_owner`). Every public method takes the instance's lock: the server's loop thread and the
test's thread share it.

The values a server publishes are keyed ``command``, ``state``, ``owner``, ``heartbeat``,
``param:NAME`` and ``report:NAME``.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

# PLI (numbering = "pli"): Start 1, Pause 2, Resume 3, Hold 4, Restart 5, Stop 6, Reset 7, Abort 8
PLI_COMMANDS = {1: "START", 2: "PAUSE", 3: "RESUME", 4: "HOLD", 5: "RESTART", 6: "STOP", 7: "RESET", 8: "ABORT"}
PLI_STATES = {1: "IDLE", 2: "RUNNING", 3: "COMPLETE", 4: "RESTARTING", 5: "RESETTING", 6: "PAUSING", 7: "PAUSED",
              8: "HOLDING", 9: "HELD", 10: "STOPPING", 11: "STOPPED", 12: "ABORTING", 13: "ABORTED",
              17: "PERMISSIVE"}
# PackML (numbering = "packml"): CntrlCmd and StateCurrent
PACKML_COMMANDS = {1: "RESET", 2: "START", 3: "STOP", 4: "HOLD", 5: "UNHOLD", 6: "SUSPEND", 7: "UNSUSPEND",
                   8: "ABORT", 9: "CLEAR", 10: "COMPLETE"}
PACKML_STATES = {1: "CLEARING", 2: "STOPPED", 3: "STARTING", 4: "IDLE", 5: "SUSPENDED", 6: "EXECUTE",
                 7: "STOPPING", 8: "ABORTING", 9: "ABORTED", 10: "HOLDING", 11: "HELD", 12: "UNHOLDING",
                 13: "SUSPENDING", 14: "UNSUSPENDING", 15: "RESETTING", 16: "COMPLETING", 17: "COMPLETE"}

# A report's value: a number, or a function of the parameters the phase started with.
Report = float | Callable[[Mapping[str, float]], float]
# What a command does in a state: (transient state or None, the state it ends in).
Move = tuple[str | None, str]


class PhaseLogic:
    """The phase's state machine; :class:`PliPhase` and :class:`PackmlPhase` give the numbers and
    the table of which command each state accepts."""

    numbering: ClassVar[str]
    COMMANDS: ClassVar[dict[int, str]]
    STATES: ClassVar[dict[int, str]]
    ACCEPTS: ClassVar[dict[str, dict[str, Move]]]  # state -> command -> move
    IDLE: ClassVar[str] = "IDLE"
    RUN: ClassVar[str]  # the state the phase does its work in
    START: ClassVar[Move]  # Start from Idle
    DONE: ClassVar[Move]  # the work done
    RESUME: ClassVar[str]  # the command that ends a hold
    NOT_READY: ClassVar[str | None] = None  # the state shown while the permissive is missing

    def __init__(self, name: str = "R1/Charge", *, params: Sequence[str] = ("target_l",),
                 reports: Mapping[str, Report] | None = None, duration_s: float = 0.3,
                 transition_ms: int = 20, watchdog_period_ms: int | None = None, watchdog_periods: int = 3,
                 release_owner_at_idle: bool = True) -> None:
        self.name = name
        self.param_names = tuple(params)
        # by default the phase charges what it was asked to: actual_l = target_l
        self.report_sources: dict[str, Report] = dict(
            reports if reports is not None else {"actual_l": lambda started: started.get("target_l", 0.0)})
        self._settings = (duration_s, transition_ms, watchdog_period_ms, watchdog_periods, release_owner_at_idle)
        self._lock = threading.RLock()
        self._numbers = {name: number for number, name in self.STATES.items()}
        self.reset_all()

    def reset_all(self) -> None:
        """Back to a PLC just powered on: Idle, every tag 0, the counters empty, permissive given,
        the settings (``duration_s``, ``transition_ms``, the watchdog's) as constructed."""
        with self._lock:
            (self.duration_s, self.transition_ms, self.watchdog_period_ms, self.watchdog_periods,
             self.release_owner_at_idle) = self._settings
            self.command = 0
            self.state_name = self.IDLE
            self.owner = 0
            self.heartbeat = 0
            self.params: dict[str, float] = dict.fromkeys(self.param_names, 0.0)
            self.reports: dict[str, float] = dict.fromkeys(self.report_sources, 0.0)
            self.received: Counter[str] = Counter()  # every non-zero command written, by name
            self.acted: Counter[str] = Counter()  # the commands the state accepted
            self.ignored: list[tuple[str, str]] = []  # (command, the state that did not accept it)
            self.states_seen: list[str] = [self.IDLE]
            self.owner_at_start: int | None = None
            self.params_at_start: dict[str, float] | None = None
            self.plc_actions: Counter[str] = Counter()  # hold/stop/abort the PLC did by itself
            self.watchdog_holds = 0
            self.permissive = True
            self._pending: list[int] = []
            self._ends_at: float | None = None  # when the transient state ends
            self._after: str | None = None  # the state it ends in
            self._worked_s = 0.0  # time spent in RUN, which Hold does not count
            self._now: float | None = None
            self._last_beat: int | None = None
            self._beat_at = 0.0
            self._beats = 0
            self._resetting = False

    # --- what a server calls ---------------------------------------------------------------

    def written(self, key: str, value: float) -> None:
        """A client wrote ``value`` to the tag ``key``. A command is queued for the next scan, every
        write of it (the same number twice included)."""
        with self._lock:
            if key == "command":
                self.command = int(value)
                if self.command != 0:
                    self._pending.append(self.command)
            elif key == "owner":
                self.owner = int(value)
            elif key == "heartbeat":
                self.heartbeat = int(value)
            elif key.startswith("param:") and key[6:] in self.params:
                self.params[key[6:]] = float(value)
            # state and reports are the PLC's: a client's write of them is overwritten

    def values(self) -> dict[str, float]:
        """Every tag's value as the PLC holds it now."""
        with self._lock:
            found: dict[str, float] = {"command": self.command, "state": self.state, "owner": self.owner,
                                       "heartbeat": self.heartbeat}
            found.update({f"param:{k}": v for k, v in self.params.items()})
            found.update({f"report:{k}": v for k, v in self.reports.items()})
            return found

    def step(self, now_s: float) -> None:
        """One PLC scan at ``now_s`` (monotonic seconds): the commands written since the last scan,
        in order (acknowledged by setting the command back to 0, taken or not), then
        the watchdog, the transient state's timer and the work."""
        with self._lock:
            elapsed = 0.0 if self._now is None else max(0.0, now_s - self._now)
            self._now = now_s
            if self.state_name == self.RUN:
                self._worked_s += elapsed
            for number in self._pending:
                self._command(number)
            if self._pending:
                self._pending.clear()
                self.command = 0
            self._watch(now_s)
            if self._ends_at is not None and now_s >= self._ends_at and self._after is not None:
                self._enter(self._after)
            if self.state_name == self.RUN and self._worked_s >= self.duration_s:
                self.reports = {name: float(source(self.params_at_start or {}) if callable(source) else source)
                                for name, source in self.report_sources.items()}
                self._move(self.DONE)
            self._permit()

    # --- the PLC acting by itself (a test's hands) -----------------------------------------

    def hold(self) -> bool:
        """The PLC holds the phase by itself (an interlock); False when its state takes no Hold."""
        return self._by_plc("HOLD")

    def stop(self) -> bool:
        return self._by_plc("STOP")

    def abort(self) -> bool:
        return self._by_plc("ABORT")

    def set_permissive(self, given: bool) -> None:
        """A missing permissive keeps the phase from being ready: PLI shows Permissive (17) instead
        of Idle until it is given; PackML stays Idle and takes no Start."""
        with self._lock:
            self.permissive = given
            self._permit()

    def set_owner(self, owner_id: int) -> None:
        """The PLC (or another batch system) writes its own id into the owner tag."""
        with self._lock:
            self.owner = owner_id

    # --- reading ---------------------------------------------------------------------------

    @property
    def state(self) -> int:
        return self._numbers[self.state_name]

    @property
    def starts(self) -> int:
        """How many Start commands were written (taken or not): one per phase.run call."""
        return self.received["START"]

    def command_number(self, name: str) -> int:
        return next(number for number, command in self.COMMANDS.items() if command == name)

    # --- inside ----------------------------------------------------------------------------

    def _command(self, number: int) -> None:
        name = self.COMMANDS.get(number, str(number))
        self.received[name] += 1
        move = self.ACCEPTS.get(self.state_name, {}).get(name)
        if move is not None and name in ("START", self.RESUME) and self._stale():
            move = None  # no supervisor: nothing starts or restarts
        if move is not None and name == "START" and not self.permissive:
            move = None
        if move is None:
            self.ignored.append((name, self.state_name))
            return
        self.acted[name] += 1
        self._resetting = name == "RESET"
        if name == "START":
            self.owner_at_start = self.owner
            self.params_at_start = dict(self.params)
            self._worked_s = 0.0
            self.reports = dict.fromkeys(self.report_sources, 0.0)
        self._move(move)

    def _by_plc(self, name: str) -> bool:
        with self._lock:
            move = self.ACCEPTS.get(self.state_name, {}).get(name)
            if move is None:
                return False
            self.plc_actions[name] += 1
            self._move(move)
            return True

    def _move(self, move: Move) -> None:
        transient, final = move
        if transient is None or self.transition_ms <= 0 or self._now is None:
            self._enter(final)
        else:
            self._enter(transient)
            self._ends_at, self._after = self._now + self.transition_ms / 1000, final

    def _enter(self, state: str) -> None:
        self._ends_at = self._after = None
        self.state_name = state
        self.states_seen.append(state)
        if state == self.IDLE and self._resetting:
            self._resetting = False
            if self.release_owner_at_idle:
                self.owner = 0  # the phase is free again after its Reset

    def _permit(self) -> None:
        if self.NOT_READY is None:
            return
        if self.state_name == self.IDLE and not self.permissive:
            self._enter(self.NOT_READY)
        elif self.state_name == self.NOT_READY and self.permissive:
            self._enter(self.IDLE)

    @property
    def heartbeat_stale(self) -> bool:
        """The watchdog's verdict: beats were seen, and none for ``watchdog_periods`` periods."""
        with self._lock:
            return self._stale()

    def _stale(self) -> bool:
        if self.watchdog_period_ms is None or self._beats == 0 or self._now is None:
            return False
        return self._now - self._beat_at > self.watchdog_period_ms * self.watchdog_periods / 1000

    def _watch(self, now_s: float) -> None:
        if self._last_beat is None:
            self._last_beat = self.heartbeat  # a value left from before is not a beat
        elif self.heartbeat != self._last_beat:
            self._last_beat, self._beat_at = self.heartbeat, now_s
            self._beats += 1
        if self._stale() and "HOLD" in self.ACCEPTS.get(self.state_name, {}):
            self.watchdog_holds += 1
            self._move(self.ACCEPTS[self.state_name]["HOLD"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, state={self.state_name}, owner={self.owner})"


_HOLD: Move = ("HOLDING", "HELD")
_STOP: Move = ("STOPPING", "STOPPED")
_ABORT: Move = ("ABORTING", "ABORTED")
_RESET: Move = ("RESETTING", "IDLE")


class PliPhase(PhaseLogic):
    """ISA-88 phase states as a Phase Logic Interface numbers them (``numbering = "pli"``)."""

    numbering = "pli"
    COMMANDS = PLI_COMMANDS
    STATES = PLI_STATES
    RUN = "RUNNING"
    START = (None, "RUNNING")
    DONE = (None, "COMPLETE")
    RESUME = "RESTART"
    NOT_READY = "PERMISSIVE"
    ACCEPTS = {
        "IDLE": {"START": START},
        "RUNNING": {"HOLD": _HOLD, "STOP": _STOP, "ABORT": _ABORT},
        "HOLDING": {"STOP": _STOP, "ABORT": _ABORT},
        "HELD": {"RESTART": ("RESTARTING", "RUNNING"), "STOP": _STOP, "ABORT": _ABORT},
        "RESTARTING": {"HOLD": _HOLD, "STOP": _STOP, "ABORT": _ABORT},
        "STOPPING": {"ABORT": _ABORT},
        "COMPLETE": {"RESET": _RESET},
        "STOPPED": {"RESET": _RESET},
        "ABORTED": {"RESET": _RESET},
    }


class PackmlPhase(PhaseLogic):
    """PackML's state model (``numbering = "packml"``): Aborted needs Clear (to Stopped) before Reset."""

    numbering = "packml"
    COMMANDS = PACKML_COMMANDS
    STATES = PACKML_STATES
    RUN = "EXECUTE"
    START = ("STARTING", "EXECUTE")
    DONE = ("COMPLETING", "COMPLETE")
    RESUME = "UNHOLD"
    _PS: ClassVar[dict[str, Move]] = {"STOP": _STOP, "ABORT": _ABORT}
    ACCEPTS = {
        "IDLE": {"START": START, **_PS},
        "STARTING": dict(_PS),
        "EXECUTE": {"HOLD": _HOLD, "SUSPEND": ("SUSPENDING", "SUSPENDED"), **_PS},
        "HOLDING": dict(_PS),
        "HELD": {"UNHOLD": ("UNHOLDING", "EXECUTE"), **_PS},
        "UNHOLDING": {"HOLD": _HOLD, **_PS},
        "SUSPENDING": dict(_PS),
        "SUSPENDED": {"UNSUSPEND": ("UNSUSPENDING", "EXECUTE"), "HOLD": _HOLD, **_PS},
        "UNSUSPENDING": dict(_PS),
        "COMPLETING": dict(_PS),
        "COMPLETE": {"RESET": _RESET, **_PS},
        "RESETTING": dict(_PS),
        "STOPPING": {"ABORT": _ABORT},
        "STOPPED": {"RESET": _RESET, "ABORT": _ABORT},
        "ABORTED": {"CLEAR": ("CLEARING", "STOPPED")},
        "CLEARING": {"ABORT": _ABORT},
    }
