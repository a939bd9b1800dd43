"""A recorded tag write is never sent again: a gateway killed with -9 after the write, restarted, and
the write counted at a real Modbus server in this test process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange.tags.model import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.harness import ExchangeEnv, wait_until

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


def test_a_recorded_write_is_not_repeated_after_kill9(tmp_path: Path, modbus_server: ModbusSimServer) -> None:
    env = ExchangeEnv.create(tmp_path)
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
