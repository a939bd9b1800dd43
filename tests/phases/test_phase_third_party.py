"""``phase.run`` against a PLC that is not Exchange's simulator: the independent PLC program of
``tests/phaseplc`` (written from docs/phases-plc.md) served by a real asyncua server and a real
pymodbus server, each test once per protocol; and once on PostgreSQL. The PLC counts every command
written to it, taken or not."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from typing import Any

import pytest

from exchange.errors import PhaseStopped
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import phase
from simulators.engine import SimulatedPlant
from tests.phases.conftest import PHASE, sections_for
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until


@workflow(name="phase_3p.charge")
def charge(target_l: float = 3.0) -> Any:
    try:
        return phase.run(PHASE, params={"target_l": target_l}, poll_ms=20)
    except PhaseStopped as stopped:
        return {"state": stopped.state}


def engine_for(plc: Any, make_engine: Callable[..., StepEngine], **extra: Any) -> StepEngine:
    return make_engine(**tomllib.loads(plc.config_toml()), **extra)


def run_state(engine: StepEngine, run_id: str) -> str | None:
    state: str | None = engine.runtime.get_run(run_id, steps=False, events=False)["state"]
    return state


def test_a_phase_completes_with_its_reports(phase_plc: Any, make_engine: Callable[..., StepEngine]) -> None:
    engine = engine_for(phase_plc, make_engine)
    view = engine.run("phase_3p.charge", {"target_l": 3.25})
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["reports"] == {"actual_l": pytest.approx(3.25)}  # this PLC reports the target
    logic = phase_plc.phase(PHASE)
    assert logic.starts == 1 and logic.owner_at_start == 1
    assert logic.params_at_start == {"target_l": pytest.approx(3.25)}
    assert logic.received["RESET"] == 1 and logic.state_name == "IDLE"
    assert logic.ignored == []  # nothing written that the PLC's state did not take


def test_hold_resume_and_stop_reach_the_plc(phase_plc: Any, make_engine: Callable[..., StepEngine]) -> None:
    engine = engine_for(phase_plc, make_engine)
    logic = phase_plc.phase(PHASE)
    logic.duration_s = 60  # runs until the test is done with it
    rt = engine.runtime
    run_id = rt.start("phase_3p.charge", {})
    wait_until(lambda: logic.state_name == "RUNNING", message="the phase running")
    rt.send_command(run_id, "HOLD", "sample", actor="op")
    wait_until(lambda: run_state(engine, run_id) == "HELD", message="the run HELD")
    assert logic.state_name == "HELD"
    rt.send_command(run_id, "RESUME", "ok", actor="op")
    wait_until(lambda: run_state(engine, run_id) == "RUNNING" and logic.state_name == "RUNNING", message="RUNNING")
    rt.send_command(run_id, "STOP", "enough", actor="op")
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS" and view["result"] == {"state": "STOPPED"}, view
    assert dict(logic.received) == {"START": 1, "HOLD": 1, "RESTART": 1, "STOP": 1}


def test_a_hold_by_the_plc_holds_the_run_and_resume_restarts_it(
        phase_plc: Any, make_engine: Callable[..., StepEngine]) -> None:
    engine = engine_for(phase_plc, make_engine)
    logic = phase_plc.phase(PHASE)
    logic.duration_s = 1.0
    rt = engine.runtime
    run_id = rt.start("phase_3p.charge", {})
    wait_until(lambda: logic.state_name == "RUNNING", message="the phase running")
    assert logic.hold()
    wait_until(lambda: run_state(engine, run_id) == "HELD", message="the run HELD by the equipment")
    attention = [row for row in rt.attention() if row["run"] == run_id]
    assert [row["reason"] for row in attention] == ["equipment"], attention
    rt.send_command(run_id, "RESUME", "interlock cleared", actor="op")
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert logic.received["RESTART"] == 1 and logic.received.get("HOLD", 0) == 0


def test_a_phase_waits_out_its_permissive(phase_plc: Any, make_engine: Callable[..., StepEngine]) -> None:
    engine = engine_for(phase_plc, make_engine)
    logic = phase_plc.phase(PHASE)
    logic.set_permissive(False)
    rt = engine.runtime
    run_id = rt.start("phase_3p.charge", {})
    wait_until(lambda: "permissive" in ((rt.get_run(run_id, steps=False, events=False)["progress"] or {})
                                        .get("message") or ""), message="the permissive shown in progress")
    assert logic.starts == 0
    logic.set_permissive(True)
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert logic.starts == 1


def test_a_foreign_owner_means_nothing_is_written(phase_plc: Any, make_engine: Callable[..., StepEngine]) -> None:
    engine = engine_for(phase_plc, make_engine)
    logic = phase_plc.phase(PHASE)
    logic.set_owner(9)
    view = engine.run("phase_3p.charge", {})
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("PhaseOwnedElsewhere"), view["error"]
    assert "owned by 9" in view["error"]["message"]
    assert sum(logic.received.values()) == 0 and logic.params_at_start is None


def test_on_postgresql(pg_url: str, make_engine: Callable[..., StepEngine]) -> None:
    doc = __import__("tests.phases.conftest", fromlist=["plant_document"]).plant_document()
    with SimulatedPlant.from_document(doc, free_ports=True).start() as plant:
        engine = make_engine(store={"url": pg_url}, **sections_for(plant))
        rt = engine.runtime
        run_id = rt.start("phase_3p.charge", {})
        wait_until(lambda: plant.phase_state(PHASE) == "RUNNING", message="the phase running")
        rt.send_command(run_id, "HOLD", "sample", actor="op")
        wait_until(lambda: run_state(engine, run_id) == "HELD", message="the run HELD")
        rt.send_command(run_id, "RESUME", "ok", actor="op")
        view = rt.wait_for(run_id, 15)
        assert view["status"] == "SUCCESS", view["error"]
        assert plant.phase_commands(PHASE) == ["START", "HOLD", "RESTART", "RESET"]
