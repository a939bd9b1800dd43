"""Operator commands and the ISA-88 policy that decides which ones a workflow accepts in a state.

STOP is accepted in any state, HOLD in STARTING/RUNNING/RESUMING, RESUME in HELD, RESET in
STOPPED/ERROR. When several acceptable commands are waiting, the highest priority wins:
STOP > HOLD > RESUME > RESET. Names are normalised (case, surrounding blanks).
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


@dataclass(frozen=True)
class Verdict:
    """What recvCommand makes of the messages it drained."""

    chosen: dict[str, Any] | None
    dropped: list[tuple[dict[str, Any], str]]  # (message, why)


def choose(messages: list[dict[str, Any]], state: str) -> Verdict:
    """Pick the highest-priority command allowed in ``state``; every other message is dropped with why."""
    candidates: list[dict[str, Any]] = []
    dropped: list[tuple[dict[str, Any], str]] = []
    for message in messages:
        try:
            name = normalise_command(message.get("cmd"))
        except UnknownCommand as exc:
            dropped.append((message, str(exc)))
            continue
        message = dict(message, cmd=name)
        if allowed(name, state):
            candidates.append(message)
        else:
            dropped.append((message, f"{name} is not accepted in state {state}"))
    if not candidates:
        return Verdict(None, dropped)
    candidates.sort(key=lambda m: COMMANDS.index(m["cmd"]))  # stable: oldest first within one name
    chosen, rest = candidates[0], candidates[1:]
    dropped.extend((m, f"superseded by {chosen['cmd']} received in the same poll") for m in rest)
    return Verdict(chosen, dropped)


def stop_waiting(payloads: list[Any]) -> bool:
    """Is a STOP among these mailbox payloads (``{"cmd": ...}`` or a bare name)? A STOP is accepted
    in every state, so a wait outside ``recvCommand`` (a device wait) may end for it."""
    for body in payloads:
        cmd = body.get("cmd") if isinstance(body, dict) else body
        if isinstance(cmd, str) and cmd.strip().upper() == "STOP":
            return True
    return False
