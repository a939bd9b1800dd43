"""tags.read / tags.write / tags.write_confirm as durable steps in real runs against a Modbus server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exchange._cli.render import render_run
from exchange._values import DataType
from exchange.errors import StopRequested
from exchange.workflows.bootstrap import getWorkflows, workflow
from exchange.workflows.steps import control, tags
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import modbus_settings
from tests.netfaults import AnswerDropper
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

POINTS = [
    SimPoint("C1", DataType.BOOLEAN, False),  # valve command
    SimPoint("DI1", DataType.BOOLEAN, False),  # valve open feedback
    SimPoint("HRF1", DataType.FLOAT32, 40.0),  # level
    SimPoint("HRF3", DataType.FLOAT32, 10.0),  # setpoint
    SimPoint("HR5", DataType.INT16, 0),  # mode
    SimPoint("IR1", DataType.INT16, 7),  # flow
]
TAGS = {
    "[plant]Valve/Cmd": {"device": "plc", "address": "C1"},
    "[plant]Valve/Open": {"device": "plc", "address": "DI1"},
    "[plant]Tank/Level": {"device": "plc", "address": "HRF1", "access": "ro"},
    "[plant]Tank/Setpoint": {"device": "plc", "address": "HRF3", "min": 0, "max": 100},
    "[plant]Tank/Mode": {"device": "plc", "address": "HR5"},
    "[plant]Tank/Flow": {"device": "plc", "address": "IR1"},
}


class Plant:
    """The PLC program: the valve feedback follows the command (unless frozen)."""

    def __init__(self, server: ModbusSimServer) -> None:
        self.server = server
        self.frozen = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            try:
                if not self.frozen and self.server.get("DI1") != self.server.get("C1"):
                    self.server.set("DI1", self.server.get("C1"))
            except RuntimeError:  # the server is stopped for a fault test
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer(POINTS)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def plant(plc: ModbusSimServer) -> Iterator[Plant]:
    sim = Plant(plc)
    yield sim
    sim.stop()


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], plc: ModbusSimServer) -> StepEngine:
    return make_engine(devices={"plc": modbus_settings(plc.port)}, tags=TAGS)


@workflow(name="tagsteps.open_valve")
def open_valve(setpoint: float) -> dict[str, Any]:
    level = tags.read("[plant]Tank/Level")
    both = tags.read(["[plant]Tank/Setpoint", "[plant]Tank/Flow"])
    written = tags.write("[plant]Tank/Setpoint", setpoint)
    pair = tags.write(["[plant]Tank/Mode", "[plant]Valve/Cmd"], [2, False])
    confirmed = tags.write_confirm("[plant]Valve/Cmd", True, confirm_path="[plant]Valve/Open", poll_ms=20)
    return {"level": level, "both": both, "written": written, "pair": pair, "confirmed": confirmed}


@workflow(name="tagsteps.write_one")
def write_one(path: str, value: Any) -> Any:
    return tags.write(path, value)


@workflow(name="tagsteps.write_then_wait")
def write_then_wait(value: int) -> Any:
    tags.write("[plant]Tank/Mode", value)
    getWorkflows().recv("go", timeoutSeconds=60)  # the engine restarts while the run waits here
    return tags.read("[plant]Tank/Mode")["value"]


@workflow(name="tagsteps.confirm")
def confirm(value: Any, timeout_ms: int) -> Any:
    return tags.write_confirm("[plant]Valve/Cmd", value, "[plant]Valve/Open", timeout_ms=timeout_ms, poll_ms=20)


@workflow(name="tagsteps.valve_on_hold")
def valve_on_hold() -> str:
    tags.write("[plant]Valve/Cmd", True)
    try:
        while True:
            control.checkpoint(on_hold=lambda: tags.write("[plant]Valve/Cmd", False),
                               on_resume=lambda: tags.write("[plant]Valve/Cmd", True), wait_ms=50)
    except StopRequested:
        return "stopped"


def tag_events(view: dict[str, Any], kind: str = "tag_write") -> list[dict[str, Any]]:
    return [e for e in view["events"] if e["kind"] == kind]


def test_read_write_and_confirm_in_a_run(engine: StepEngine, plc: ModbusSimServer, plant: Plant) -> None:
    view = engine.run("tagsteps.open_valve", {"setpoint": 55.5})
    assert view["status"] == "SUCCESS", view["error"]
    result = view["result"]
    assert result["level"]["value"] == 40.0 and result["level"]["quality"] == "Good"
    assert set(result["level"]) == {"value", "quality", "timestamp"}
    assert [v["value"] for v in result["both"]] == [10.0, 7]
    assert result["written"]["path"] == "[plant]Tank/Setpoint" and result["written"]["value"] == 55.5
    assert [p["value"] for p in result["pair"]] == [2, False]
    confirmed = result["confirmed"]
    assert confirmed["confirmed"] is True
    assert (confirmed["path"], confirmed["value"], confirmed["confirm_path"]) == (
        "[plant]Valve/Cmd", True, "[plant]Valve/Open",
    )
    assert confirmed["elapsed_ms"] < 5000
    assert (plc.get("HRF3"), plc.get("HR5"), plc.get("C1"), plc.get("DI1")) == (55.5, 2, True, True)
    assert [plc.write_count(a) for a in ("HRF3", "HR5", "C1")] == [1, 1, 2]
    assert [s["name"] for s in view["steps"]] == [
        "tags.read", "tags.read", "tags.write", "tags.write", "tags.write_confirm",
    ]
    events = tag_events(view)
    assert [(e["payload"]["tag"], e["payload"]["value"]) for e in events] == [
        ("[plant]Tank/Setpoint", 55.5), ("[plant]Tank/Mode", 2), ("[plant]Valve/Cmd", False),
        ("[plant]Valve/Cmd", True),
    ]
    first = events[0]
    assert first["step_seq"] == 3 and first["actor"]
    payload = first["payload"]
    assert (payload["device"], payload["address"], payload["quality"], payload["step"]) == (
        "plc", "HRF3", "Good", "tags.write",
    )
    assert payload["time"] and "old_value" not in payload
    assert events[-1]["payload"]["old_value"] is False  # write_confirm reads the old value first
    assert events[-1]["step_seq"] == 5


@pytest.mark.parametrize(
    ("path", "value", "error"),
    [
        ("[plant]Tank/Mode", 70000, "TagRangeError"),
        ("[plant]Tank/Mode", "abc", "TagTypeError"),
        ("[plant]Tank/Setpoint", 100.5, "TagRangeError"),
        ("[plant]Tank/Level", 1.0, "ReadOnlyTag"),
        ("[plant]Tank/Flow", 1, "ReadOnlyTag"),
        ("[plant]Tank/Nope", 1, "UnknownTag"),
        ("Tank/Mode", 1, "TagPathError"),
    ],
)
def test_a_refused_write_is_fatal_and_sends_nothing(
    engine: StepEngine, plc: ModbusSimServer, path: str, value: Any, error: str
) -> None:
    before = plc.values()
    view = engine.run("tagsteps.write_one", {"path": path, "value": value})
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == error
    assert path.split("]")[-1] in view["error"]["message"]
    assert view["steps"][0]["attempts"] == 1  # fatal: not retried
    assert plc.write_count() == 0 and plc.values() == before
    assert tag_events(view) == [] and tag_events(view, "tag_write_failed") == []


def test_a_device_that_is_down_is_waited_for_and_the_write_goes_out_once_it_is_back(
    engine: StepEngine, plc: ModbusSimServer
) -> None:
    plc.stop()
    run_id = engine.runtime.start("tagsteps.write_one", {"path": "[plant]Tank/Mode", "value": 3})

    def waiting_for_the_device() -> bool:
        progress = engine.runtime.get_run(run_id)["progress"] or {}
        return "waiting for device 'plc'" in str(progress.get("message"))

    wait_until(waiting_for_the_device, timeout_s=20, message="progress naming the device the write waits for")
    plc.start()
    view = engine.runtime.wait_for(run_id, 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["steps"][0]["attempts"] == 1  # waited inside the step: no step retry could resend it
    assert plc.get("HR5") == 3 and plc.write_count("HR5") == 1
    assert tag_events(view, "tag_write_failed") == []
    [done] = tag_events(view)
    assert (done["payload"]["value"], done["payload"]["confirmed_by"]) == (3, "acknowledged")
    assert not any(e["kind"] == "retry" for e in view["events"])


def test_a_recorded_write_is_not_sent_again_after_a_restart(engine: StepEngine, plc: ModbusSimServer) -> None:
    run_id = engine.runtime.start("tagsteps.write_then_wait", {"value": 4})
    wait_until(lambda: engine.runtime.get_run(run_id)["steps"], message="the recorded write")
    assert engine.restart() == [run_id]
    plc.set("HR5", 9)  # the plant moved on; a re-sent write would put 4 back
    getWorkflows().send(run_id, "go", True)
    view = engine.runtime.wait_for(run_id, 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == 9
    assert plc.write_count("HR5") == 1
    assert len(tag_events(view)) == 1


def test_confirm_timeout_names_path_expected_and_last_value(
    engine: StepEngine, plc: ModbusSimServer, plant: Plant
) -> None:
    plant.frozen = True
    view = engine.run("tagsteps.confirm", {"value": True, "timeout_ms": 300})
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "ConfirmTimeout"
    message = view["error"]["message"]
    for fragment in ("[plant]Valve/Open", "True", "last seen False", "0.3 s"):
        assert fragment in message
    assert view["steps"][0]["attempts"] == 1
    assert plc.write_count("C1") == 1 and plc.get("C1") is True  # written once, confirmation missing
    assert len(tag_events(view)) == 1


def test_steps_called_outside_a_run_use_the_process_runtime(engine: StepEngine, plc: ModbusSimServer) -> None:
    assert tags.read("[plant]Tank/Level")["value"] == 40.0
    assert tags.write("[plant]Tank/Mode", "5")["value"] == 5
    assert plc.get("HR5") == 5


def _waiting_for_plc(engine: StepEngine, run_id: str) -> Callable[[], bool]:
    def waiting() -> bool:
        progress = engine.runtime.get_run(run_id)["progress"] or {}
        return "waiting for device 'plc'" in str(progress.get("message"))

    return waiting


@pytest.mark.parametrize(("cmd", "said"), [("STOP", "a STOP"), ("ABORT", "an ABORT")])
def test_a_stop_command_ends_the_wait_for_a_device(engine: StepEngine, plc: ModbusSimServer, cmd: str,
                                                   said: str) -> None:
    plc.stop()
    run_id = engine.runtime.start("tagsteps.write_one", {"path": "[plant]Tank/Mode", "value": 3})
    wait_until(_waiting_for_plc(engine, run_id), timeout_s=20, message="the write waiting for the device")
    getWorkflows().sendCommand(run_id, cmd, reason="line stopped")
    view = engine.runtime.wait_for(run_id, 20)
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "CommunicationError"
    assert f"{said} command is waiting" in view["error"]["message"] and "'plc'" in view["error"]["message"]
    [failed] = tag_events(view, "tag_write_failed")
    assert failed["payload"]["tag"] == "[plant]Tank/Mode"
    plc.start()
    assert plc.write_count("HR5") == 0


def test_a_cancel_ends_the_wait_for_a_device(engine: StepEngine, plc: ModbusSimServer) -> None:
    plc.stop()
    run_id = engine.runtime.start("tagsteps.write_one", {"path": "[plant]Tank/Mode", "value": 3})
    wait_until(_waiting_for_plc(engine, run_id), timeout_s=20, message="the write waiting for the device")
    getWorkflows().cancel(run_id, reason="batch aborted")
    view = engine.runtime.wait_for(run_id, 20)
    assert view["status"] == "CANCELLED"
    plc.start()
    assert plc.write_count("HR5") == 0


@pytest.mark.parametrize(
    ("path", "value", "forward", "resolution", "status"),
    [
        ("[plant]Tank/Mode", 6, True, "readback: the device holds the value; not sent again", "SUCCESS"),
        ("[plant]Tank/Mode", 6, False, "readback: the device does not hold the value; sent again", "SUCCESS"),
        ("[plant]Valve/Cmd", True, True, 'on_doubt = "fail": not sent again', "ERROR"),
    ],
)
def test_a_write_in_doubt_is_audited_with_its_resolution(
    make_engine: Callable[..., StepEngine], plc: ModbusSimServer, path: str, value: Any, forward: bool,
    resolution: str, status: str,
) -> None:
    proxy = AnswerDropper(plc.port)
    try:
        engine = make_engine(devices={"plc": modbus_settings(proxy.port)}, tags=TAGS)
        proxy.arm(lambda data: len(data) >= 8 and data[7] in (5, 6, 15, 16), forward=forward)
        view = engine.run("tagsteps.write_one", {"path": path, "value": value})
        assert proxy.fired.is_set()
        assert view["status"] == status, view["error"]
        [doubt] = tag_events(view, "tag_write_in_doubt")
        assert (doubt["payload"]["tag"], doubt["payload"]["resolution"]) == (path, resolution)
        flagged = [line for line in render_run(view).splitlines() if line.startswith("IN DOUBT")]
        line = f"IN DOUBT  write of {json.dumps(value)} to {path} (device plc) at {doubt['at']}: {resolution}"
        assert flagged == [line]
        address = TAGS[path]["address"]
        assert plc.write_count(address) == 1 and plc.get(address) == value  # applied exactly once
        if status == "ERROR":
            assert view["error"]["type"] == "WriteInDoubt"
            assert tag_events(view) == []
        else:
            assert len(tag_events(view)) == 1
    finally:
        proxy.close()


def test_a_write_on_hold_is_audited_as_caused_by_the_hold_s_sender(engine: StepEngine, plc: ModbusSimServer) -> None:
    """The valve closed by ``on_hold`` after root's HOLD is the run's doing (olga created it) caused by
    root: the audit carries both, and the HELD state says so too; on_resume's write is anna's RESUME."""
    rt = engine.runtime
    run_id = rt.start("tagsteps.valve_on_hold", {}, actor="olga")
    wait_until(lambda: plc.get("C1") is True and rt.get_run(run_id)["state"] == "RUNNING", message="the valve open")
    hold = rt.send_command(run_id, "HOLD", "leak at V-3", actor="root")
    wait_until(lambda: rt.get_run(run_id)["state"] == "HELD", message="HELD")
    assert plc.get("C1") is False
    resume = rt.send_command(run_id, "RESUME", "fixed", actor="anna")
    wait_until(lambda: plc.get("C1") is True and rt.get_run(run_id)["state"] == "RUNNING", message="open again")
    rt.send_command(run_id, "STOP", actor="root")
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    writes = [(e["payload"]["value"], e["actor"], e["payload"].get("caused_by"), e["payload"].get("cause"))
              for e in tag_events(view)]
    assert writes == [(True, "olga", None, None),  # the run's own doing
                      (False, "olga", "root", {"cmd": "HOLD", "message_id": hold}),
                      (True, "olga", "anna", {"cmd": "RESUME", "message_id": resume})], writes
    states = [(e["payload"]["state"], e["actor"], e["payload"].get("caused_by")) for e in view["events"]
              if e["kind"] == "state" and e["payload"]["state"] in ("HELD", "RUNNING")]
    assert ("HELD", "olga", "root") in states and states[-1] == ("RUNNING", "olga", "anna"), states
