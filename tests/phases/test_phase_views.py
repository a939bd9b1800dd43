"""What the surfaces read of a phase a run commands, in process against the simulator's PLC: the
run's view (``show --json``'s ``phase``, whatever steps the view loads), ``Runtime.phase_runs``
(``exchange phases``' and ``GET /api/v1/phases``' commanding run) and ``Runtime.run_phase``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from exchange._engine import Runtime
from exchange._engine.model.view_types import PhaseRunView, PhaseView
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import phase
from simulators.engine import SimulatedPlant
from tests.engine.test_view_types import keys_fit
from tests.phases.conftest import PHASE, plant_document, sections_for
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until


@workflow(name="phase_views.charge")
def charge() -> Any:
    return phase.run(PHASE, params={"target_l": 3.0})


@pytest.fixture
def long_plant() -> Iterator[SimulatedPlant]:
    """The phase runs until the test ends it (``finish_phase``)."""
    with SimulatedPlant.from_document(plant_document(duration_s=600), free_ports=True).start() as sim:
        yield sim


def _phase(rt: Runtime, run_id: str, **views: Any) -> Any:
    return rt.get_run(run_id, **views)["phase"]


def test_the_run_s_view_and_the_phase_list_show_the_phase_it_commands(
        long_plant: SimulatedPlant, make_engine: Any) -> None:
    engine: StepEngine = make_engine(**sections_for(long_plant))
    rt = engine.runtime
    assert rt.phase_runs() == {}
    run_id = rt.start("phase_views.charge", {})
    wait_until(lambda: (_phase(rt, run_id) or {}).get("state") == "RUNNING", message="the run seeing RUNNING")
    seen = _phase(rt, run_id)
    assert (seen["name"], seen["stage"], seen["state"], seen["held_by"]) == (PHASE, "running", "RUNNING", None)
    keys_fit(seen, PhaseView)
    assert datetime.fromisoformat(seen["since"]).timestamp() == pytest.approx(datetime.now().timestamp(), abs=30)
    # the same whatever the view loads: all steps, the last one, none (events only), and the live page's call
    assert _phase(rt, run_id, last_steps=1) == seen
    assert _phase(rt, run_id, steps=False) == seen
    assert _phase(rt, run_id, last_steps=0, last_events=0) == seen
    assert rt.run_phase(run_id) == seen
    assert "phase" not in rt.get_run(run_id, steps=False, events=False)  # the listing's view: no phase, no query
    assert rt.phase_runs() == {PHASE: {"run": run_id, "workflow": "phase_views.charge", "stage": "running",
                                       "seen_state": "RUNNING", "held_by": None}}
    keys_fit(dict(rt.phase_runs()[PHASE]), PhaseRunView)

    long_plant.command_phase(PHASE, "HOLD")  # the PLC holds its phase by itself
    wait_until(lambda: (_phase(rt, run_id) or {}).get("state") == "HELD", message="the run seeing HELD")
    assert _phase(rt, run_id)["held_by"] == "equipment"
    assert rt.phase_runs()[PHASE]["held_by"] == "equipment"
    assert rt.phase_runs()[PHASE]["seen_state"] == "HELD"
    rt.send_command(run_id, "RESUME", "valve checked", actor="op")
    wait_until(lambda: (_phase(rt, run_id) or {}).get("held_by") is None, message="the hold over")

    long_plant.finish_phase(PHASE)
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view
    assert view["phase"] is None and rt.phase_runs() == {} and rt.run_phase(run_id) is None


def test_a_run_that_commands_no_phase_has_none(long_plant: SimulatedPlant, make_engine: Any) -> None:
    engine: StepEngine = make_engine(**sections_for(long_plant))
    view = engine.run("phase_views.charge_none")
    assert view["status"] == "SUCCESS" and view["phase"] is None


@workflow(name="phase_views.charge_none")
def no_phase() -> Any:
    return 1
