"""docs/plant-features.md's worked examples, executed: the valve with two limit switches and the
gateway heartbeat run as the page shows them (its TOML and its Python, verbatim) against a real
Modbus server on 127.0.0.1 that plays the valve and the PLC.

The page's files go into a folder of their own (its name is not ``apps``: the repository has an
``apps`` package already) loaded through ``[apps] paths``; only the device's host and port are
changed, to the simulated PLC's.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from exchange._values import DataType
from exchange.workflows.engine.instance import Workflows
from exchange.workflows.testing import running_engine
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.docs.markdown import code_blocks, page, sections, shown_files
from tests.drivers.dut_modbus import modbus_settings
from tests.waiting import wait_until

PAGE = page("plant-features.md")
FILES = shown_files(PAGE)
HEARTBEAT_SECTION = next(s for s in sections(PAGE) if s.title.startswith("Worked example: the PLC side of a gateway"))
HEARTBEAT_TOML = next(b.body for b in code_blocks(HEARTBEAT_SECTION.body)
                      if b.lang == "toml" and "[schedules.heartbeat]" in b.body)
WATCHDOG_TOML = next(b.body for b in code_blocks(HEARTBEAT_SECTION.body) if b.lang == "toml" and "[watchdog]" in b.body)
CMD, ZSO, ZSC, HEARTBEAT = "C20", "DI20", "DI21", "HR100"


@pytest.fixture(scope="module")
def app_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs") / "plant_features_examples"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for shown in ("apps/line1_valves.py", "apps/heartbeat.py"):
        (folder / Path(shown).name).write_text(FILES[shown])
    return folder


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    """The valve closed (ZSC made), the heartbeat register at 0."""
    server = ModbusSimServer([
        SimPoint(CMD, DataType.BOOLEAN, False), SimPoint(ZSO, DataType.BOOLEAN, False),
        SimPoint(ZSC, DataType.BOOLEAN, True), SimPoint(HEARTBEAT, DataType.INT16, 0),
    ])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def rt(app_folder: Path, plc: ModbusSimServer, tmp_path: Path) -> Iterator[Workflows]:
    config: dict[str, Any] = tomllib.loads(FILES["exchange.toml"])
    heartbeat = tomllib.loads(HEARTBEAT_TOML)
    config["tags"].update(heartbeat["tags"])
    config["schedules"] = heartbeat["schedules"]  # loaded and checked at start; the gateway runs them
    config["watchdog"] = tomllib.loads(WATCHDOG_TOML)["watchdog"]  # checked at start: its tag is configured
    config["devices"]["line1_plc"] = modbus_settings(plc.port)
    config["store"] = {"url": f"sqlite:///{tmp_path}/exchange.db"}
    config["apps"] = {"paths": [str(app_folder)]}
    config["engine"] = {"progress_interval_ms": 0}
    with running_engine(config, base_dir=tmp_path) as workflows:
        yield workflows


def _held(rt: Workflows, run_id: str) -> Any:
    """The run's view once it is held on a step."""
    return wait_until(lambda: (v := rt.getRun(run_id))["held_on"] is not None and v, 20,
                      message=lambda: f"run {run_id} held: {rt.getRun(run_id)['state']}")


def _commanded(plc: ModbusSimServer, value: bool, writes: int) -> None:
    wait_until(lambda: plc.write_count(CMD) >= writes and plc.get(CMD) is value, 20,
               message=f"the valve commanded {'open' if value else 'closed'}")


def test_a_travel_fault_holds_the_run_and_resume_checks_the_switches_again(
    rt: Workflows, plc: ModbusSimServer
) -> None:
    # The valve sticks halfway: neither switch is made. (Set before the run: the open command's wait
    # must time out, and the test is then never racing it.) travel_ms leaves the test 2 s to answer
    # the close command with the switches, ample on a loaded machine.
    plc.set(ZSC, False)
    run_id = rt.start("line1.drain", {"drain_ms": 50, "travel_ms": 2000})
    view: Any = _held(rt, run_id)
    assert view["held_on"]["step"] == "valve.check_position"
    assert view["held_on"]["error"]["type"].endswith("ValveFault")
    assert "neither limit switch is made" in view["held_on"]["error"]["message"]

    assert plc.get(CMD) is True
    plc.set(ZSO, True)  # the air is back: the valve completes its stroke
    rt.sendCommand(run_id, "RESUME", "air supply restored")
    _commanded(plc, False, 2)
    plc.set_many({ZSO: False, ZSC: True})
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == "drained" and plc.write_count(CMD) == 2


def test_a_valve_that_did_not_move_is_closed_again_after_a_stop(rt: Workflows, plc: ModbusSimServer) -> None:
    run_id = rt.start("line1.drain", {"drain_ms": 50, "travel_ms": 300})
    view: Any = _held(rt, run_id)  # the switches never change: still closed (and closing again needs no move)
    assert "still closed: it did not move" in view["held_on"]["error"]["message"]
    rt.sendCommand(run_id, "STOP", "solenoid coil burnt out")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("ValveFault")
    assert plc.get(CMD) is False and plc.write_count(CMD) == 2  # the finally closed it, and it confirmed


def test_both_switches_made_is_a_switch_fault(rt: Workflows, plc: ModbusSimServer) -> None:
    run_id = rt.start("line1.drain", {"drain_ms": 50, "travel_ms": 5000})
    _commanded(plc, True, 1)
    plc.set(ZSO, True)  # ZSC stays made
    view = _held(rt, run_id)
    assert "both limit switches are made" in view["held_on"]["error"]["message"]
    rt.cancel(run_id, "test over")
    assert rt.waitFor(run_id, 20)["status"] == "CANCELLED"


def test_the_heartbeat_writes_a_new_value_per_tick_and_nothing_for_a_stale_tick(
    rt: Workflows, plc: ModbusSimServer
) -> None:
    tick = datetime.now(UTC).replace(microsecond=0)
    beats = []
    for n in range(2):
        at = (tick + timedelta(seconds=2 * n)).isoformat(timespec="milliseconds")
        view = rt.waitFor(rt.start("plant.heartbeat", {"scheduled_at": at}), 20)
        assert view["status"] == "SUCCESS", view["error"]
        assert plc.get(HEARTBEAT) == view["result"]
        beats.append(view["result"])
    assert beats[1] != beats[0] and all(1 <= b <= 30000 for b in beats)

    stale = (tick - timedelta(seconds=60)).isoformat(timespec="milliseconds")
    view = rt.waitFor(rt.start("plant.heartbeat", {"scheduled_at": stale}), 20)
    assert view["status"] == "SUCCESS" and view["result"] is None
    assert plc.write_count(HEARTBEAT) == 2 and plc.get(HEARTBEAT) == beats[1]
