"""A plant engineer's test of the plant batch, with the simulated plant from Exchange's pytest plugin.

``fresh_sim_plant`` (from the ``exchange_plant`` pytest plugin) serves the simulated plant over Modbus
TCP, OPC UA and EtherNet/IP on free ports and gives the matching config; ``running_engine`` runs the
batch in a real runtime against it, exactly as the gateway would.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from exchange.workflows.testing import running_engine
from simulators.testing import wait_until

APPS = Path(__file__).resolve().parent


@pytest.fixture
def rt(fresh_sim_plant, tmp_path):
    config = tomllib.loads(fresh_sim_plant.config_text)  # the plant's devices and tags
    config["store"] = {"url": f"sqlite:///{tmp_path}/exchange.db"}
    config["apps"] = {"paths": [str(APPS)]}
    config["engine"] = {"progress_interval_ms": 0}
    with running_engine(config, base_dir=tmp_path) as workflows:
        yield workflows


FAST = {"target_level": 20.0, "setpoint": 24.0, "mix_seconds": 0.5, "poll_ms": 100}


def test_the_batch_fills_mixes_heats_and_switches_everything_off(rt, fresh_sim_plant):
    view = rt.waitFor(rt.start("plant.batch", FAST), 60)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["level"] >= 20.0
    assert view["result"]["temperature"] >= 23.5
    plant = fresh_sim_plant
    assert plant.read("Line1/Tank/InletValve/Cmd") is False
    assert plant.read("Line1/Mixer/RunCmd") is False
    assert plant.read("Line1/Heater/Enable") is False
    writes = [e["payload"] for e in view["events"] if e["kind"] == "tag_write"]
    assert any(w.get("tag") == "[plant]Line1/Mixer/Speed" for w in writes)


def test_hold_closes_the_inlet_and_resume_reopens_it(rt, fresh_sim_plant):
    plant = fresh_sim_plant
    run_id = rt.start("plant.batch", dict(FAST, target_level=30.0))
    wait_until(lambda: plant.read("Line1/Tank/InletValve/Open"), 20, message="the inlet to open")
    rt.sendCommand(run_id, "HOLD", "sample the tank", actor="operator")
    wait_until(lambda: rt.getRun(run_id)["state"] == "HELD", 20, message="HELD")
    assert plant.read("Line1/Tank/InletValve/Open") is False
    level_when_held = plant.read("Line1/Tank/Level")
    rt.sendCommand(run_id, "RESUME", "sample OK", actor="operator")
    view = rt.waitFor(run_id, 60)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["level"] >= 30.0 > level_when_held


def test_stop_switches_the_plant_off(rt, fresh_sim_plant):
    plant = fresh_sim_plant
    run_id = rt.start("plant.batch", dict(FAST, target_level=90.0))
    wait_until(lambda: plant.read("Line1/Tank/InletValve/Open"), 20, message="the inlet to open")
    rt.sendCommand(run_id, "STOP", "end of shift")
    view = rt.waitFor(run_id, 30)
    assert view["status"] == "SUCCESS" and view["result"]["stopped"] is True
    assert view["state"] == "STOPPED"
    assert plant.read("Line1/Tank/InletValve/Cmd") is False
