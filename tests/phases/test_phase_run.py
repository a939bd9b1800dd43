"""``phase.run`` against the simulator's PLC over Modbus: a phase run to Complete with its reports;
the run's HOLD, RESUME and STOP reaching the PLC; a hold by the PLC itself; a foreign owner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from exchange.errors import PhaseAborted, PhaseStopped
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import phase, units
from simulators.engine import SimulatedPlant
from tests.phases.conftest import ACTUAL, OWNER, PHASE, TARGET, plant_document, sections_for
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until


@workflow(name="phase_test.charge")
def charge(target_l: float = 20.0) -> Any:
    return phase.run(PHASE, params={"target_l": target_l})


@workflow(name="phase_test.charge_catching")
def charge_catching() -> Any:
    try:
        return phase.run(PHASE, params={"target_l": 5.0})
    except PhaseStopped as stopped:
        return {"stopped": str(stopped), "state": stopped.state}


def kinds(view: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in view["events"] if e["kind"] == kind]


def test_a_phase_runs_to_complete_and_returns_its_reports(plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    view = phase_engine.run("phase_test.charge", {"target_l": 12.5})
    assert view["status"] == "SUCCESS", view
    result = view["result"]
    assert result["state"] == "COMPLETE" and result["reports"] == {"actual_l": pytest.approx(19.5)}
    assert plant.read(TARGET) == pytest.approx(12.5)
    assert plant.phase_commands(PHASE) == ["START", "RESET"]
    assert plant.phase_state(PHASE) == "IDLE"
    assert plant.read(OWNER) == 0  # released after Reset
    assert [p["command"] for p in kinds(view, "phase_command")] == ["START", "RESET"]
    states = [p["state"] for p in kinds(view, "phase_state")]
    assert states[0] == "IDLE" and "RUNNING" in states and "COMPLETE" in states and states[-1] == "IDLE"
    assert [s["name"] for s in view["steps"]] == ["phase.run"]


def test_hold_resume_and_stop_reach_the_plc(plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    rt = phase_engine.runtime
    run_id = rt.start("phase_test.charge_catching", {})
    wait_until(lambda: plant.phase_state(PHASE) == "RUNNING", message="the phase running")
    rt.send_command(run_id, "HOLD", "sample", actor="op")
    wait_until(lambda: rt.get_run(run_id, steps=False, events=False)["state"] == "HELD", message="run HELD")
    assert plant.phase_state(PHASE) == "HELD"
    rt.send_command(run_id, "RESUME", "ok", actor="op")
    wait_until(lambda: plant.phase_commands(PHASE)[-1:] == ["RESTART"], message="Restart at the PLC")
    wait_until(lambda: rt.get_run(run_id, steps=False, events=False)["state"] == "RUNNING", message="RUNNING")
    rt.send_command(run_id, "STOP", "enough", actor="op")
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view
    assert view["result"]["state"] == "STOPPED"
    assert plant.phase_commands(PHASE) == ["START", "HOLD", "RESTART", "STOP"]
    commands = kinds(view, "phase_command")
    assert [c["command"] for c in commands] == ["START", "HOLD", "RESTART", "STOP"]
    assert commands[1]["caused_by"] == "op"


def test_a_hold_by_the_plc_holds_the_run_until_resume(plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    rt = phase_engine.runtime
    run_id = rt.start("phase_test.charge", {})
    wait_until(lambda: plant.phase_state(PHASE) == "RUNNING", message="the phase running")
    plant.command_phase(PHASE, "HOLD")
    wait_until(lambda: rt.get_run(run_id, steps=False, events=False)["state"] == "HELD", message="run HELD")
    rt.send_command(run_id, "RESUME", "checked the valve", actor="op")
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view
    assert plant.phase_commands(PHASE) == ["START", "HOLD", "RESTART", "RESET"]


def test_a_phase_owned_by_another_system_is_not_written(plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    plant.write(OWNER, 7)
    view = phase_engine.run("phase_test.charge", {})
    assert view["status"] == "ERROR"
    assert view["error"]["type"].endswith("PhaseOwnedElsewhere"), view["error"]
    assert plant.phase_commands(PHASE) == [] and plant.read(ACTUAL) == 0.0


def test_commands_waiting_before_the_start_reach_the_running_phase(
        plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    phase_engine.dispatcher.stop()  # the run is claimed only after both commands wait for it
    run_id = phase_engine.runtime.start("phase_test.charge", {})
    phase_engine.runtime.send_command(run_id, "HOLD", "sweep", actor="op")
    phase_engine.runtime.send_command(run_id, "RESUME", "sweep", actor="op")
    phase_engine.restart()
    view = phase_engine.runtime.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view
    assert plant.phase_commands(PHASE) == ["START", "HOLD", "RESTART", "RESET"]


@workflow(name="phase_test.charge_aborting")
def charge_aborting() -> Any:
    try:
        return phase.run(PHASE, params={"target_l": 5.0})
    except PhaseAborted as aborted:
        return {"aborted": str(aborted), "state": aborted.state}


def test_abort_reaches_the_plc_and_raises_phase_aborted(plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    rt = phase_engine.runtime
    run_id = rt.start("phase_test.charge_aborting", {})
    wait_until(lambda: plant.phase_state(PHASE) == "RUNNING", message="the phase running")
    rt.send_command(run_id, "ABORT", "leak", actor="op")
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view
    assert view["result"]["state"] == "ABORTED" and "after the run's ABORT" in view["result"]["aborted"]
    assert plant.phase_commands(PHASE) == ["START", "ABORT"]
    assert view["state"] == "ABORTED"


def test_a_phase_left_aborted_is_reset_before_it_starts(plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    plant.command_phase(PHASE, "ABORT")
    wait_until(lambda: plant.phase_state(PHASE) == "ABORTED", message="aborted by the PLC")
    view = phase_engine.run("phase_test.charge", {})
    assert view["status"] == "SUCCESS", view
    assert plant.phase_commands(PHASE) == ["ABORT", "RESET", "START", "RESET"]


def test_stop_before_the_start_sends_nothing(plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    plant.command_phase(PHASE, "ABORT")  # left Aborted by an earlier batch: the call would reset it first
    wait_until(lambda: plant.phase_state(PHASE) == "ABORTED", message="aborted by the PLC")
    phase_engine.dispatcher.stop()
    run_id = phase_engine.runtime.start("phase_test.charge", {})
    phase_engine.runtime.send_command(run_id, "STOP", "not today", actor="op")
    phase_engine.restart()
    view = phase_engine.runtime.wait_for(run_id, 10)
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("StopRequested"), view["error"]
    assert plant.phase_commands(PHASE) == ["ABORT"]


def test_a_packml_phase_runs_holds_and_completes(make_engine: Callable[..., StepEngine]) -> None:
    with SimulatedPlant.from_document(plant_document(numbering="packml", duration_s=600), free_ports=True
                                      ).start() as sim:
        sim.command_phase(PHASE, "ABORT")  # left Aborted: Clear, then Reset, before the Start
        wait_until(lambda: sim.phase_state(PHASE) == "ABORTED", message="aborted by the PLC")
        engine = make_engine(**sections_for(sim))
        rt = engine.runtime
        run_id = rt.start("phase_test.charge", {})
        wait_until(lambda: sim.phase_state(PHASE) == "EXECUTE", message="the phase executing")
        rt.send_command(run_id, "HOLD", "sample", actor="op")
        wait_until(lambda: rt.get_run(run_id, steps=False, events=False)["state"] == "HELD", message="HELD")
        rt.send_command(run_id, "RESUME", "ok", actor="op")
        wait_until(lambda: sim.phase_commands(PHASE)[-1] == "UNHOLD", message="Unhold at the PLC")
        sim.finish_phase(PHASE)
        view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert sim.phase_commands(PHASE) == ["ABORT", "CLEAR", "RESET", "START", "HOLD", "UNHOLD", "RESET"]
    states = [p["state"] for p in kinds(view, "phase_state")]
    assert "COMPLETE" in states and states[-1] == "IDLE"


@workflow(name="phase_test.charge_holding", on_step_error="hold")
def charge_holding() -> Any:
    return phase.run(PHASE, params={"target_l": 2.0})


def test_a_foreign_owner_holds_a_run_that_holds_on_errors_and_resume_runs_the_phase(
        plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    plant.write(OWNER, 7)
    rt = phase_engine.runtime
    run_id = rt.start("phase_test.charge_holding", {})
    wait_until(lambda: (rt.get_run(run_id)["held_on"] or {}).get("step") == "phase.run",
               message="the run held on phase.run")
    held = rt.get_run(run_id)["held_on"]
    assert held["error"]["type"].endswith("PhaseOwnedElsewhere") and not held["in_doubt"], held
    assert plant.phase_commands(PHASE) == []
    plant.write(OWNER, 0)  # the other batch system let the phase go
    rt.send_command(run_id, "RESUME", "released by the other system", actor="op")
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert plant.phase_commands(PHASE) == ["START", "RESET"]


@workflow(name="phase_test.charge_in_time", on_step_error="hold")
def charge_in_time() -> Any:
    return phase.run(PHASE, params={"target_l": 2.0}, timeout_s=0.3)


def test_a_phase_that_timed_out_is_not_started_again_on_resume(make_engine: Callable[..., StepEngine]) -> None:
    with SimulatedPlant.from_document(plant_document(duration_s=600), free_ports=True).start() as long_plant:
        rt = make_engine(**sections_for(long_plant)).runtime
        run_id = rt.start("phase_test.charge_in_time", {})
        wait_until(lambda: (rt.get_run(run_id)["held_on"] or {}).get("step") == "phase.run",
                   message="the run held on its timeout")
        held = rt.get_run(run_id)["held_on"]
        assert held["error"]["type"].endswith("PhaseTimeout") and held["in_doubt"], held
        long_plant.finish_phase(PHASE)  # the phase completes while the run is held
        wait_until(lambda: long_plant.phase_state(PHASE) == "COMPLETE", message="Complete at the PLC")
        rt.send_command(run_id, "RESUME", "let it finish", actor="op")
        view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["reports"] == {"actual_l": pytest.approx(19.5)}
    assert long_plant.phase_commands(PHASE) == ["START", "RESET"]  # re-attached: not started twice


def test_the_run_s_own_stop_is_no_failure_to_hold_for(make_engine: Callable[..., StepEngine]) -> None:
    with SimulatedPlant.from_document(plant_document(duration_s=600), free_ports=True).start() as long_plant:
        rt = make_engine(**sections_for(long_plant)).runtime
        run_id = rt.start("phase_test.charge_holding", {})
        wait_until(lambda: long_plant.phase_state(PHASE) == "RUNNING", message="the phase running")
        rt.send_command(run_id, "STOP", "end the batch", actor="op")
        view = rt.wait_for(run_id, 10)
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("PhaseStopped"), view
    assert view["held_on"] is None and view["state"] == "STOPPED"
    assert long_plant.phase_commands(PHASE) == ["START", "STOP"]
    (step,) = view["steps"]
    assert step["status"] == "SUCCESS" and step["output"]["ended"]["error"] == "PhaseStopped"


@workflow(name="phase_test.charge_holding_on_stop")
def charge_holding_on_stop() -> Any:
    return phase.run(PHASE, params={"target_l": 5.0}, on_error="hold")


def test_a_stop_by_the_plc_holds_and_resume_resets_and_starts_the_phase_again(
        plant: SimulatedPlant, phase_engine: StepEngine) -> None:
    rt = phase_engine.runtime
    run_id = rt.start("phase_test.charge_holding_on_stop", {})
    wait_until(lambda: plant.phase_state(PHASE) == "RUNNING", message="the phase running")
    plant.command_phase(PHASE, "STOP")  # the PLC stops the phase by itself (a trip)
    wait_until(lambda: (rt.get_run(run_id)["held_on"] or {}).get("step") == "phase.run", message="held")
    assert rt.get_run(run_id)["held_on"]["error"]["type"].endswith("PhaseStopped")
    rt.send_command(run_id, "RESUME", "trip cleared", actor="op")
    view = rt.wait_for(run_id, 10)
    assert view["status"] == "SUCCESS", view["error"]
    assert plant.phase_commands(PHASE) == ["START", "STOP", "RESET", "START", "RESET"]


@workflow(name="phase_test.charge_in_r1")
def charge_in_r1(hold_unit: bool) -> Any:
    if not hold_unit:
        return phase.run(PHASE, params={"target_l": 1.0})
    with units.acquire("R1"):
        return phase.run(PHASE, params={"target_l": 1.0})


def test_a_phase_of_a_unit_is_commanded_only_by_the_run_holding_it(
        plant: SimulatedPlant, make_engine: Callable[..., StepEngine]) -> None:
    sections = sections_for(plant)
    sections["phases"][PHASE]["unit"] = "R1"
    engine = make_engine(units={"R1": {"class": "reactor"}}, **sections)
    refused = engine.run("phase_test.charge_in_r1", {"hold_unit": False})
    assert refused["status"] == "ERROR" and "which this run does not hold" in refused["error"]["message"]
    assert plant.phase_commands(PHASE) == []  # nothing written
    held = engine.run("phase_test.charge_in_r1", {"hold_unit": True})
    assert held["status"] == "SUCCESS", held["error"]
    assert [s["name"] for s in held["steps"]] == ["units.acquire", "phase.run", "units.release"]
    assert plant.phase_commands(PHASE) == ["START", "RESET"]
