"""Operator commands and the ISA-88 policy that decides which ones a workflow accepts in a state.

STOP is accepted in any state, HOLD in STARTING/RUNNING/RESUMING, RESUME in HELD, RESET in
STOPPED/ERROR. When several acceptable commands are waiting, the highest priority wins:
STOP > HOLD > RESUME > RESET. Names are normalised (case, surrounding blanks).

The operator's order is kept: commands sent after the chosen one are not judged in the state the
run had before it (a RESUME sent after a HOLD would always lose there); they stay in the mailbox for
the next receive, in the state the workflow reports after acting on the chosen command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exchange.errors import UnknownCommand

COMMANDS: tuple[str, ...] = ("STOP", "HOLD", "RESUME", "RESET")  # highest priority first
_ANY = frozenset({"*"})
ALLOWED_IN: dict[str, frozenset[str]] = {
    "STOP": _ANY,
    "HOLD": frozenset({"STARTING", "RUNNING", "RESUMING"}),
    "RESUME": frozenset({"HELD"}),
    "RESET": frozenset({"STOPPED", "ERROR"}),
}
COMMAND_TOPIC = "cmd"


def normalise_command(name: object) -> str:
    """The canonical command name, or UnknownCommand."""
    if not isinstance(name, str) or name.strip().upper() not in COMMANDS:
        raise UnknownCommand(name, COMMANDS)
    return name.strip().upper()


def normalise_state(state: object) -> str:
    if not isinstance(state, str) or not state.strip():
        raise ValueError(f"currentState must be a non-empty string, got {state!r}")
    return state.strip().upper()


def allowed(command: str, state: str) -> bool:
    states = ALLOWED_IN[command]
    return states is _ANY or state in states


# The state a workflow following the ISA-88 pattern reports after acting on a command (RESET: the
# workflow decides). Used to foresee how a command sent behind others will be judged.
REPORTED_AFTER: dict[str, str | None] = {"STOP": "STOPPED", "HOLD": "HELD", "RESUME": "RUNNING", "RESET": None}


@dataclass(frozen=True)
class Verdict:
    """What recvCommand makes of the messages it took (oldest first)."""

    chosen: dict[str, Any] | None
    dropped: list[tuple[dict[str, Any], str]]  # (message, why)
    kept: list[dict[str, Any]]  # sent after the chosen one: left in the mailbox for the next receive


def choose(messages: list[dict[str, Any]], state: str) -> Verdict:
    """Pick the highest-priority command allowed in ``state`` (the oldest among equals).

    Commands before it that lose are dropped with why (not accepted in ``state``, or superseded);
    commands after it are kept for the next receive, except messages that are no command at all,
    which are dropped wherever they are."""
    parsed: list[tuple[dict[str, Any], str | None]] = []
    for message in messages:
        try:
            parsed.append((dict(message, cmd=normalise_command(message.get("cmd"))), None))
        except UnknownCommand as exc:
            parsed.append((message, str(exc)))
    candidates = [(i, m) for i, (m, bad) in enumerate(parsed) if bad is None and allowed(m["cmd"], state)]
    if not candidates:
        return Verdict(None, [(m, bad or f"{m['cmd']} is not accepted in state {state}") for m, bad in parsed], [])
    at, chosen = min(candidates, key=lambda c: (COMMANDS.index(c[1]["cmd"]), c[0]))
    dropped: list[tuple[dict[str, Any], str]] = []
    kept: list[dict[str, Any]] = []
    for i, (message, bad) in enumerate(parsed):
        if i == at:
            continue
        if bad is not None:
            dropped.append((message, bad))
        elif i > at:
            kept.append(message)
        elif allowed(message["cmd"], state):
            dropped.append((message, f"superseded by {chosen['cmd']} received in the same poll"))
        else:
            dropped.append((message, f"{message['cmd']} is not accepted in state {state}"))
    return Verdict(chosen, dropped, kept)


def foreseen_problem(command: str, state: str | None, waiting_before: list[str]) -> str | None:
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


def stop_waiting(payloads: list[Any]) -> bool:
    """Is a STOP among these mailbox payloads (``{"cmd": ...}`` or a bare name)? A STOP is accepted
    in every state, so a wait outside ``recvCommand`` (a device wait) may end for it."""
    for body in payloads:
        cmd = body.get("cmd") if isinstance(body, dict) else body
        if isinstance(cmd, str) and cmd.strip().upper() == "STOP":
            return True
    return False
