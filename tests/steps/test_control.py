"""``control.checkpoint`` in real runs: HOLD makes safe and waits, RESUME restarts, STOP raises
StopRequested, ABORT AbortRequested (a StopRequested too); a run held across a restart is held again
without making safe twice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exchange.errors import AbortRequested, InvalidArgument, OutsideRunError, StopRequested
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import control
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until


@step(name="control_test.mark")
def mark(log: str, text: str) -> str:
    """A side effect per call, counted in a file (a replayed step does not write it again)."""
    with open(log, "a", encoding="utf-8") as f:
        f.write(text + "\n")
    return text


@workflow(name="control_test.loop")
def loop(log: str, state: str = "RUNNING", catch: bool = True) -> Any:
    rt = getWorkflows()
    rt.setState(state)
    resumes = []
    try:
        while True:
            cmd = control.checkpoint(on_hold=lambda: mark(log, "hold"), on_resume=lambda: mark(log, "resume"),
                                     wait_ms=100, state=state)
            if cmd is not None:
                resumes.append(cmd["reason"])
    except StopRequested as stop:
        if not catch:
            raise
        aborted = isinstance(stop, AbortRequested)
        mark(log, "abort" if aborted else "stop")
        rt.setState("ABORTED" if aborted else "STOPPED")
        return {"resumes": resumes, "stop": stop.command["reason"]}


@workflow(name="control_test.phase_as_state")
def phase_as_state() -> None:
    control.checkpoint(state="FILLING")


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine]) -> StepEngine:
    return make_engine()


def marks(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def state_of(engine: StepEngine, run_id: str) -> str:
    state: str = engine.runtime.get_run(run_id, steps=False, events=False)["state"]
    return state


def test_hold_makes_safe_and_waits_resume_restarts_stop_raises(engine: StepEngine, tmp_path: Path) -> None:
    rt, log = engine.runtime, tmp_path / "log"
    run_id = rt.start("control_test.loop", {"log": str(log)})
    wait_until(lambda: state_of(engine, run_id) == "RUNNING", message="RUNNING")
    rt.send_command(run_id, "HOLD", "take a sample", actor="op")
    wait_until(lambda: state_of(engine, run_id) == "HELD", message="HELD")
    assert marks(log) == ["hold"]  # made safe before HELD was reported
    assert rt.get_run(run_id)["progress"]["message"] == "held: take a sample"

    rt.send_command(run_id, "HOLD", "again")  # HELD does not accept it: dropped, still held
    wait_until(lambda: [e for e in rt.get_run(run_id)["events"] if e["kind"] == "command_dropped"],
               message="the second HOLD dropped")
    assert marks(log) == ["hold"] and state_of(engine, run_id) == "HELD"

    rt.send_command(run_id, "RESUME", "sample OK")
    wait_until(lambda: state_of(engine, run_id) == "RUNNING", message="RUNNING again")
    assert marks(log) == ["hold", "resume"]
    rt.send_command(run_id, "STOP", "end of shift", actor="op")
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"resumes": ["sample OK"], "stop": "end of shift"}
    assert view["state"] == "STOPPED"
    assert marks(log) == ["hold", "resume", "stop"]


@pytest.mark.parametrize(("cmd", "state"), [("STOP", "STOPPED"), ("ABORT", "ABORTED")])
def test_stop_or_abort_while_held_raises_without_resuming(engine: StepEngine, tmp_path: Path, cmd: str,
                                                          state: str) -> None:
    rt, log = engine.runtime, tmp_path / "log"
    run_id = rt.start("control_test.loop", {"log": str(log), "state": "starting"})
    wait_until(lambda: state_of(engine, run_id) == "STARTING", message="STARTING")
    rt.send_command(run_id, "HOLD")
    wait_until(lambda: state_of(engine, run_id) == "HELD", message="HELD")
    assert rt.get_run(run_id)["progress"]["message"] == "held: no reason given"
    rt.send_command(run_id, cmd, "leak")
    view = rt.wait_for(run_id, 20)
    assert view["result"] == {"resumes": [], "stop": "leak"}
    assert view["state"] == state
    assert marks(log) == ["hold", cmd.lower()]  # on_resume never ran


def test_resume_returns_to_the_state_given(engine: StepEngine, tmp_path: Path) -> None:
    rt, log = engine.runtime, tmp_path / "log"
    run_id = rt.start("control_test.loop", {"log": str(log), "state": "STARTING"})
    wait_until(lambda: state_of(engine, run_id) == "STARTING", message="STARTING")
    rt.send_command(run_id, "HOLD")
    wait_until(lambda: state_of(engine, run_id) == "HELD", message="HELD")
    rt.send_command(run_id, "RESUME")
    wait_until(lambda: marks(log) == ["hold", "resume"], message="resumed")
    wait_until(lambda: state_of(engine, run_id) == "STARTING", message="STARTING after RESUME")
    rt.send_command(run_id, "STOP")
    assert rt.wait_for(run_id, 20)["status"] == "SUCCESS"


def test_a_run_held_across_a_restart_is_held_again_without_making_safe_twice(
    engine: StepEngine, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    run_id = engine.runtime.start("control_test.loop", {"log": str(log)})
    wait_until(lambda: state_of(engine, run_id) == "RUNNING", message="RUNNING")
    engine.runtime.send_command(run_id, "HOLD")
    wait_until(lambda: state_of(engine, run_id) == "HELD", message="HELD")
    assert engine.restart() == [run_id]
    wait_until(lambda: engine.runtime.store.runs.get(run_id).executions == 2, message="the second execution")
    engine.runtime.send_command(run_id, "RESUME")
    wait_until(lambda: marks(log) == ["hold", "resume"], message="resumed after the restart")
    engine.runtime.send_command(run_id, "STOP")
    assert engine.runtime.wait_for(run_id, 20)["status"] == "SUCCESS"
    assert marks(log) == ["hold", "resume", "stop"]


@pytest.mark.parametrize(("cmd", "error"), [("STOP", "StopRequested"), ("ABORT", "AbortRequested")])
def test_an_uncaught_stop_ends_the_run_in_error_naming_the_sender(engine: StepEngine, tmp_path: Path, cmd: str,
                                                                  error: str) -> None:
    rt = engine.runtime
    run_id = rt.start("control_test.loop", {"log": str(tmp_path / "log"), "catch": False})
    wait_until(lambda: state_of(engine, run_id) == "RUNNING", message="RUNNING")
    rt.send_command(run_id, cmd, "end of shift", actor="op@hmi")
    view = rt.wait_for(run_id, 20)
    assert view["status"] == "ERROR"
    assert view["error"] == {"type": error, "message": f"{cmd} from op@hmi: end of shift"}


def test_a_state_that_refuses_hold_is_refused_before_anything_is_received(engine: StepEngine) -> None:
    view = engine.run("control_test.phase_as_state")
    assert view["status"] == "ERROR" and view["error"]["type"] == "InvalidArgument"
    expected = "state must be one that accepts HOLD (RESUMING, RUNNING, STARTING), got 'FILLING'"
    assert expected in view["error"]["message"]
    assert [s for s in view["steps"] if s["name"] == "exchange.recvCommand"] == []


@pytest.mark.parametrize(("kwargs", "names"), [
    ({"wait_ms": -1}, "wait_ms"),
    ({"wait_ms": float("nan")}, "wait_ms"),
    ({"on_hold": "close_inlet"}, "on_hold"),
    ({"on_resume": 5}, "on_resume"),
    ({"state": None}, "state"),
])
def test_bad_arguments_are_refused_first_even_outside_a_run(kwargs: dict[str, Any], names: str) -> None:
    with pytest.raises(InvalidArgument, match=f"control.checkpoint: {names}"):
        control.checkpoint(**kwargs)


def test_outside_a_run_it_says_so() -> None:
    with pytest.raises(OutsideRunError, match="recvCommand"):
        control.checkpoint()
