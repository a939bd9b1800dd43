"""A recorded tag write is never sent again: a gateway killed with -9 after the write, restarted, and
the write counted at a real Modbus server in this test process. A write in flight when the gateway
is killed (sent, applied by the device, its answer not yet back) is in doubt on recovery: resolved by
the tag's ``on_doubt``, never sent again blindly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until
from tests.netfaults import AnswerDropper

APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import tags

@workflow(name="kill9.valve")
def valve():
    rt = getWorkflows()
    tags.write("[plant]Valve/Cmd", True)
    tags.write("[plant]Speed/Setpoint", 1200)
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.2)
        if cmd and cmd["cmd"] == "STOP":
            break
    tags.write("[plant]Valve/Cmd", False)
    return "closed"
"""


@pytest.fixture
def modbus_server() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("C1", DataType.BOOLEAN, False), SimPoint("HR1", DataType.INT16, 0)])
    server.start()
    yield server
    server.stop()


def test_a_recorded_write_is_not_repeated_after_kill9(
    tmp_path: Path, modbus_server: ModbusSimServer, exchange_zygote: ForkServer
) -> None:
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    env.write_app("valve", APP)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write(
            f'\n[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = {modbus_server.port}\n\n'
            '[tags."[plant]Valve/Cmd"]\ndevice = "plc"\naddress = "C1"\n\n'
            '[tags."[plant]Speed/Setpoint"]\ndevice = "plc"\naddress = "HR1"\n'
        )
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("kill9.valve", [{}])
        wait_until(lambda: env.show(run_id)["state"] == "RUNNING", 30, message="the run to wait for commands")
        assert modbus_server.write_count("C1") == 1 and modbus_server.write_count("HR1") == 1
        gateway.kill9()
        gateway.restart()
        env.cli("send", run_id, "STOP").check()
        view = wait_until(lambda: (v := env.show(run_id))["status"] == "SUCCESS" and v, 30, message="SUCCESS")
    assert view["result"] == "closed"
    # The two writes recorded before the kill were replayed, not sent again; the last one went once.
    assert modbus_server.write_count("HR1") == 1
    assert modbus_server.write_count("C1") == 2
    assert modbus_server.get("C1") is False and modbus_server.get("HR1") == 1200
    audited = [e for e in view["events"] if e["kind"] == "tag_write"]
    assert len(audited) == 3


IN_FLIGHT_APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import tags

@workflow(name="kill9.inflight")
def inflight(path, value):
    tags.write(path, value)
    return "written"
"""
MODBUS_WRITE_FUNCTIONS = (5, 6, 15, 16)


@pytest.mark.parametrize(
    ("path", "value", "address", "status", "resolution"),
    [
        ("[plant]Speed/Setpoint", 1500, "HR1", "SUCCESS", "readback: the device holds the value; not sent again"),
        ("[plant]Valve/Cmd", True, "C1", "ERROR", 'on_doubt = "fail": not sent again'),
    ],
    ids=["setpoint-readback", "command-bit-fail"],
)
def test_a_write_in_flight_at_kill9_is_in_doubt_on_recovery(
    tmp_path: Path, modbus_server: ModbusSimServer, path: str, value: object, address: str, status: str,
    resolution: str, exchange_zygote: ForkServer,
) -> None:
    proxy = AnswerDropper(modbus_server.port)
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    env.write_app("inflight", IN_FLIGHT_APP)
    with env.config_path.open("a", encoding="utf-8") as config:
        # a long device timeout: the write hangs on its lost answer until the kill, never times out first
        config.write(
            f'\n[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = {proxy.port}\n'
            'timeout_ms = 60000\n\n'
            '[tags."[plant]Valve/Cmd"]\ndevice = "plc"\naddress = "C1"\n\n'
            '[tags."[plant]Speed/Setpoint"]\ndevice = "plc"\naddress = "HR1"\n'
        )
    try:
        with env.gateway() as gateway:
            gateway.start()
            proxy.arm(lambda data: len(data) > 7 and data[7] in MODBUS_WRITE_FUNCTIONS, forward=True, hold=True)
            (run_id,) = env.start_runs("kill9.inflight", [{"path": path, "value": value}])
            assert proxy.fired.wait(30), "the write never reached the device"
            assert modbus_server.write_count(address) == 1  # applied; the gateway waits for the answer
            gateway.kill9()
            gateway.restart()
            view = wait_until(lambda: (v := env.show(run_id))["status"] in ("SUCCESS", "ERROR") and v, 30,
                              message="the recovered run to finish")
    finally:
        proxy.close()
    assert view["status"] == status, view["error"]
    assert modbus_server.write_count(address) == 1, "a write in doubt was sent again blindly"
    assert modbus_server.get(address) == value
    doubts = [e["payload"] for e in view["events"] if e["kind"] == "tag_write_in_doubt"]
    assert [(d["tag"], d["resolution"]) for d in doubts] == [(path, resolution)]
    assert "stopped while sending this write" in doubts[0]["error"]
    (recorded,) = view["steps"]
    assert recorded["name"] == "tags.write" and recorded["attempts"] == 1
    if status == "ERROR":
        assert view["error"]["type"].endswith("WriteInDoubt") and path in view["error"]["message"]
        shown = env.cli("show", run_id).check().stdout
        assert f"IN DOUBT  write of true to {path} (device plc)" in shown
    else:
        assert view["result"] == "written"
        assert [e["payload"]["confirmed_by"] for e in view["events"] if e["kind"] == "tag_write"] == ["readback"]
