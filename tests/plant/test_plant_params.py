"""``[schedules.NAME] params`` and ``[triggers.NAME] params`` are checked against the workflow's
parameters when the gateway starts (real gateway processes forked from the session's zygote): one
that could never start its run stops the gateway with one line naming the key, before anything
runs, instead of an ERROR on every tick or poll. Good ones start, and a schedule's ``scheduled_at``
and a trigger's ``trigger_value``/``trigger_at`` count as given."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until
from tests.paramcases import APP

VALVE_ERR = "(workflow 'params.valve')"


def _device(port: int) -> str:
    return f"""
[devices.plc]
driver = "modbus"
host = "127.0.0.1"
port = {port}
unit_id = 1
timeout_ms = 1000

[tags."[t]StartPB"]
device = "plc"
address = "C1"
"""


def _schedule(params: str) -> str:
    return f'[schedules.morning_cip]\nworkflow = "params.valve"\ncron = "0 6 * * *"\nparams = {params}\n'


def _trigger(params: str) -> str:
    return (f'[triggers.batch_start]\ntag = "[t]StartPB"\nwhen = "rising"\nworkflow = "params.valve"\n'
            f"params = {params}\npoll_ms = 50\n")


def _env(root: Path, zygote: ForkServer, config: str) -> ExchangeEnv:
    env = ExchangeEnv.create(root, zygote=zygote)
    env.write_app("params_app", APP)
    with env.config_path.open("a", encoding="utf-8") as file:
        file.write("\n" + config)
    return env


@pytest.mark.parametrize(("config", "named"), [
    (_schedule('{ x = "ten" }'), f'schedules.morning_cip.params.x expects float, got "ten" (str) {VALVE_ERR}'),
    (_schedule("{ x = 1.5, count = 2.5 }"), "schedules.morning_cip.params.count expects int, got 2.5 (float)"),
    (_schedule('{ x = 1.5, mode = "turbo" }'), 'schedules.morning_cip.params.mode expects one of "auto", "manual"'),
    (_schedule("{ x = 1.5, cuont = 2 }"),
     "schedules.morning_cip.params.cuont is unknown; did you mean 'count'? (workflow 'params.valve' takes x, mode,"),
    (_schedule("{ count = 2 }"), f"schedules.morning_cip.params.x (float) is required and was not given {VALVE_ERR}"),
    (_schedule("{ x = 1.5, scheduled_at = 2026-01-01T06:00:00Z }"),
     "schedules.morning_cip.params.scheduled_at is not JSON"),
    (_trigger('{ x = "ten" }'), f'triggers.batch_start.params.x expects float, got "ten" (str) {VALVE_ERR}'),
    (_trigger("{ x = 1.5, flush = 1 }"), "triggers.batch_start.params.flush expects bool, got 1 (int)"),
    (_trigger("{ x = 1.5, lnie = 1 }"), "triggers.batch_start.params.lnie is unknown"),
    (_trigger("{}"), "triggers.batch_start.params.x (float) is required and was not given"),
], ids=["schedule float text", "schedule int fraction", "schedule literal", "schedule unknown", "schedule missing",
        "schedule toml datetime", "trigger float text", "trigger bool int", "trigger unknown", "trigger missing"])
def test_params_that_do_not_fit_stop_the_gateway_naming_the_key(tmp_path: Path, exchange_zygote: ForkServer,
                                                                config: str, named: str) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, _device(1) + config)  # nothing listens: never reached
    refused = env.cli("gateway", timeout_s=60)
    assert refused.returncode == 1, refused
    assert refused.stderr.startswith(f"error: {env.config_path}: ") and named in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert env.sqlite_path is not None
    assert not env.sqlite_path.exists() or env.runtime().list_runs(limit=10) == []
    if "schedules." in config:  # the listing reads the config without starting anything: it still lists it
        listed = env.cli("schedules", "list", "--json").check().json()
        assert [row["name"] for row in listed] == ["morning_cip"]


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint("C1", DataType.BOOLEAN, False)])
    server.start()
    yield server
    server.stop()


def test_params_that_fit_start_and_the_trigger_fills_in_its_own(tmp_path: Path, exchange_zygote: ForkServer,
                                                               plc: ModbusSimServer) -> None:
    config = _device(plc.port) + _trigger("{ x = 2 }") + _schedule('{ x = 1.5, mode = "manual" }')
    env = _env(tmp_path / "plant", exchange_zygote, config)
    with env.gateway() as gateway:
        gateway.start()
        wait_until(lambda: env.runtime().store.plant.get("trigger", "batch_start") is not None, 20,
                   message="the trigger's first reading")
        plc.set("C1", True)
        wait_until(lambda: [r["status"] for r in env.runtime().list_runs(workflow="params.valve")] == ["SUCCESS"], 20,
                   message="the trigger's run")
        (run,) = env.runtime().list_runs(workflow="params.valve")
        assert run["params"]["x"] == 2 and run["params"]["trigger_value"] is True and run["params"]["trigger_at"]
        gateway.stop()
