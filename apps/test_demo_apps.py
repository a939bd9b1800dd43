"""Tests of the demo apps, written the way a plant engineer tests their own workflows:
a real runtime on a SQLite file in a temporary folder, the apps loaded as the gateway loads them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from exchange.workflows.testing import running_engine

APPS = Path(__file__).resolve().parent


@pytest.fixture
def rt(tmp_path: Path):
    config = {"store": {"url": f"sqlite:///{tmp_path}/exchange.db"}, "apps": {"paths": [str(APPS)]},
              "engine": {"progress_interval_ms": 0}}
    with running_engine(config, base_dir=tmp_path) as workflows:
        yield workflows


def wait_for_state(rt, run_id, state, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while rt.getRun(run_id)["state"] != state:
        assert time.monotonic() < deadline, f"run never reached state {state}"
        time.sleep(0.01)


def test_demo_small_reports_progress_and_succeeds(rt):
    view = rt.waitFor(rt.start("demo.small", {"duration_s": 1}), 20)
    assert view["status"] == "SUCCESS" and view["result"] == {"ok": True}
    assert view["progress"]["message"] == "loop 2/2"
    assert view["steps"] == []  # sleeps are durable without one row each


def test_batch_loop_holds_resumes_and_completes(rt):
    run_id = rt.start("demo.batch_loop", {"phases": 3, "phase_ms": 300})
    wait_for_state(rt, run_id, "RUNNING")
    rt.sendCommand(run_id, "HOLD", "operator check", actor="op")
    wait_for_state(rt, run_id, "HELD")
    def phases_done():
        return [s["output"]["phase"] for s in rt.getRun(run_id)["steps"] if s["name"] == "batch.phase"]

    done_when_held = phases_done()
    time.sleep(0.3)  # a window in which a held batch must do no work
    assert phases_done() == done_when_held
    rt.sendCommand(run_id, "RESUME", "checked")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS"
    assert view["result"] == {"stopped": False, "completed": [1, 2, 3]}
    assert view["state"] == "COMPLETE"


def test_batch_loop_stops_cleanly(rt):
    run_id = rt.start("demo.batch_loop", {"phases": 50, "phase_ms": 200})
    wait_for_state(rt, run_id, "RUNNING")
    rt.sendCommand(run_id, "STOP", "end of shift")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS" and view["result"]["stopped"] is True
    assert view["state"] == "STOPPED"
    assert len(view["result"]["completed"]) < 50


def test_retries_demo_succeeds_on_the_third_attempt(rt, tmp_path):
    view = rt.waitFor(rt.start("demo.retries", {"counter_file": str(tmp_path / "count"), "fail_times": 2}), 20)
    assert view["status"] == "SUCCESS"
    assert view["steps"][0]["attempts"] == 3
    failed = rt.waitFor(rt.start("demo.retries", {"counter_file": str(tmp_path / "c2"), "fail_times": 0,
                                                   "value": -1}), 20)
    assert failed["status"] == "ERROR" and failed["error"]["type"] == "FatalError"
    assert failed["steps"][1]["attempts"] == 1  # fatal: not retried


def test_batch_loop_honours_commands_sent_back_to_back_and_drops_none(rt):
    """One command per poll, and state reports that receive nothing: HOLD, RESUME and STOP sent in
    one go are each acted on, in order (a poll of many used to act on STOP and drop the others)."""
    run_id = rt.start("demo.batch_loop", {"phases": 50, "phase_ms": 100})
    wait_for_state(rt, run_id, "RUNNING")
    for cmd in ("HOLD", "RESUME", "STOP"):
        rt.sendCommand(run_id, cmd, "back to back")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS" and view["result"]["stopped"] is True
    assert [e["payload"]["cmd"] for e in view["events"] if e["kind"] == "command"] == ["HOLD", "RESUME", "STOP"]
    assert [e for e in view["events"] if e["kind"] == "command_dropped"] == []
    states = [e["payload"]["state"] for e in view["events"] if e["kind"] == "state"]
    assert states[-3:] == ["HELD", "RUNNING", "STOPPED"]


def test_plant_line_rinses_each_tank_as_a_child_and_streams_its_log(rt):
    run_id = rt.start("plant.line", {"tanks": [1, 2], "rinse_ms": 50})
    view = rt.waitFor(run_id, 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["tanks"] == 2 and view["result"]["seconds"] >= 0
    assert [c["workflow"] for c in view["children"]] == ["plant.tank_rinse", "plant.tank_rinse"]
    log = [item["value"]["event"] for item in rt.readStream(run_id, "line")]
    assert log == ["started", "rinsed", "rinsed"]


def test_plant_cip_knows_the_tick_it_runs_for(rt):
    view = rt.waitFor(rt.start("plant.cip", {"rinse_ms": 10, "scheduled_at": "2026-11-24T05:00:00.000+00:00"}), 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"line": 1, "scheduled_at": "2026-11-24T05:00:00.000+00:00"}
