"""wait.until_tag_equals as a durable step: success, timeout, cancellation, float tolerance."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exchange._values import DataType
from exchange.workflows.bootstrap import getWorkflows, workflow
from exchange.workflows.steps import wait
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import modbus_settings
from tests.steps.conftest import StepEngine
from tests.waiting import holds_for, wait_until

TAGS = {
    "[plant]Heater/Temp": {"device": "plc", "address": "HRF1", "access": "ro"},
    "[plant]Mixer/Running": {"device": "plc", "address": "C1", "access": "ro"},
}


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("HRF1", DataType.FLOAT32, 20.0), SimPoint("C1", DataType.BOOLEAN, False)])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], plc: ModbusSimServer) -> StepEngine:
    return make_engine(devices={"plc": modbus_settings(plc.port)}, tags=TAGS)


@workflow(name="waitsteps.until")
def until(path: str, expected: Any, timeout_ms: int, poll_ms: int = 20) -> Any:
    return wait.until_tag_equals(path, expected, timeout_ms=timeout_ms, poll_ms=poll_ms)


@workflow(name="waitsteps.until_or_hold")  # the workflow raises; this one wait holds
def until_or_hold(path: str, expected: Any, timeout_ms: int) -> Any:
    return wait.until_tag_equals(path, expected, timeout_ms=timeout_ms, poll_ms=20, on_error="hold")


def set_later(server: ModbusSimServer, address: str, value: Any, delay_s: float) -> threading.Thread:
    """Set ``address`` to ``value`` ``delay_s`` after the wait's first read of it (a fixed delay from
    now would, on a busy machine, change the value before the first read)."""
    reads_before = server.read_count(address)

    def set_after_a_read() -> None:
        wait_until(lambda: server.read_count(address) > reads_before, 30, message=f"a read of {address}")
        time.sleep(delay_s)  # the change comes between polls; the wait must read again to see it
        server.set(address, value)

    thread = threading.Thread(target=set_after_a_read, daemon=True)
    thread.start()
    return thread


def test_waits_until_the_tag_equals_with_float_tolerance(engine: StepEngine, plc: ModbusSimServer) -> None:
    timer = set_later(plc, "HRF1", 72.3, 0.2)
    view = engine.run("waitsteps.until", {"path": "[plant]Heater/Temp", "expected": 72.3, "timeout_ms": 10000})
    timer.join()
    assert view["status"] == "SUCCESS", view["error"]
    result = view["result"]
    assert result["path"] == "[plant]Heater/Temp" and result["quality"] == "Good"
    assert result["value"] == pytest.approx(72.3, rel=1e-6) and result["value"] != 72.3  # Float32
    assert 0 <= result["elapsed_ms"] < 5000
    assert [s["name"] for s in view["steps"]] == ["wait.until_tag_equals"]


def test_boolean_wait(engine: StepEngine, plc: ModbusSimServer) -> None:
    timer = set_later(plc, "C1", True, 0.05)
    view = engine.run("waitsteps.until", {"path": "[plant]Mixer/Running", "expected": True, "timeout_ms": 10000})
    timer.join()
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["value"] is True


def test_timeout_is_a_fatal_error_naming_path_expected_and_last_value(engine: StepEngine) -> None:
    view = engine.run("waitsteps.until", {"path": "[plant]Heater/Temp", "expected": 90, "timeout_ms": 200})
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "ConfirmTimeout"
    message = view["error"]["message"]
    for fragment in ("[plant]Heater/Temp", "90", "last seen 20.0", "'plc'", "'HRF1'"):
        assert fragment in message
    assert view["steps"][0]["attempts"] == 1


def test_unknown_path_fails_at_once(engine: StepEngine) -> None:
    view = engine.run("waitsteps.until", {"path": "[plant]Heater/Tmp", "expected": 1, "timeout_ms": 60000})
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "UnknownTag"
    assert "did you mean '[plant]Heater/Temp'" in view["error"]["message"]


def test_cancellation_is_noticed_within_one_poll(engine: StepEngine, plc: ModbusSimServer) -> None:
    run_id = engine.runtime.start(
        "waitsteps.until", {"path": "[plant]Heater/Temp", "expected": 99, "timeout_ms": 60000, "poll_ms": 100}
    )
    wait_until(lambda: plc.read_count("HRF1") >= 2, timeout_s=20, message="the wait polling the tag")
    started = time.monotonic()
    engine.runtime.cancel(run_id, "operator abort")
    view = engine.runtime.wait_for(run_id, 10)
    assert view["status"] == "CANCELLED"
    assert time.monotonic() - started < 2.0
    assert all(s["status"] != "SUCCESS" for s in view["steps"])


@workflow(name="waitsteps.until_op")
def until_op(path: str, op: str, value: Any, timeout_ms: int, poll_ms: int = 20) -> Any:
    return wait.until_tag(path, op, value, timeout_ms=timeout_ms, poll_ms=poll_ms)


@pytest.mark.parametrize(("op", "value", "final"), [
    (">=", 72.0, 72.5), (">", 72.0, 72.5), ("<=", 10.0, 9.5), ("<", 10.0, 9.5), ("!=", 20.0, 21.0), ("==", 31.5, 31.5),
])
def test_until_tag_waits_for_each_comparison_as_one_step(engine: StepEngine, plc: ModbusSimServer, op: str,
                                                         value: float, final: float) -> None:
    timer = set_later(plc, "HRF1", final, 0.2)
    view = engine.run("waitsteps.until_op", {"path": "[plant]Heater/Temp", "op": op, "value": value,
                                             "timeout_ms": 10000})
    timer.join()
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["value"] == pytest.approx(final) and view["result"]["quality"] == "Good"
    assert [s["name"] for s in view["steps"]] == ["wait.until_tag"]  # however many polls it took
    assert plc.read_count("HRF1") >= 2


def test_until_tag_times_out_naming_the_comparison_and_last_value(engine: StepEngine) -> None:
    view = engine.run("waitsteps.until_op", {"path": "[plant]Heater/Temp", "op": ">=", "value": 90,
                                             "timeout_ms": 200})
    assert view["status"] == "ERROR" and view["error"]["type"] == "ConfirmTimeout"
    assert "did not reach >= 90" in view["error"]["message"] and "last seen 20.0" in view["error"]["message"]
    assert view["steps"][0]["attempts"] == 1


def test_a_bad_reading_never_satisfies_until_tag(engine: StepEngine, plc: ModbusSimServer) -> None:
    plc.stop()  # every reading is Bad_NotConnected: "!= 20" must not hold for it
    view = engine.run("waitsteps.until_op", {"path": "[plant]Heater/Temp", "op": "!=", "value": 20.0,
                                             "timeout_ms": 300})
    assert view["status"] == "ERROR" and view["error"]["type"] == "ConfirmTimeout"
    assert "Bad_NotConnected" in view["error"]["message"]


@pytest.mark.parametrize(("path", "op", "value", "named"), [
    ("[plant]Heater/Temp", "=>", 1.0, "op must be one of ==, !=, >=, <=, >, <"),
    ("[plant]Heater/Temp", ">=", "hot", ">= needs a finite number"),
    ("[plant]Heater/Temp", "<", True, "< needs a finite number"),
    ("[plant]Heater/Temp", "==", None, "value must be a value a tag can read"),
    ("[plant]Mixer/Running", ">", 0, "is Boolean: it has no order for >"),
])
def test_until_tag_refuses_bad_arguments_before_reading(engine: StepEngine, plc: ModbusSimServer, path: str,
                                                        op: str, value: Any, named: str) -> None:
    before = plc.read_count("HRF1") + plc.read_count("C1")
    view = engine.run("waitsteps.until_op", {"path": path, "op": op, "value": value, "timeout_ms": 1000})
    assert view["status"] == "ERROR" and view["error"]["type"] == "InvalidArgument", view["error"]
    assert named in view["error"]["message"] and view["error"]["message"].startswith("wait.until_tag: ")
    assert plc.read_count("HRF1") + plc.read_count("C1") == before


def test_a_wait_called_with_on_error_hold_holds_on_timeout_and_resume_waits_again(
    engine: StepEngine, plc: ModbusSimServer
) -> None:
    """A confirmation that does not come holds the run for the operator (the workflow itself raises);
    held, the tag is not polled; RESUME waits again from the start and sees the value."""
    rt = getWorkflows()
    run_id = rt.start("waitsteps.until_or_hold", {"path": "[plant]Mixer/Running", "expected": True, "timeout_ms": 200})
    view = wait_until(lambda: (v := rt.getRun(run_id))["held_on"] is not None and v, 20, message="the wait held")
    assert view["held_on"]["step"] == "wait.until_tag_equals"
    assert view["held_on"]["error"]["type"].endswith("ConfirmTimeout")
    reads = plc.read_count("C1")
    assert holds_for(lambda: plc.read_count("C1") == reads, 0.3)  # held: no polling
    plc.set("C1", True)
    rt.sendCommand(run_id, "RESUME", "motor started by hand")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["value"] is True and view["steps"][0]["attempts"] == 1
