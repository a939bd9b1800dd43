"""Operator commands and the ISA-88 policy that decides which ones a workflow accepts in a state.

ABORT and STOP are accepted in any state, HOLD in STARTING/RUNNING/RESUMING, RESUME in HELD, RESET
in STOPPED/ABORTED/ERROR. When several acceptable commands are waiting, the highest priority wins:
ABORT > STOP > HOLD > RESUME > RESET (an abort is the harder stop: it wins when both wait). Names
are normalised (case, surrounding blanks).

The operator's order is kept: commands sent after the chosen one are not judged in the state the
run had before it (a RESUME sent after a HOLD would always lose there); they stay in the mailbox for
the next receive, in the state the workflow reports after acting on the chosen command.

A message of the command topic is parsed once into a :class:`Command`; :func:`judge_commands` is the
one place that turns what a receive read into its ``command``/``command_dropped`` events and the
messages' outcomes (``recvCommand``, a step held for an operator, a prompt ended by STOP or ABORT).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from exchange._store import MESSAGE_CONSUMED, MESSAGE_DROPPED, MessageRecord, NewEvent, codec
from exchange._timefmt import iso_utc
from exchange.errors import AbortRequested, StopRequested, UnknownCommand

CommandName = Literal["ABORT", "STOP", "HOLD", "RESUME", "RESET"]
COMMANDS: tuple[CommandName, ...] = get_args(CommandName)  # highest priority first
_ANY = frozenset({"*"})
ALLOWED_IN: dict[CommandName, frozenset[str]] = {
    "ABORT": _ANY,
    "STOP": _ANY,
    "HOLD": frozenset({"STARTING", "RUNNING", "RESUMING"}),
    "RESUME": frozenset({"HELD"}),
    "RESET": frozenset({"STOPPED", "ABORTED", "ERROR"}),  # ISA-88: Reset leaves Stopped and Aborted
}
COMMAND_TOPIC = "cmd"
_BY_NAME: dict[str, CommandName] = {name: name for name in COMMANDS}


def normalise_command(name: object) -> CommandName:
    """The canonical command name, or UnknownCommand."""
    known = _BY_NAME.get(name.strip().upper()) if isinstance(name, str) else None
    if known is None:
        raise UnknownCommand(name, COMMANDS)
    return known


def normalise_state(state: object) -> str:
    if not isinstance(state, str) or not state.strip():
        raise ValueError(f"currentState must be a non-empty string, got {state!r}")
    return state.strip().upper()


def allowed(command: CommandName, state: str) -> bool:
    states = ALLOWED_IN[command]
    return states is _ANY or state in states


# The state a workflow following the ISA-88 pattern reports after acting on a command (RESET: the
# workflow decides). Used to foresee how a command sent behind others will be judged.
REPORTED_AFTER: dict[CommandName, str | None] = {"ABORT": "ABORTED", "STOP": "STOPPED", "HOLD": "HELD",
                                                 "RESUME": "RUNNING", "RESET": None}
# The commands that end a wait outside ``recvCommand`` (accepted in every state), hardest first.
ENDING_WAITS: tuple[CommandName, ...] = ("ABORT", "STOP")


@dataclass(frozen=True)
class Command:
    """A message of the command topic, parsed once (:meth:`parse`).

    Its payload is ``{"cmd", "reason", "actor", "args"}`` as ``sendCommand`` writes it, or a bare
    command name; a key the payload lacks falls back to the message's own (``reason``, ``actor``).
    Anything else posted to the topic (``send`` takes any JSON) is a command too, malformed:
    :attr:`name` is None and it is dropped, with :attr:`problem`, by the receive that reads it.
    ``reason``, ``actor`` and ``args`` are what the payload holds (strings or None from
    ``sendCommand``; anything JSON from ``send``), passed on unchanged to the events and the answer.
    """

    message_id: int
    name: CommandName | None  # None: ``raw`` names no command
    raw: Any  # the payload's ``cmd`` as sent (the whole payload when it is no object)
    reason: Any
    actor: Any
    sent_at: float  # store clock
    args: Any = None

    @classmethod
    def parse(cls, message: MessageRecord) -> Command:
        return cls.from_payload(message.id, codec.loads(message.payload), actor=message.actor,
                                reason=message.reason, sent_at=message.sent_at)

    @classmethod
    def from_payload(cls, message_id: int, payload: Any, *, actor: str | None = None, reason: str | None = None,
                     sent_at: float = 0.0) -> Command:
        """The command a message's decoded ``payload`` carries; ``actor`` and ``reason`` are the
        message's, used when the payload has no key of that name."""
        body = payload if isinstance(payload, dict) else {"cmd": payload}
        raw = body.get("cmd")
        name = _BY_NAME.get(raw.strip().upper()) if isinstance(raw, str) else None
        return cls(message_id, name, raw, body.get("reason", reason), body.get("actor", actor), sent_at,
                   body.get("args"))

    @property
    def shown(self) -> Any:
        """The command as events and views show it: its name, or what was sent when it names none."""
        return self.raw if self.name is None else self.name

    @property
    def problem(self) -> str | None:
        """Why this is no command (the UnknownCommand message), or None."""
        return None if self.name is not None else str(UnknownCommand(self.raw, COMMANDS))

    def received(self) -> dict[str, Any]:
        """What ``recvCommand`` gives the workflow (and records) for this command."""
        return {"id": self.message_id, "cmd": self.name, "reason": self.reason, "actor": self.actor,
                "sent_at": iso_utc(self.sent_at), "args": self.args}


@dataclass(frozen=True)
class Verdict:
    """What a receive makes of the commands it took (oldest first)."""

    chosen: Command | None
    dropped: list[tuple[Command, str]]  # (command, why)
    kept: list[Command]  # sent after the chosen one: left in the mailbox for the next receive


def choose(found: Sequence[Command], state: str) -> Verdict:
    """Pick the highest-priority command allowed in ``state`` (the oldest among equals).

    Commands before it that lose are dropped with why (not accepted in ``state``, or superseded);
    commands after it are kept for the next receive, except messages that are no command at all,
    which are dropped wherever they are."""
    candidates = [(COMMANDS.index(c.name), i) for i, c in enumerate(found)
                  if c.name is not None and allowed(c.name, state)]
    if not candidates:
        return Verdict(None, [(c, c.problem or f"{c.name} is not accepted in state {state}") for c in found], [])
    _, at = min(candidates)
    chosen = found[at]
    dropped: list[tuple[Command, str]] = []
    kept: list[Command] = []
    for i, command in enumerate(found):
        if i == at:
            continue
        if command.name is None:
            dropped.append((command, command.problem or ""))
        elif i > at:
            kept.append(command)
        elif allowed(command.name, state):
            dropped.append((command, f"superseded by {chosen.name} received in the same poll"))
        else:
            dropped.append((command, f"{command.name} is not accepted in state {state}"))
    return Verdict(chosen, dropped, kept)


@dataclass(frozen=True)
class JudgedCommands:
    """What a receive of commands does with the messages it read: the command it takes, the messages
    it consumes (the chosen one and those dropped before it, each with its outcome) and the events
    that say so, committed together with the receive's record."""

    chosen: Command | None
    taken: list[MessageRecord]
    events: list[NewEvent]
    outcomes: dict[int, tuple[str, str | None]]


def judge_commands(
    found: list[MessageRecord], state: str, *, refused: Callable[[Command], str | None] | None = None,
    about: Mapping[str, Any] | None = None,
) -> JudgedCommands:
    """Judge the command messages ``found`` (oldest first) in ``state`` (see :func:`choose`): a
    ``command_dropped`` event (with why) for each one dropped, a ``command`` event for the chosen
    one (its payload with ``about`` added), and the messages sent after it left in the mailbox.
    ``refused`` drops a command before the policy judges the rest (why, or None to judge it); its
    drops come first among the events."""
    parsed = [Command.parse(m) for m in found]
    early: list[tuple[Command, str]] = []
    if refused is not None:
        for command in parsed:
            why = refused(command)
            if why is not None:
                early.append((command, why))
        early_ids = {c.message_id for c, _ in early}
        parsed = [c for c in parsed if c.message_id not in early_ids]
    verdict = choose(parsed, state)
    dropped = early + verdict.dropped
    # A command refused before the policy is shown as it was sent; one the policy dropped by its name.
    events = [NewEvent("command_dropped", {"cmd": c.raw if i < len(early) else c.shown, "message_id": c.message_id,
                                           "state": state}, c.actor, why)
              for i, (c, why) in enumerate(dropped)]
    outcomes: dict[int, tuple[str, str | None]] = {c.message_id: (MESSAGE_DROPPED, why) for c, why in dropped}
    chosen = verdict.chosen
    if chosen is not None:
        events.append(NewEvent("command", {"cmd": chosen.name, "message_id": chosen.message_id, "state": state,
                                           **(about or {})}, chosen.actor, chosen.reason))
        outcomes[chosen.message_id] = (MESSAGE_CONSUMED, f"accepted in state {state}")
    kept = {c.message_id for c in verdict.kept}  # sent after the chosen one: judged by the next receive
    return JudgedCommands(chosen, [m for m in found if m.id not in kept], events, outcomes)


def foreseen_problem(command: CommandName, state: str | None, waiting_before: Sequence[str]) -> str | None:
    """Why a run in ``state`` will drop ``command`` sent behind the commands ``waiting_before``
    (oldest first), assuming the workflow reports :data:`REPORTED_AFTER` after each command it
    takes; None when it will accept it or nobody can tell (no state reported yet, a RESET ahead)."""
    for earlier in waiting_before:
        if state is None:
            return None
        try:
            name = normalise_command(earlier)
        except UnknownCommand:
            continue  # dropped when read; changes nothing
        if allowed(name, state):
            state = REPORTED_AFTER[name]
    if state is None or allowed(command, state):
        return None
    if waiting_before:
        return (f"{command} is not accepted in state {state} (the state the run is expected to report after "
                f"the {len(waiting_before)} command(s) waiting before it)")
    return f"{command} is not accepted in state {state}"


def stop_or_abort_among(found: Iterable[Command]) -> CommandName | None:
    """The hardest of STOP and ABORT among these commands (ABORT when both are), or None. Both are
    accepted in every state, so a wait outside ``recvCommand`` (a prompt, a device wait) may end
    for either."""
    names = {command.name for command in found}
    return next((name for name in ENDING_WAITS if name in names), None)


def stop_error(command: Mapping[str, Any]) -> StopRequested:
    """The error that brings a received STOP or ABORT (``Command.received()``, or a recorded copy)
    into the workflow body: AbortRequested for an ABORT (a StopRequested too), else StopRequested."""
    received = dict(command)
    return AbortRequested(received) if received.get("cmd") == "ABORT" else StopRequested(received)
