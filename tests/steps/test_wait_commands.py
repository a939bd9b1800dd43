"""``wait.until_tag`` with ``on_hold``/``on_resume`` in real runs (SQLite store, dispatcher, a Modbus
server polled and an OPC UA server subscribed to): HOLD makes safe and holds the run with the timeout
paused, RESUME waits on, STOP raises StopRequested; one step throughout; a restart while held holds
again without making safe twice; without callbacks commands stay in the mailbox."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._engine import current_run
from exchange._values import DataType
from exchange.errors import StopRequested
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from exchange.workflows.steps import tags, wait
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from simulators.servers.opcua import OpcUaSimServer
from tests.drivers.dut_modbus import modbus_settings
from tests.drivers.dut_opcua import opcua_settings, shared_opcua_server
from tests.steps.conftest import StepEngine
from tests.waiting import holds_for, wait_until

TOTAL, VALVE = "[skid]Dose/Total", "[skid]Dose/Valve"
TAGS = {
    TOTAL: {"device": "plc", "address": "HRF1", "access": "ro"},
    VALVE: {"device": "plc", "address": "C1", "on_doubt": "readback"},  # a coil's default is "fail"
}
OPCUA_TOTAL = "[skid]Ua/Total"


@step(name="waitcmd.mark")
def mark(log: str, text: str) -> str:
    """One line per call in a file: how many times a callback really ran (a replay writes nothing)."""
    with open(log, "a", encoding="utf-8") as f:
        f.write(text + "\n")
    return text


@workflow(name="waitcmd.dose")
def dose(log: str, path: str, target: float, timeout_ms: int, poll_ms: int = 20) -> Any:
    def close_valve() -> None:
        mark(log, "hold")
        if path == TOTAL:
            tags.write(VALVE, False)
        block = Path(log + ".block")
        if block.exists():  # the test restarts the gateway while on_hold runs
            block.unlink()
            ctx = current_run()
            assert ctx is not None
            ctx.sleep(60)

    def open_valve() -> None:
        mark(log, "resume")
        if path == TOTAL:
            tags.write(VALVE, True)

    if path == TOTAL:
        tags.write(VALVE, True)
    try:
        reading = wait.until_tag(path, ">=", target, timeout_ms=timeout_ms, poll_ms=poll_ms,
                                 on_hold=close_valve, on_resume=open_valve)
    except StopRequested as stop:
        mark(log, "stop")
        getWorkflows().setState("STOPPED")
        return {"stopped": stop.command["reason"], "by": stop.command["actor"], "raised": type(stop).__name__}
    return reading


@workflow(name="waitcmd.hold_on_timeout")
def hold_on_timeout(log: str, target: float, timeout_ms: int) -> Any:
    return wait.until_tag(TOTAL, ">=", target, timeout_ms=timeout_ms, poll_ms=20, on_error="hold",
                          on_hold=lambda: mark(log, "hold"), on_resume=lambda: mark(log, "resume"))


@workflow(name="waitcmd.plain_then_receive")
def plain_then_receive(target: float) -> Any:
    reading = wait.until_tag_equals(TOTAL, target, timeout_ms=10000, poll_ms=20)
    command = getWorkflows().recvCommand(currentState="RUNNING", timeoutSeconds=0, maxMessages=1)
    return {"reading": reading, "command": command}


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("HRF1", DataType.FLOAT32, 0.0), SimPoint("C1", DataType.BOOLEAN, False)])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], plc: ModbusSimServer) -> StepEngine:
    return make_engine(devices={"plc": modbus_settings(plc.port)}, tags=TAGS)


def marks(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def state_of(engine: StepEngine, run_id: str) -> str | None:
    state: str | None = engine.runtime.get_run(run_id, steps=False, events=False)["state"]
    return state


def started_waiting(engine: StepEngine, plc: ModbusSimServer, log: Path, target: float = 20.0,
                    timeout_ms: int = 10000) -> str:
    run_id = engine.runtime.start("waitcmd.dose", {"log": str(log), "path": TOTAL, "target": target,
                                                   "timeout_ms": timeout_ms})
    reads = plc.read_count("HRF1")
    wait_until(lambda: plc.read_count("HRF1") >= reads + 2, 20, message="the wait polling the totaliser")
    return run_id


def test_hold_closes_the_valve_holds_the_run_and_pauses_the_timeout_resume_waits_on(
    engine: StepEngine, plc: ModbusSimServer, tmp_path: Path
) -> None:
    log, rt = tmp_path / "log", engine.runtime
    run_id = started_waiting(engine, plc, log, timeout_ms=1500)
    assert plc.get("C1") is True
    rt.send_command(run_id, "HOLD", "sample the tank", actor="op")
    wait_until(lambda: state_of(engine, run_id) == "HELD", message="HELD")
    assert marks(log) == ["hold"] and plc.get("C1") is False  # made safe before HELD was reported
    view = rt.get_run(run_id)
    assert view["status"] == "RUNNING" and view["progress"]["message"] == "held: sample the tank"
    [write] = [e for e in view["events"] if e["kind"] == "tag_write" and e["payload"]["value"] is False]
    assert write["payload"]["caused_by"] == "op" and write["payload"]["cause"]["cmd"] == "HOLD"
    reads = plc.read_count("HRF1")
    # Held past the whole timeout: the wait neither times out nor reads the tag.
    assert holds_for(lambda: rt.get_run(run_id, steps=False, events=False)["status"] == "RUNNING"
                     and plc.read_count("HRF1") == reads, 1.7)

    rt.send_command(run_id, "RESUME", "sample OK", actor="op")
    wait_until(lambda: state_of(engine, run_id) == "RUNNING" and plc.get("C1") is True, message="resumed")
    assert marks(log) == ["hold", "resume"]
    plc.set("HRF1", 20.5)
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    result = view["result"]
    assert result["value"] == pytest.approx(20.5) and result["holds"] == 1 and result["held_ms"] >= 1700
    assert result["elapsed_ms"] >= result["held_ms"]
    assert [s["name"] for s in view["steps"]] == ["tags.write", "wait.until_tag"]  # the callbacks' too
    kinds = [(e["kind"], e["payload"].get("cmd") or e["payload"].get("state")) for e in view["events"]
             if e["kind"] in ("command", "state")]
    assert kinds == [("state", "RUNNING"), ("command", "HOLD"), ("state", "HELD"), ("command", "RESUME"),
                     ("state", "RUNNING")]


def test_the_rest_of_the_timeout_runs_after_resume(engine: StepEngine, plc: ModbusSimServer, tmp_path: Path) -> None:
    log, rt = tmp_path / "log", engine.runtime
    run_id = started_waiting(engine, plc, log, timeout_ms=600)
    rt.send_command(run_id, "HOLD")
    wait_until(lambda: state_of(engine, run_id) == "HELD", message="HELD")
    rt.send_command(run_id, "RESUME")
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "ERROR" and view["error"]["type"] == "ConfirmTimeout"
    assert "did not reach >= 20.0 within 0.6 s" in view["error"]["message"]
    assert marks(log) == ["hold", "resume"]


@pytest.mark.parametrize(("held", "command", "raised"), [
    (False, "STOP", "StopRequested"), (True, "STOP", "StopRequested"), (True, "ABORT", "AbortRequested"),
])
def test_stop_or_abort_raises_running_or_held(
    engine: StepEngine, plc: ModbusSimServer, tmp_path: Path, held: bool, command: str, raised: str
) -> None:
    log, rt = tmp_path / "log", engine.runtime
    run_id = started_waiting(engine, plc, log)
    if held:
        rt.send_command(run_id, "HOLD")
        wait_until(lambda: state_of(engine, run_id) == "HELD", message="HELD")
    started = time.monotonic()
    rt.send_command(run_id, command, "end of batch", actor="op")
    view = rt.wait_for(run_id, 20)
    assert time.monotonic() - started < 2.0
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"stopped": "end of batch", "by": "op", "raised": raised} and view["state"] == "STOPPED"
    assert marks(log) == (["hold", "stop"] if held else ["stop"])  # on_resume never ran
    wait_step = view["steps"][1]
    assert wait_step["name"] == "wait.until_tag" and wait_step["output"]["stopped"]["cmd"] == command


def test_a_wait_held_on_its_timeout_waits_its_whole_timeout_again_on_resume(
    engine: StepEngine, plc: ModbusSimServer, tmp_path: Path
) -> None:
    """The step's own hold (on_error="hold") and RESUME start the wait afresh: the note of the attempt
    that timed out (its time all waited) is not carried over."""
    log, rt = tmp_path / "log", engine.runtime
    run_id = rt.start("waitcmd.hold_on_timeout", {"log": str(log), "target": 20.0, "timeout_ms": 800})
    wait_until(lambda: rt.get_run(run_id)["held_on"] is not None, 20, message="held on its timeout")
    reads = plc.read_count("HRF1")
    rt.send_command(run_id, "RESUME", "try again")
    wait_until(lambda: plc.read_count("HRF1") > reads, 20, message="waiting again")
    time.sleep(0.2)  # into the new wait; with the old note's time it would have timed out at once
    plc.set("HRF1", 20.0)
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["value"] == 20.0 and view["result"]["holds"] == 0 and marks(log) == []


def test_a_wait_without_callbacks_leaves_commands_in_the_mailbox(engine: StepEngine, plc: ModbusSimServer) -> None:
    rt = engine.runtime
    run_id = rt.start("waitcmd.plain_then_receive", {"target": 5.0})
    wait_until(lambda: plc.read_count("HRF1") >= 2, 20, message="the wait polling")
    rt.send_command(run_id, "HOLD", "not now", actor="op")
    assert holds_for(lambda: state_of(engine, run_id) != "HELD", 0.3)
    plc.set("HRF1", 5.0)
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["reading"]["holds"] == 0
    assert view["result"]["command"]["cmd"] == "HOLD" and view["result"]["command"]["reason"] == "not now"


def test_a_restart_while_held_holds_again_without_making_safe_twice(
    engine: StepEngine, plc: ModbusSimServer, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    run_id = started_waiting(engine, plc, log, timeout_ms=5000)
    engine.runtime.send_command(run_id, "HOLD", "shift change")
    wait_until(lambda: state_of(engine, run_id) == "HELD", message="HELD")
    assert marks(log) == ["hold"]
    plc.set("C1", True)  # someone opens the valve by hand: a second on_hold would close it again

    assert run_id in engine.restart()
    rt = engine.runtime
    wait_until(lambda: rt.store.runs.get(run_id).executions == 2, message="the second execution")
    reads = plc.read_count("HRF1")
    assert holds_for(lambda: state_of(engine, run_id) == "HELD" and plc.read_count("HRF1") == reads, 0.5)
    assert rt.get_run(run_id)["progress"]["message"] == "held: shift change"
    assert marks(log) == ["hold"] and plc.get("C1") is True
    rt.send_command(run_id, "RESUME")
    wait_until(lambda: marks(log) == ["hold", "resume"], message="resumed once")
    plc.set("HRF1", 21.0)
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["holds"] == 1 and marks(log) == ["hold", "resume"]
    assert [s["name"] for s in view["steps"]] == ["tags.write", "wait.until_tag"]


@pytest.fixture
def opcua(request: pytest.FixtureRequest) -> OpcUaSimServer:
    return shared_opcua_server(request.config)


def test_a_subscribed_wait_notices_a_command_at_once_not_one_poll_later(
    make_engine: Callable[..., StepEngine], opcua: OpcUaSimServer, tmp_path: Path
) -> None:
    engine = make_engine(devices={"ua": opcua_settings(opcua.url)},
                         tags={OPCUA_TOTAL: {"device": "ua", "address": "ns=2;s=Test.Float32"}})
    log, rt = tmp_path / "log", engine.runtime
    reads = opcua.read_count("ns=2;s=Test.Float32")
    run_id = rt.start("waitcmd.dose", {"log": str(log), "path": OPCUA_TOTAL, "target": 20.0, "timeout_ms": 60000,
                                       "poll_ms": 30000})
    # Its first look: subscribed (before it) and about to pause for 30 s, so only the bell can end the pause.
    wait_until(lambda: opcua.read_count("ns=2;s=Test.Float32") > reads, 20, message="the wait's first read")
    sent = time.monotonic()
    rt.send_command(run_id, "HOLD")
    wait_until(lambda: state_of(engine, run_id) == "HELD", 5, message="HELD")
    assert time.monotonic() - sent < 2.0  # a 30 s poll: only the mail bell ends the pause in time
    rt.send_command(run_id, "RESUME")
    wait_until(lambda: marks(log) == ["hold", "resume"], message="resumed")
    opcua.set("ns=2;s=Test.Float32", 25.0)
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["value"] == pytest.approx(25.0) and view["result"]["holds"] == 1


def test_a_restart_while_on_hold_runs_runs_it_again_its_write_resolved_not_resent(
    engine: StepEngine, plc: ModbusSimServer, tmp_path: Path
) -> None:
    """on_hold cut off mid-way (HOLD consumed, HELD not yet reported) runs again after the restart:
    making safe twice beats not at all; its tag write, in doubt, is read back and not sent again."""
    log = tmp_path / "log"
    (tmp_path / "log.block").touch()
    run_id = started_waiting(engine, plc, log)
    engine.runtime.send_command(run_id, "HOLD", "leak")
    wait_until(lambda: marks(log) == ["hold"] and not (tmp_path / "log.block").exists(), message="on_hold running")
    writes = plc.write_count("C1")
    assert plc.get("C1") is False and state_of(engine, run_id) == "RUNNING"  # HELD only once on_hold returns

    assert run_id in engine.restart()
    rt = engine.runtime
    wait_until(lambda: state_of(engine, run_id) == "HELD", message=lambda: repr(rt.get_run(run_id)))
    assert marks(log) == ["hold", "hold"] and plc.write_count("C1") == writes
    in_doubt = [e for e in rt.get_run(run_id)["events"] if e["kind"] == "tag_write_in_doubt"]
    assert in_doubt and in_doubt[0]["payload"]["tag"] == VALVE
    rt.send_command(run_id, "RESUME")
    wait_until(lambda: marks(log) == ["hold", "hold", "resume"] and plc.get("C1") is True, message="resumed")
    assert plc.write_count("C1") == writes + 1  # on_resume's write is a fresh one, not in doubt
    plc.set("HRF1", 20.0)
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["holds"] == 1
    assert [e["payload"]["cmd"] for e in view["events"] if e["kind"] == "command"] == ["HOLD", "RESUME"]
