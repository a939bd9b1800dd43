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


def plant_config(sim_plant, tmp_path):
    config = tomllib.loads(sim_plant.config_text)  # the plant's devices and tags
    config["store"] = {"url": f"sqlite:///{tmp_path}/exchange.db"}
    config["apps"] = {"paths": [str(APPS)]}
    config["engine"] = {"progress_interval_ms": 0}
    return config


@pytest.fixture
def rt(fresh_sim_plant, tmp_path):
    with running_engine(plant_config(fresh_sim_plant, tmp_path), base_dir=tmp_path) as workflows:
        yield workflows


@pytest.fixture
def rt_no_link_wait(fresh_sim_plant, tmp_path):
    """As ``rt``, with writes to an unreachable device failing at once (comm_timeout_s = 0)."""
    config = plant_config(fresh_sim_plant, tmp_path)
    for device in config["devices"].values():
        device["comm_timeout_s"] = 0
    with running_engine(config, base_dir=tmp_path) as workflows:
        yield workflows


def progress_of(rt, run_id):
    return (rt.getRun(run_id)["progress"] or {}).get("message", "")


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


def test_a_lost_tank_link_is_waited_for_and_the_batch_goes_on_when_it_returns(rt, fresh_sim_plant, plant_faults):
    run_id = rt.start("plant.batch", dict(FAST, target_level=30.0, link_wait_s=30))
    wait_until(lambda: progress_of(rt, run_id).startswith("filling: level"), 20, message="the first level read")
    plant_faults.stop("modbus")  # the tank's PLC goes away: its level reads Bad_NotConnected
    wait_until(lambda: "waiting for the tank level" in progress_of(rt, run_id), 20,
               message=lambda: f"the batch waiting for the level; progress {progress_of(rt, run_id)!r}")
    assert "Bad_NotConnected" in progress_of(rt, run_id)
    assert rt.getRun(run_id)["status"] == "RUNNING"
    plant_faults.start("modbus")
    view = rt.waitFor(run_id, 60)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["level"] >= 30.0  # a Good reading, never a None compared with the target
    bad = [s["output"] for s in view["steps"] if s["name"] == "tags.read" and s["output"]["quality"] != "Good"]
    assert bad and all(reading["value"] is None for reading in bad)


def test_a_link_that_stays_lost_aborts_the_batch_naming_the_tag(rt_no_link_wait, fresh_sim_plant, plant_faults):
    """The heater's PLC goes away while heating: the batch fails with the tag and its quality, after
    switching off what it can still reach (the inlet, the mixer)."""
    rt, plant = rt_no_link_wait, fresh_sim_plant
    run_id = rt.start("plant.batch", dict(FAST, setpoint=60.0, link_wait_s=0.5))
    wait_until(lambda: progress_of(rt, run_id).startswith("heating: "), 30, message="the first temperature read")
    plant_faults.stop("enip")
    view = rt.waitFor(run_id, 30)
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "apps.plant_batch.BadReading"
    message = view["error"]["message"]
    assert message.startswith("temperature [plant]Line1/Heater/Temperature unreadable for 0.5 s: Bad_NotConnected")
    assert "could not switch off: [plant]Line1/Heater/Enable" in message
    assert view["state"] == "ABORTED"
    assert plant.read("Line1/Tank/InletValve/Cmd") is False
    assert plant.read("Line1/Mixer/RunCmd") is False
