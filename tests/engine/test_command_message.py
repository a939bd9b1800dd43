"""A message of the command topic parsed once into a :class:`Command`: what a well-formed one carries,
and how a malformed one (anything ``send`` may post to the topic) is dropped when received."""

from __future__ import annotations

from exchange._engine.model import commands
from exchange._engine.model.commands import Command
from exchange._store import codec
from exchange._store.records import MESSAGE_CONSUMED, MESSAGE_DROPPED, MessageRecord, NewEvent


def message(message_id: int, payload: object, *, actor: str | None = "sender", reason: str | None = None,
            sent_at: float = 1_700_000_000.0) -> MessageRecord:
    return MessageRecord(message_id, "run-1", commands.COMMAND_TOPIC, codec.dumps(payload), actor, reason, sent_at)


def test_a_command_sent_by_send_command_is_read_from_its_payload() -> None:
    command = Command.parse(message(7, {"cmd": " hold ", "reason": "break", "actor": "op1", "args": {"n": 1}}))
    assert (command.message_id, command.name, command.raw) == (7, "HOLD", " hold ")
    assert (command.reason, command.actor, command.args, command.problem) == ("break", "op1", {"n": 1}, None)
    assert command.received() == {"id": 7, "cmd": "HOLD", "reason": "break", "actor": "op1",
                                  "sent_at": "2023-11-14T22:13:20.000+00:00", "args": {"n": 1}}


def test_a_bare_name_is_a_command_and_the_message_gives_what_the_payload_lacks() -> None:
    command = Command.parse(message(1, "stop", actor="op2", reason="why"))
    assert (command.name, command.actor, command.reason, command.args) == ("STOP", "op2", "why", None)
    assert commands.stop_or_abort_among([command]) == "STOP"


def test_a_wait_outside_recv_command_ends_for_the_harder_of_stop_and_abort() -> None:
    stop, abort, hold = (Command.parse(message(i, name)) for i, name in enumerate(("STOP", "abort", "HOLD"), 1))
    assert abort.name == "ABORT"
    assert commands.stop_or_abort_among([hold, abort]) == "ABORT"
    assert commands.stop_or_abort_among([stop, abort]) == "ABORT"
    assert commands.stop_or_abort_among([abort, stop]) == "ABORT"
    assert commands.stop_or_abort_among([hold]) is None
    assert commands.stop_or_abort_among([]) is None


def test_a_malformed_command_names_nothing_and_is_dropped_with_why_as_sent() -> None:
    for payload, raw in [({"cmd": "dance"}, "dance"), ({"reason": "no cmd"}, None), (5, 5), ([1, 2], [1, 2]),
                         ({"cmd": {"x": 1}}, {"x": 1})]:
        command = Command.parse(message(3, payload))
        assert command.name is None and command.raw == raw and command.shown == raw
        assert command.problem == f"unknown command {raw!r} (known: ABORT, STOP, HOLD, RESUME, RESET)"
        assert commands.stop_or_abort_among([command]) is None
    found = [message(1, {"cmd": "dance"}, actor="op"), message(2, {"cmd": "HOLD"}), message(3, {"cmd": "jump"})]
    judged = commands.judge_commands(found, "RUNNING")
    assert judged.chosen is not None and judged.chosen.message_id == 2
    assert [m.id for m in judged.taken] == [1, 2, 3]  # no command at all: dropped wherever it is
    assert judged.events[0] == NewEvent("command_dropped", {"cmd": "dance", "message_id": 1, "state": "RUNNING"},
                                        "op", "unknown command 'dance' (known: ABORT, STOP, HOLD, RESUME, RESET)")
    assert judged.events[-1] == NewEvent("command", {"cmd": "HOLD", "message_id": 2, "state": "RUNNING"},
                                         "sender", None)
    assert judged.outcomes[2] == (MESSAGE_CONSUMED, "accepted in state RUNNING")
    assert judged.outcomes[3][0] == MESSAGE_DROPPED
