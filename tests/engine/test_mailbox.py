"""Operator commands: the ISA-88 policy, priorities, dropped commands, wake-up, generic topics."""

from __future__ import annotations

import time
from typing import Any

import pytest

from exchange._engine.model import commands
from exchange.errors import UnknownCommand, WorkflowError
from exchange.workflows.bootstrap import getWorkflows, workflow
from tests.engine.conftest import Engine
from tests.waiting import wait_until


@workflow(name="mailbox.echo")
def echo(state: str = "RUNNING", max_messages: int = 8) -> Any:
    """Report ``state`` until a command allowed in it arrives; return that command."""
    rt = getWorkflows()
    while True:
        cmd = rt.recvCommand(currentState=state, timeoutSeconds=30, maxMessages=max_messages)
        if cmd is not None:
            return cmd


@workflow(name="mailbox.topic")
def topic_reader() -> Any:
    rt = getWorkflows()
    first = rt.recv("recipe", timeoutSeconds=30)
    return {"first": first, "cmd": rt.recvCommand("RUNNING", timeoutSeconds=30)}


def _wait_state(engine: Engine, run_id: str, state: str) -> None:
    wait_until(lambda: engine.runtime.get_run(run_id, steps=False, events=False)["state"] == state,
               message=f"state {state}")


def test_policy_accepts_commands_per_isa88_state() -> None:
    assert commands.allowed("STOP", "HELD") and commands.allowed("STOP", "ANYTHING")
    assert commands.allowed("HOLD", "RUNNING") and commands.allowed("HOLD", "STARTING")
    assert commands.allowed("HOLD", "RESUMING") and not commands.allowed("HOLD", "HELD")
    assert commands.allowed("RESUME", "HELD") and not commands.allowed("RESUME", "RUNNING")
    assert commands.allowed("RESET", "STOPPED") and commands.allowed("RESET", "ERROR")
    assert not commands.allowed("RESET", "RUNNING")
    assert commands.normalise_command("  hold ") == "HOLD"
    with pytest.raises(UnknownCommand, match="'JUMP'"):
        commands.normalise_command("JUMP")


def test_highest_priority_wins_and_the_rest_are_dropped_with_a_reason() -> None:
    verdict = commands.choose(
        [commands.Command.from_payload(i, {"cmd": name}) for i, name in enumerate(["resume", "HOLD", "stop", "dance"])],
        "RUNNING",
    )
    assert verdict.chosen is not None and verdict.chosen.name == "STOP"
    reasons = {c.shown: why for c, why in verdict.dropped}
    assert "not accepted in state RUNNING" in reasons["RESUME"]
    assert "superseded by STOP" in reasons["HOLD"]
    assert "unknown command" in reasons["dance"]


def test_recv_command_returns_the_command_and_sets_the_state(engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("mailbox.echo", {"state": "running"})
    _wait_state(engine, run_id, "RUNNING")
    rt.sendCommand(run_id, "resume", "not now")  # not allowed while RUNNING: dropped
    rt.sendCommand(run_id, " Hold ", "operator break", actor="op1")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS"
    result = view["result"]
    assert result["cmd"] == "HOLD" and result["reason"] == "operator break" and result["actor"] == "op1"
    assert result["sent_at"].endswith("+00:00") and "sentAt" not in result
    dropped = [e for e in view["events"] if e["kind"] == "command_dropped"]
    if dropped:  # RESUME may have been drained alone in an earlier poll or together with HOLD
        assert dropped[0]["payload"]["cmd"] == "RESUME"
        assert "not accepted in state RUNNING" in dropped[0]["reason"]
    accepted = [e for e in view["events"] if e["kind"] == "command"]
    assert accepted[-1]["actor"] == "op1" and accepted[-1]["reason"] == "operator break"


def test_a_command_not_allowed_in_the_state_is_dropped_and_recorded(engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("mailbox.echo", {"state": "HELD"})
    _wait_state(engine, run_id, "HELD")
    rt.sendCommand(run_id, "HOLD", "again", actor="op2")
    wait_until(lambda: [e for e in engine.runtime.get_run(run_id)["events"] if e["kind"] == "command_dropped"],
               message="the dropped HOLD")
    rt.sendCommand(run_id, "RESUME")
    view = rt.waitFor(run_id, 20)
    assert view["result"]["cmd"] == "RESUME"
    (dropped,) = [e for e in view["events"] if e["kind"] == "command_dropped"]
    assert dropped["actor"] == "op2" and "HOLD is not accepted in state HELD" in dropped["reason"]


def test_a_command_from_this_process_wakes_the_wait_at_once(sqlite_engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("mailbox.echo")
    _wait_state(sqlite_engine, run_id, "RUNNING")
    time.sleep(0.05)  # let the workflow reach its 30 s wait; the assertion below does not depend on it
    started = time.monotonic()
    rt.sendCommand(run_id, "STOP")
    view = rt.waitFor(run_id, 10)
    assert view["status"] == "SUCCESS"
    assert time.monotonic() - started < 5  # far below the 30 s receive timeout


def test_bad_commands_are_refused_at_send(sqlite_engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("mailbox.echo")
    with pytest.raises(UnknownCommand, match="'LAUNCH'"):
        rt.sendCommand(run_id, "LAUNCH")
    rt.sendCommand(run_id, "STOP")
    rt.waitFor(run_id, 20)
    with pytest.raises(WorkflowError, match="is SUCCESS"):
        rt.sendCommand(run_id, "STOP")


def test_messages_on_any_topic(engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("mailbox.topic")
    rt.send(run_id, "recipe", {"name": "R7", "litres": 120.5})
    rt.sendCommand(run_id, "STOP")
    view = rt.waitFor(run_id, 20)
    assert view["result"]["first"] == {"name": "R7", "litres": 120.5}
    assert view["result"]["cmd"]["cmd"] == "STOP"
