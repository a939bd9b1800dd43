"""A lost link while ``phase.run`` follows a phase: the PLC's Modbus server down for a while (the
run waits, shows it in its progress, and carries on when the server is back), and a command whose
answer is lost on the wire or whose request never arrives (a proxy in between): resolved from the
state the PLC reports, never acted on twice."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import phase
from simulators.engine import SimulatedPlant
from tests.netfaults import AnswerDropper
from tests.phases.conftest import PHASE, plant_document, sections_for
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

MODBUS_WRITES = (6, 16)


@workflow(name="phase_link.charge")
def charge() -> Any:
    return phase.run(PHASE, params={"target_l": 4.0}, poll_ms=20)


@pytest.fixture
def long_plant() -> Iterator[SimulatedPlant]:
    with SimulatedPlant.from_document(plant_document(duration_s=600), free_ports=True).start() as sim:
        yield sim


def progress(engine: StepEngine, run_id: str) -> str:
    view = engine.runtime.get_run(run_id, steps=False, events=False)
    return str((view["progress"] or {}).get("message") or "")


def test_the_plc_away_for_a_while_is_waited_for(long_plant: SimulatedPlant,
                                                 make_engine: Callable[..., StepEngine]) -> None:
    engine = make_engine(**sections_for(long_plant))
    run_id = engine.runtime.start("phase_link.charge", {})
    wait_until(lambda: long_plant.phase_state(PHASE) == "RUNNING", message="the phase running")
    server = long_plant.servers["plc"]
    server.stop()
    wait_until(lambda: "waiting for device 'plc'" in progress(engine, run_id), message="the wait shown")
    long_plant.finish_phase(PHASE)  # the PLC completes while nobody can see it
    server.start()
    view = engine.runtime.wait_for(run_id, 15)
    assert view["status"] == "SUCCESS", view["error"]
    assert long_plant.phase_commands(PHASE) == ["START", "RESET"]


@pytest.mark.parametrize("forward", [True, False], ids=["answer-lost", "request-lost"])
def test_a_hold_whose_write_is_lost_is_resolved_from_the_state(
        long_plant: SimulatedPlant, make_engine: Callable[..., StepEngine], forward: bool) -> None:
    proxy = AnswerDropper(long_plant.servers["plc"].port)
    try:
        sections = sections_for(long_plant)
        sections["devices"]["plc"]["port"] = proxy.port
        engine = make_engine(**sections)
        rt = engine.runtime
        run_id = rt.start("phase_link.charge", {})
        wait_until(lambda: long_plant.phase_state(PHASE) == "RUNNING", message="the phase running")
        proxy.arm(lambda data: len(data) > 7 and data[7] in MODBUS_WRITES, forward=forward)
        rt.send_command(run_id, "HOLD", "sample", actor="op")
        assert proxy.fired.wait(10), "the Hold never went out"
        wait_until(lambda: rt.get_run(run_id, steps=False, events=False)["state"] == "HELD", message="HELD")
        # Answer lost: the PLC took the one Hold. Request lost: it never saw it, and got it once more.
        assert long_plant.phase_commands(PHASE) == ["START", "HOLD"]
        rt.send_command(run_id, "RESUME", "ok", actor="op")
        wait_until(lambda: long_plant.phase_commands(PHASE)[-1] == "RESTART", message="Restart at the PLC")
        long_plant.finish_phase(PHASE)
        view = rt.wait_for(run_id, 15)
        assert view["status"] == "SUCCESS", view["error"]
        assert long_plant.phase_commands(PHASE) == ["START", "HOLD", "RESTART", "RESET"]
        holds = [e["payload"] for e in view["events"] if e["kind"] == "phase_command"
                 and e["payload"]["command"] == "HOLD"]
        assert len(holds) == (1 if forward else 2), holds  # the resend is recorded with why
    finally:
        proxy.close()
