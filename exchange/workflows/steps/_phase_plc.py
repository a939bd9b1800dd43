"""The PLC's side of one phase as ``phase.run`` sees it: its tags, its numbering, its vocabulary.

:class:`PhasePlc` reads the state, command and owner tags in one request, writes command numbers and
parameters through the tag layer (so every write is checked before anything is sent, a lost link is
ridden out and a lost answer is never resent blindly), reads the reports, and follows the state tag
by subscription where the driver offers one (OPC UA) or by polling.

:class:`Vocabulary` says what the numbering's states mean to the handshake: which state is Idle,
which ones run, which ones are settled, which command resumes a held phase and how a phase left
Complete, Stopped or Aborted is brought back to Idle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exchange._config_phases import PhaseConfig
from exchange._phase_numbering import NUMBERINGS, Numbering
from exchange._tags.delivery import DeliveryListener, WaitHooks
from exchange._tags.service import TagService
from exchange._tags.table import TagDef, TagWrite
from exchange._tags.watch import Watch
from exchange._values import QualifiedValue
from exchange.errors import PhaseError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Vocabulary:
    """The states of one numbering as the handshake reads them (names as in
    :mod:`exchange._phase_numbering`)."""

    idle: str
    running: str
    resume: str  # the command that takes a held phase back to running
    settled: frozenset[str]  # states that stay until commanded; every other state is on its way
    # A state left over from an earlier batch -> the command that takes it toward Idle
    leftover: Mapping[str, str]

    def is_settled(self, state: str) -> bool:
        return state in self.settled


PLI_WORDS = Vocabulary(
    idle="IDLE", running="RUNNING", resume="RESTART",
    settled=frozenset({"IDLE", "RUNNING", "COMPLETE", "PAUSED", "HELD", "STOPPED", "ABORTED", "PERMISSIVE"}),
    leftover={"COMPLETE": "RESET", "STOPPED": "RESET", "ABORTED": "RESET"},
)
PACKML_WORDS = Vocabulary(
    idle="IDLE", running="EXECUTE", resume="UNHOLD",
    settled=frozenset({"IDLE", "EXECUTE", "COMPLETE", "SUSPENDED", "HELD", "STOPPED", "ABORTED"}),
    leftover={"COMPLETE": "RESET", "STOPPED": "RESET", "ABORTED": "CLEAR"},  # Clear: Aborted -> Stopped
)
VOCABULARIES = {"pli": PLI_WORDS, "packml": PACKML_WORDS}


@dataclass(frozen=True)
class Reading:
    """One look at the phase: its state (a name, or the number as text when it has none; None when
    the read failed) and the number its command tag holds (None when unread)."""

    state: str | None
    command: int | None
    owner: int | None
    problem: str | None = None  # why the state could not be read (the link is down, Bad quality)


class PhasePlc:
    """One configured phase's tags over a :class:`TagService` (see the module docstring)."""

    def __init__(self, phase: PhaseConfig, tags: TagService) -> None:
        self.phase = phase
        self.tags = tags
        self.numbering: Numbering = NUMBERINGS[phase.numbering]
        self.words = VOCABULARIES[phase.numbering]
        self.state_tag: TagDef = tags.tag(phase.state)
        self.command_tag: TagDef = tags.tag(phase.command)
        self.owner_tag: TagDef | None = tags.tag(phase.owner) if phase.owner else None
        self._looked = [self.state_tag, self.command_tag, *([self.owner_tag] if self.owner_tag else [])]

    @property
    def name(self) -> str:
        return self.phase.name

    def state_name(self, value: Any) -> str | None:
        number = _integer(value)
        return None if number is None else self.numbering.state_name(number)

    def look(self, *, explicit: bool = False) -> Reading:
        """The state, the command tag and the owner, read together (one request on one device)."""
        values = self.tags.read_tags(self._looked, explicit=explicit)
        state_value = values[0]
        owner = _integer(values[2].value) if self.owner_tag is not None and values[2].quality.is_good else None
        command = _integer(values[1].value) if values[1].quality.is_good else None
        if not state_value.quality.is_good:
            return Reading(None, command, owner, problem=_problem(state_value))
        name = self.state_name(state_value.value)
        if name is None:  # an untyped tag (OPC UA) whose node is no integer: the config cannot say so
            raise PhaseError(f"phase {self.name}: its state tag {self.state_tag.path} reads {state_value.value!r}, "
                             f"not a state number; the phase needs an integer state tag", self.name)
        return Reading(name, command, owner)

    def command_number(self, name: str) -> int:
        return self.numbering.commands[name]

    def plan_command(self, name: str) -> list[TagWrite]:
        """The write of command ``name``'s number, checked (nothing sent)."""
        return self.tags.prepare_write([self.command_tag.path], [self.command_number(name)])

    def send(self, name: str, listener: DeliveryListener, hooks: WaitHooks) -> None:
        """Write command ``name``'s number. A lost answer is never sent again here (WriteInDoubt):
        the handshake resolves it from the state the PLC reports."""
        self.tags.deliver(self.plan_command(name), listener=listener, hooks=hooks, resend_in_doubt=False)

    def plan_start_writes(self, params: Mapping[str, Any], owner_id: int | None) -> list[TagWrite]:
        """The parameter writes (and the owner's), checked against each tag before anything is sent."""
        paths = [self.phase.params[name] for name in params]
        values: list[Any] = list(params.values())
        if self.owner_tag is not None and owner_id is not None:
            paths.append(self.owner_tag.path)
            values.append(owner_id)
        return self.tags.prepare_write(paths, values) if paths else []

    def read_reports(self) -> tuple[dict[str, Any], str | None]:
        """The reports' values, and why one could not be read (None when all were read)."""
        names = list(self.phase.reports)
        if not names:
            return {}, None
        values = self.tags.read([self.phase.reports[name] for name in names], explicit=True)
        bad = [f"{name}: {_problem(value)}" for name, value in zip(names, values, strict=True)
               if not value.quality.is_good]
        return {name: value.value for name, value in zip(names, values, strict=True)}, "; ".join(bad) or None

    def read_values(self, paths: Sequence[str]) -> list[QualifiedValue]:
        return self.tags.read(list(paths), explicit=True)

    def subscribe(self, on_change: Callable[[], None], poll_s: float) -> Watch:
        """Call ``on_change`` (on another thread: it must only ring a bell) whenever the state tag
        changes: the driver's subscription (OPC UA), or the device's shared poller every ``poll_s``
        (one request for every phase followed on the device)."""
        return self.tags.watch(self.state_tag.path, lambda _value: on_change(), poll_s=poll_s)


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _problem(value: QualifiedValue) -> str:
    error = getattr(value, "error", None)
    return f"{value.quality.value}" + (f" ({error})" if error else "")
