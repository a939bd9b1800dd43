"""A retry of a run whose failed step had written a tag with the answer lost, against a real Modbus
server behind a proxy that loses the answer: the write is resolved by the tag's ``on_doubt`` before
anything is sent again, so the device counts one write."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._values import DataType
from exchange.errors import FatalError
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.steps import tags
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import modbus_settings
from tests.netfaults import AnswerDropper
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

TAGS = {
    "[plant]Valve/Cmd": {"device": "plc", "address": "C1"},  # a command bit: on_doubt "fail"
    "[plant]Tank/Setpoint": {"device": "plc", "address": "HRF3"},  # a setpoint: on_doubt "readback"
}
MODBUS_WRITES = (5, 6, 15, 16)


@step(name="tagretry.dose")
def dose(flag: str) -> str:
    """Sets the dosing setpoint, then hands the batch to the MES, which may be down."""
    tags.write("[plant]Tank/Setpoint", 42.5)  # inside a step: part of this step's side effect
    if not os.path.exists(flag):
        raise FatalError("the MES did not take the batch")
    return "dosed"


@workflow(name="tagretry.dose_and_post")
def dose_and_post(flag: str) -> str:
    return dose(flag)


@workflow(name="tagretry.open_valve")
def open_valve() -> Any:
    return tags.write("[plant]Valve/Cmd", True)


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("C1", DataType.BOOLEAN, False), SimPoint("HRF3", DataType.FLOAT32, 10.0)])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def proxy(plc: ModbusSimServer) -> Iterator[AnswerDropper]:
    dropper = AnswerDropper(plc.port)
    yield dropper
    dropper.close()


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], proxy: AnswerDropper) -> StepEngine:
    return make_engine(devices={"plc": modbus_settings(proxy.port)}, tags=TAGS)


def _doubts(view: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["payload"]["error"], e["payload"]["resolution"]) for e in view["events"]
            if e["kind"] == "tag_write_in_doubt"]


def _retried(engine: StepEngine, run_id: str) -> dict[str, Any]:
    engine.runtime.retry(run_id, reason="device checked")
    view = engine.runtime.wait_for(run_id, 30)
    assert view["status"] in ("SUCCESS", "ERROR"), view
    return view


def test_a_retried_setpoint_write_whose_answer_was_lost_is_read_back_not_sent_again(
    engine: StepEngine, plc: ModbusSimServer, proxy: AnswerDropper, tmp_path: Path,
) -> None:
    flag = tmp_path / "mes-is-back"
    proxy.arm(lambda data: len(data) >= 8 and data[7] in MODBUS_WRITES, forward=True)  # applied, answer lost
    failed = engine.run("tagretry.dose_and_post", {"flag": str(flag)})
    # the proxy's thread may be slower than the client's timeout on a loaded machine: wait for it
    wait_until(proxy.fired.is_set, 10, message="the proxy to drop the write's answer")
    assert failed["status"] == "ERROR" and failed["error"]["message"] == "the MES did not take the batch"
    assert plc.write_count("HRF3") == 1 and plc.get("HRF3") == 42.5

    flag.touch()
    done = _retried(engine, failed["id"])
    assert done["status"] == "SUCCESS", done["error"]
    assert done["result"] == "dosed"
    assert plc.write_count("HRF3") == 1, "the retry sent the write in doubt again"
    (lost, retried) = _doubts(done)
    assert lost[1] == retried[1] == "readback: the device holds the value; not sent again"
    assert "(the run was retried)" in retried[0]
    (event,) = [e for e in done["events"] if e["kind"] == "retried"]
    assert event["payload"]["step"] == {"seq": 1, "name": "tagretry.dose", "status": "ERROR", "in_doubt": True}


def test_a_retried_command_bit_in_doubt_is_not_sent_again_and_a_fork_sends_it(
    engine: StepEngine, plc: ModbusSimServer, proxy: AnswerDropper,
) -> None:
    proxy.arm(lambda data: len(data) >= 8 and data[7] in MODBUS_WRITES, forward=True)
    failed = engine.run("tagretry.open_valve")
    assert failed["status"] == "ERROR" and failed["error"]["type"] == "WriteInDoubt"
    assert plc.write_count("C1") == 1

    again = _retried(engine, failed["id"])
    # on_doubt "fail": the retry resolves the doubt by refusing to send the bit again
    assert again["status"] == "ERROR" and again["error"]["type"] == "WriteInDoubt"
    assert plc.write_count("C1") == 1
    assert [resolution for _, resolution in _doubts(again)] == ['on_doubt = "fail": not sent again'] * 2

    # Someone checked the valve: a fork from the step executes it afresh, and the bit is sent.
    forked = engine.runtime.fork(failed["id"], 1, reason="valve checked: it did not open")
    view = engine.runtime.wait_for(forked, 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert plc.write_count("C1") == 2 and plc.get("C1") is True
