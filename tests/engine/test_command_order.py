"""The operator's order: what one receive does with several commands, and how a command sent behind
others is foreseen to be judged (``exchange send`` warns with it)."""

from __future__ import annotations

from typing import Any

from exchange._engine.model import commands
from exchange.errors import AbortRequested, StopRequested


def cmds(*names: str) -> list[commands.Command]:
    return [commands.Command.from_payload(i, {"cmd": name}) for i, name in enumerate(names, 1)]


def summary(verdict: commands.Verdict) -> tuple[Any, list[tuple[Any, str]], list[Any]]:
    chosen = None if verdict.chosen is None else verdict.chosen.message_id
    return chosen, [(c.message_id, why) for c, why in verdict.dropped], [c.message_id for c in verdict.kept]


def test_commands_sent_after_the_chosen_one_wait_for_the_next_receive() -> None:
    assert summary(commands.choose(cmds("HOLD", "resume"), "RUNNING")) == (1, [], [2])
    assert summary(commands.choose(cmds("HOLD", "HOLD", "RESUME"), "RUNNING")) == (1, [], [2, 3])
    assert summary(commands.choose(cmds("STOP", "HOLD"), "RUNNING")) == (1, [], [2])


def test_commands_sent_before_the_chosen_one_are_dropped_with_why() -> None:
    assert summary(commands.choose(cmds("RESUME", "HOLD"), "RUNNING")) == (
        2, [(1, "RESUME is not accepted in state RUNNING")], [])
    assert summary(commands.choose(cmds("HOLD", "STOP", "RESUME"), "RUNNING")) == (
        2, [(1, "superseded by STOP received in the same poll")], [3])


def test_abort_is_accepted_in_every_state_and_wins_over_stop() -> None:
    for state in ("STARTING", "RUNNING", "HELD", "STOPPED", "ABORTED", "ERROR", "FILLING"):
        assert commands.allowed("ABORT", state) and commands.allowed("STOP", state)
        assert summary(commands.choose(cmds("STOP", "ABORT"), state)) == (
            2, [(1, "superseded by ABORT received in the same poll")], [])
        assert summary(commands.choose(cmds("ABORT", "STOP"), state)) == (1, [], [2])
    assert summary(commands.choose(cmds("HOLD", "ABORT", "RESUME"), "RUNNING")) == (
        2, [(1, "superseded by ABORT received in the same poll")], [3])
    assert commands.normalise_command(" abort ") == "ABORT"


def test_reset_leaves_aborted_as_it_leaves_stopped() -> None:
    assert commands.allowed("RESET", "ABORTED")
    assert commands.foreseen_problem("RESET", "RUNNING", ["ABORT"]) is None
    assert commands.foreseen_problem("HOLD", "RUNNING", ["ABORT"]) == (
        "HOLD is not accepted in state ABORTED (the state the run is expected to report after the 1 command(s) "
        "waiting before it)")
    assert commands.foreseen_problem("ABORT", "STOPPED", ["STOP"]) is None


def test_a_received_stop_or_abort_becomes_its_error() -> None:
    stop = commands.stop_error({"cmd": "STOP", "actor": "ben", "reason": "end of shift"})
    abort = commands.stop_error({"cmd": "ABORT", "actor": "anna", "reason": "leak"})
    assert type(stop) is StopRequested and str(stop) == "STOP from ben: end of shift"
    assert type(abort) is AbortRequested and isinstance(abort, StopRequested)
    assert str(abort) == "ABORT from anna: leak" and abort.command["cmd"] == "ABORT"
    assert str(commands.stop_error({"cmd": "ABORT"})) == "ABORT"


def test_nothing_acceptable_drops_everything_and_keeps_nothing() -> None:
    assert summary(commands.choose(cmds("HOLD", "RESET"), "HELD")) == (
        None, [(1, "HOLD is not accepted in state HELD"), (2, "RESET is not accepted in state HELD")], [])


def test_a_message_that_is_no_command_is_dropped_wherever_it_is() -> None:
    chosen, dropped, kept = summary(commands.choose(cmds("HOLD", "dance", "RESUME"), "RUNNING"))
    assert (chosen, kept) == (1, [3])
    assert [(i, why.split(" (")[0]) for i, why in dropped] == [(2, "unknown command 'dance'")]


def test_a_command_is_foreseen_in_the_state_the_waiting_commands_lead_to() -> None:
    assert commands.foreseen_problem("HOLD", "HELD", []) == "HOLD is not accepted in state HELD"
    assert commands.foreseen_problem("RESUME", "RUNNING", ["HOLD"]) is None
    assert commands.foreseen_problem("HOLD", "RUNNING", ["HOLD"]) == (
        "HOLD is not accepted in state HELD (the state the run is expected to report after the 1 command(s) "
        "waiting before it)")
    assert commands.foreseen_problem("HOLD", "RUNNING", ["RESUME"]) is None  # the RESUME is dropped first
    assert commands.foreseen_problem("RESUME", "RUNNING", ["HOLD", "jump"]) is None
    assert commands.foreseen_problem("HOLD", "RUNNING", ["STOP"]) is not None  # STOPPED accepts only ABORT, STOP, RESET
    assert commands.foreseen_problem("STOP", "FILLING", []) is None
    assert commands.foreseen_problem("HOLD", "FILLING", []) == "HOLD is not accepted in state FILLING"


def test_nothing_is_foreseen_without_a_reported_state() -> None:
    assert commands.foreseen_problem("RESUME", None, []) is None
    assert commands.foreseen_problem("HOLD", "STOPPED", ["RESET"]) is None  # what RESET leads to is the app's
