"""[watchdog]: the active gateway writes the heartbeat a real Modbus server holds (1, 2, 3, ...),
a standby writes nothing until it takes over, and after kill -9 the value stands still."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until
from tests.waiting import holds_for

PERIOD_MS = 100


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("HR50", DataType.INT16, 0), SimPoint("C7", DataType.BOOLEAN, False)])
    server.start()
    yield server
    server.stop()


def _env(root: Path, zygote: ForkServer, port: int, address: str) -> ExchangeEnv:
    env = ExchangeEnv.create(root, zygote=zygote)
    with env.config_path.open("a", encoding="utf-8") as file:
        file.write(f"""
[devices.plc]
driver = "modbus"
host = "127.0.0.1"
port = {port}
timeout_ms = 1000

[tags."[plant]Exchange/Heartbeat"]
device = "plc"
address = "{address}"

[watchdog]
tag = "[plant]Exchange/Heartbeat"
period_ms = {PERIOD_MS}
""")
    return env


def test_the_active_gateway_beats_a_standby_waits_and_a_killed_one_stands_still(
        tmp_path: Path, exchange_zygote: ForkServer, plc: ModbusSimServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, plc.port, "HR50")
    with env.gateway(name="active") as active, env.gateway("--standby", name="standby") as standby:
        active.start()
        wait_until(lambda: plc.write_count("HR50") >= 5, 20, message="five beats")
        seen = [plc.get("HR50")]
        wait_until(lambda: plc.get("HR50") != seen[-1], 5, message="the heartbeat to change")
        assert 1 <= plc.get("HR50") <= 32767  # a counter, never the 0 of a PLC's restart
        standby.spawn()
        wait_until(lambda: "standby: waiting" in standby.log_text(), 20, message="the standby to wait")
        assert "watchdog" not in standby.log_text()  # a standby beats only once it is active
        active.kill9()
        standby.wait_ready(20)
        count = plc.write_count("HR50")
        wait_until(lambda: plc.write_count("HR50") >= count + 5, 20, message="the standby's beats")
        assert "watchdog: writing [plant]Exchange/Heartbeat every 100 ms" in standby.log_text()
        standby.kill9()
        after_kill = plc.write_count("HR50")
        assert holds_for(lambda: plc.write_count("HR50") == after_kill, 5 * PERIOD_MS / 1000)


def test_a_boolean_heartbeat_toggles(tmp_path: Path, exchange_zygote: ForkServer, plc: ModbusSimServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, plc.port, "C7")
    with env.gateway() as gateway:
        gateway.start()
        seen: set[bool] = set()
        wait_until(lambda: seen.add(plc.get("C7")) or seen == {True, False}, 20, message="true and false")
        gateway.stop()
    count = plc.write_count("C7")
    assert holds_for(lambda: plc.write_count("C7") == count, 5 * PERIOD_MS / 1000)  # a stopped gateway beats no more
