"""Hold on a step's failure (``@workflow(on_step_error="hold")``, or one step's ``@step(on_error=...)``),
on SQLite and PostgreSQL: the run is HELD with the step's error shown, RESUME runs the step again with
fresh attempts, STOP or ABORT raises the error into the workflow (which cleans up), other commands are dropped
as in HELD, and an engine restarted while held waits again instead of executing the step. A step's
own ``on_error`` wins over its workflow's ``on_step_error``, both ways.

Each step appends a line to a file per execution, so the tests count executions, not log lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from exchange._cli.render import render_run
from exchange._engine.execution import waitpoints
from exchange.errors import WorkflowError
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from tests.engine.conftest import Engine
from tests.waiting import holds_for, wait_until


class PumpFault(Exception):
    """The error the failing step raises (a module-level class: it is recorded and raised again as itself)."""


def _executions(folder: str, name: str) -> int:
    path = Path(folder) / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def _note(folder: str, name: str) -> None:
    with (Path(folder) / name).open("a", encoding="utf-8") as out:
        out.write("x\n")


@step(name="hold.dose")
def dose(folder: str) -> str:
    """Fails until the file ``fixed`` exists in ``folder``."""
    _note(folder, "dose")
    if not (Path(folder) / "fixed").exists():
        raise PumpFault(f"pump P-101 tripped (execution {_executions(folder, 'dose')})")
    return "dosed"


@step(name="hold.dose_retried", options={"retries_allowed": True, "max_attempts": 3, "interval_seconds": 0.05,
                                         "backoff_rate": 1.0})
def dose_retried(folder: str) -> str:
    _note(folder, "dose")
    if not (Path(folder) / "fixed").exists():
        raise PumpFault("pump P-101 tripped")
    return "dosed"


@step(name="hold.dose_own", on_error="hold")
def dose_own(folder: str) -> str:
    """As ``dose``, declared to hold on its own."""
    return dose.__wrapped__(folder)  # type: ignore[attr-defined, no-any-return]


@step(name="hold.dose_never_held", on_error="raise")
def dose_never_held(folder: str) -> str:
    """As ``dose``, declared to raise even in a workflow that holds."""
    return dose.__wrapped__(folder)  # type: ignore[attr-defined, no-any-return]


@step(name="hold.prepare")
def prepare(folder: str, gated: bool) -> str:
    """With ``gated``: returns once the file ``go`` exists in ``folder`` (the test's moment)."""
    _note(folder, "prepare")
    if gated:
        wait_until(lambda: (Path(folder) / "go").exists(), 20, interval_s=0.02, message="the test's go")
    return "prepared"


@step(name="hold.cleanup")
def cleanup(folder: str, why: str) -> None:
    _note(folder, "cleanup")
    (Path(folder) / "cleanup_reason").write_text(why)


@workflow(name="hold.batch", on_step_error="hold")
def batch(folder: str, gated: bool = False) -> dict[str, Any]:
    prepare(folder, gated)
    try:
        result = dose(folder)
    except PumpFault as exc:
        cleanup(folder, str(exc))
        raise
    return {"dose": result}


@workflow(name="hold.batch_step_holds")  # the workflow raises; its dose step holds
def batch_step_holds(folder: str) -> dict[str, Any]:
    prepare(folder, False)
    try:
        result = dose_own(folder)
    except PumpFault as exc:
        cleanup(folder, str(exc))
        raise
    return {"dose": result}


@workflow(name="hold.batch_step_raises", on_step_error="hold")  # the workflow holds; its dose step raises
def batch_step_raises(folder: str) -> str:
    prepare(folder, False)
    return dose_never_held(folder)


@workflow(name="hold.batch_retried", on_step_error="hold")
def batch_retried(folder: str) -> str:
    return dose_retried(folder)


@workflow(name="hold.batch_raises")
def batch_raises(folder: str) -> str:
    return dose(folder)


def _held(engine: Engine, run_id: str, executions: int, folder: str) -> dict[str, Any]:
    """Wait until the run is held after ``executions`` executions of the dose step; its view."""
    rt = getWorkflows()
    # The executions are counted before the run is read: the step notes each one before it fails,
    # after the RESUME that let it run was committed, so a HELD read after the count is the new hold
    # (read the other way round, a view from before the RESUME could pass with the old one).
    return wait_until(
        lambda: _executions(folder, "dose") == executions
        and (v := rt.getRun(run_id))["state"] == "HELD" and v["held_on"] is not None and v,
        20, message=lambda: f"run {run_id} held after {executions} executions: {rt.getRun(run_id)['state']}, "
                            f"{_executions(folder, 'dose')} executions")


def _events(view: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in view["events"] if e["kind"] == kind]


def test_a_failed_step_holds_the_run_and_resume_runs_it_again(engine: Engine, tmp_path: Path) -> None:
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch", {"folder": folder})
    view = _held(engine, run_id, 1, folder)
    assert view["status"] == "RUNNING"
    held = view["held_on"]
    assert (held["seq"], held["step"], held["attempts"], held["in_doubt"]) == (2, "hold.dose", 1, False)
    assert held["error"]["type"].endswith("PumpFault")
    assert held["error"]["message"] == "pump P-101 tripped (execution 1)"
    assert held["since"] is not None
    assert view["steps"][-1]["status"] == "HELD"
    assert "HELD ON   step 2 hold.dose since" in render_run(view)
    assert "pump P-101 tripped (execution 1)" in render_run(view)
    # Held: nothing runs the step again on its own.
    assert holds_for(lambda: _executions(folder, "dose") == 1, 0.5)

    rt.sendCommand(run_id, "RESUME", "the pump was reset", actor="anna")
    view = _held(engine, run_id, 2, folder)  # it fails again: held again
    assert view["held_on"]["error"]["message"] == "pump P-101 tripped (execution 2)"

    (tmp_path / "fixed").touch()
    rt.sendCommand(run_id, "RESUME", "breaker closed", actor="anna")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"dose": "dosed"}
    assert view["held_on"] is None
    assert _executions(folder, "dose") == 3 and _executions(folder, "prepare") == 1
    assert _executions(folder, "cleanup") == 0
    assert view["state"] == "RUNNING"
    assert [s["status"] for s in view["steps"]] == ["SUCCESS", "SUCCESS"]
    assert view["steps"][1]["attempts"] == 1  # attempt numbering restarted
    assert len(_events(view, "step_held")) == 2
    # who did it: Exchange held the run (not its creator), anna's RESUMEs let it run again
    creator = view["created_by"]
    assert [(e["actor"], e["payload"]["caused_by"]) for e in _events(view, "step_held")] == [(creator, "exchange")] * 2
    states = [(e["payload"]["state"], e["actor"], e["payload"].get("caused_by"), e["payload"].get("cause"))
              for e in _events(view, "state")]
    resumes = [e["payload"]["message_id"] for e in _events(view, "command")]
    assert states == [("HELD", creator, "exchange", None),
                      ("RUNNING", creator, "anna", {"cmd": "RESUME", "message_id": resumes[0]}),
                      ("HELD", creator, "exchange", None),
                      ("RUNNING", creator, "anna", {"cmd": "RESUME", "message_id": resumes[1]})], states
    accepted = _events(view, "command")
    assert [(e["payload"]["cmd"], e["actor"], e["reason"]) for e in accepted] == [
        ("RESUME", "anna", "the pump was reset"), ("RESUME", "anna", "breaker closed")]


@pytest.mark.parametrize(("cmd", "state"), [("STOP", "STOPPED"), ("ABORT", "ABORTED")])
def test_stop_raises_the_steps_error_into_the_workflow_which_cleans_up(engine: Engine, tmp_path: Path, cmd: str,
                                                                       state: str) -> None:
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch", {"folder": folder})
    _held(engine, run_id, 1, folder)
    rt.sendCommand(run_id, cmd, "batch scrapped", actor="ben")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "ERROR"
    assert view["error"]["type"].endswith("PumpFault")  # the step's own error, as without the hold
    assert view["error"]["message"] == "pump P-101 tripped (execution 1)"
    assert _executions(folder, "cleanup") == 1
    assert (tmp_path / "cleanup_reason").read_text() == "pump P-101 tripped (execution 1)"
    assert _executions(folder, "dose") == 1
    assert view["state"] == state and view["held_on"] is None
    assert [s["status"] for s in view["steps"]] == ["SUCCESS", "ERROR", "SUCCESS"]
    (stop,) = _events(view, "command")
    assert (stop["payload"]["cmd"], stop["actor"], stop["reason"]) == (cmd, "ben", "batch scrapped")
    assert _events(view, "state")[-1]["payload"]["cause"] == {"cmd": cmd, "message_id": stop["payload"]["message_id"]}


def test_an_abort_waiting_with_a_stop_ends_the_hold_as_an_abort(engine: Engine, tmp_path: Path) -> None:
    """Both sent before the hold (the run is in its gated first step): the held run reads them in one
    look, and the harder stop wins whatever the order."""
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch", {"folder": folder, "gated": True})
    wait_until(lambda: _executions(folder, "prepare") == 1, 20, message="the gated step running")
    stop_id = rt.sendCommand(run_id, "STOP", "end of shift", actor="ben")
    abort_id = rt.sendCommand(run_id, "ABORT", "leak at V-101", actor="anna")
    (tmp_path / "go").touch()
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "ERROR" and view["state"] == "ABORTED"
    assert _executions(folder, "cleanup") == 1  # the step's error was raised into the workflow
    (dropped,) = _events(view, "command_dropped")
    assert (dropped["payload"]["cmd"], dropped["payload"]["message_id"], dropped["reason"]) == (
        "STOP", stop_id, "superseded by ABORT received in the same poll")
    (abort,) = _events(view, "command")
    assert (abort["payload"]["message_id"], abort["actor"]) == (abort_id, "anna")


def test_retries_come_first_and_resume_gives_fresh_attempts(engine: Engine, tmp_path: Path) -> None:
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch_retried", {"folder": folder})
    view = _held(engine, run_id, 3, folder)
    assert view["held_on"]["attempts"] == 3
    assert [e["payload"]["attempt"] for e in _events(view, "retry")] == [1, 2]
    rt.sendCommand(run_id, "RESUME")
    view = _held(engine, run_id, 6, folder)  # three fresh attempts, then held again
    assert view["held_on"]["attempts"] == 3
    assert [e["payload"]["attempt"] for e in _events(view, "retry")] == [1, 2, 1, 2]
    (tmp_path / "fixed").touch()
    rt.sendCommand(run_id, "RESUME")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS" and view["result"] == "dosed"
    assert _executions(folder, "dose") == 7
    assert view["steps"][0]["attempts"] == 1


def test_commands_held_does_not_accept_are_dropped(engine: Engine, tmp_path: Path) -> None:
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch", {"folder": folder})
    _held(engine, run_id, 1, folder)
    rt.sendCommand(run_id, "HOLD", "again")
    rt.sendCommand(run_id, "RESET")
    view = wait_until(lambda: len(_events(v := rt.getRun(run_id), "command_dropped")) == 2 and v, 20,
                      message="HOLD and RESET dropped")
    assert [(e["payload"]["cmd"], e["reason"]) for e in _events(view, "command_dropped")] == [
        ("HOLD", "HOLD is not accepted in state HELD"), ("RESET", "RESET is not accepted in state HELD")]
    assert view["state"] == "HELD" and view["held_on"]["seq"] == 2
    assert holds_for(lambda: _executions(folder, "dose") == 1, 0.3)
    (tmp_path / "fixed").touch()
    rt.sendCommand(run_id, "RESUME")
    assert rt.waitFor(run_id, 20)["status"] == "SUCCESS"


def test_a_resume_sent_before_the_hold_does_not_resume_it(engine: Engine, tmp_path: Path) -> None:
    """An early RESUME (sent while the run was running, where it is not accepted) lies in the mailbox
    of a workflow that never receives commands; the hold drops it instead of resuming at once."""
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch", {"folder": folder, "gated": True})
    wait_until(lambda: _executions(folder, "prepare") == 1, 20, message="the run to be in its first step")
    rt.sendCommand(run_id, "RESUME", "too early")
    (tmp_path / "go").touch()
    _held(engine, run_id, 1, folder)
    view = wait_until(lambda: _events(v := rt.getRun(run_id), "command_dropped") and v, 20)
    (dropped,) = _events(view, "command_dropped")
    assert dropped["payload"]["cmd"] == "RESUME" and "sent before step 'hold.dose'" in dropped["reason"]
    assert holds_for(lambda: _executions(folder, "dose") == 1 and rt.getRun(run_id)["state"] == "HELD", 0.5)


def test_a_held_run_waits_again_after_a_restart_without_executing_the_step(engine: Engine, tmp_path: Path) -> None:
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch", {"folder": folder})
    _held(engine, run_id, 1, folder)
    engine.restart()
    rt = getWorkflows()
    wait_until(lambda: rt.getRun(run_id)["executions"] == 2, 20, message="the restarted engine to resume the run")
    assert holds_for(lambda: _executions(folder, "dose") == 1 and rt.getRun(run_id)["state"] == "HELD", 0.5)
    view = rt.getRun(run_id)
    assert view["held_on"]["error"]["message"] == "pump P-101 tripped (execution 1)"
    # STOP on the restarted engine: the recorded error is raised as its own class.
    rt.sendCommand(run_id, "STOP")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("PumpFault")
    assert _executions(folder, "cleanup") == 1 and _executions(folder, "dose") == 1


def test_a_held_run_waits_without_reading_the_store(engine: Engine, tmp_path: Path) -> None:
    """Held, the run waits like recvCommand: the mail watcher wakes it, it does not poll the mailbox."""
    assert engine.runtime.mail_watched
    rt = getWorkflows()
    folder = str(tmp_path)
    points: list[str] = []
    run_id = ""

    def note(point: str, run: str, topic: str) -> None:
        if run == run_id and topic == "cmd":
            points.append(point)

    previous = waitpoints.install(note)
    try:
        run_id = rt.start("hold.batch", {"folder": folder})
        _held(engine, run_id, 1, folder)
        wait_until(lambda: points and points[-1] == waitpoints.SLEEP, 10, message="the held run asleep")
        looked = points.count(waitpoints.READ)
        assert holds_for(lambda: points.count(waitpoints.READ) == looked, 1.5), "a held run polled its mailbox"
        (tmp_path / "fixed").touch()
        rt.sendCommand(run_id, "RESUME")
        assert rt.waitFor(run_id, 20)["status"] == "SUCCESS"
        assert points.count(waitpoints.READ) == looked + 1  # woken once, by the RESUME
    finally:
        waitpoints.install(previous)


def test_without_hold_a_failed_step_ends_the_run(engine: Engine, tmp_path: Path) -> None:
    rt = getWorkflows()
    view = rt.waitFor(rt.start("hold.batch_raises", {"folder": str(tmp_path)}), 20)
    assert view["status"] == "ERROR" and view["held_on"] is None
    assert view["steps"][0]["status"] == "ERROR"


def test_cancel_ends_a_held_run(engine: Engine, tmp_path: Path) -> None:
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch", {"folder": folder})
    _held(engine, run_id, 1, folder)
    rt.cancel(run_id, "shift ends")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "CANCELLED" and view["held_on"] is None
    assert _executions(folder, "cleanup") == 0

    # a retry of the cancelled run takes it up where it was held: the failed step runs again at once
    (tmp_path / "fixed").touch()
    rt.retry(run_id, "pump replaced")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"dose": "dosed"} and view["state"] != "HELD"
    assert (_executions(folder, "prepare"), _executions(folder, "dose")) == (1, 2)


@pytest.mark.parametrize("value", ["bogus", "Hold", None, 1])
def test_an_unknown_on_step_error_is_refused_at_decoration(value: Any) -> None:
    def bad() -> None:
        return None

    with pytest.raises(WorkflowError) as refused:
        workflow(name="hold.bad", on_step_error=value)(bad)
    assert str(refused.value) == (f"workflow 'hold.bad': on_step_error must be one of 'raise', 'hold', got {value!r}")


def test_a_step_declared_on_error_hold_holds_a_workflow_that_raises(engine: Engine, tmp_path: Path) -> None:
    """``@step(on_error="hold")`` in a workflow without ``on_step_error``: held on failure, held again
    after a restart without executing the step, and RESUME runs it again with fresh attempts."""
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch_step_holds", {"folder": folder})
    view = _held(engine, run_id, 1, folder)
    held = view["held_on"]
    assert (held["seq"], held["step"], held["attempts"]) == (2, "hold.dose_own", 1)
    assert held["error"]["message"] == "pump P-101 tripped (execution 1)"
    assert view["status"] == "RUNNING" and len(_events(view, "step_held")) == 1

    engine.restart()
    rt = getWorkflows()
    wait_until(lambda: rt.getRun(run_id)["executions"] == 2, 20, message="the restarted engine to resume the run")
    assert holds_for(lambda: _executions(folder, "dose") == 1 and rt.getRun(run_id)["state"] == "HELD", 0.5)

    rt.sendCommand(run_id, "RESUME", "pump reset")
    _held(engine, run_id, 2, folder)  # ran again, failed again: held again
    (tmp_path / "fixed").touch()
    rt.sendCommand(run_id, "RESUME", "breaker closed")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"dose": "dosed"} and view["held_on"] is None
    assert (_executions(folder, "prepare"), _executions(folder, "dose"), _executions(folder, "cleanup")) == (1, 3, 0)
    assert view["steps"][1]["attempts"] == 1


def test_stop_raises_the_error_of_a_step_that_holds_on_its_own(engine: Engine, tmp_path: Path) -> None:
    rt = getWorkflows()
    folder = str(tmp_path)
    run_id = rt.start("hold.batch_step_holds", {"folder": folder})
    _held(engine, run_id, 1, folder)
    rt.sendCommand(run_id, "STOP", "batch scrapped")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("PumpFault")
    assert view["state"] == "STOPPED"
    assert (tmp_path / "cleanup_reason").read_text() == "pump P-101 tripped (execution 1)"
    assert [s["status"] for s in view["steps"]] == ["SUCCESS", "ERROR", "SUCCESS"]


def test_a_step_declared_on_error_raise_raises_in_a_workflow_that_holds(engine: Engine, tmp_path: Path) -> None:
    rt = getWorkflows()
    folder = str(tmp_path)
    view = rt.waitFor(rt.start("hold.batch_step_raises", {"folder": folder}), 20)
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("PumpFault")
    assert view["held_on"] is None and _events(view, "step_held") == []
    assert [s["status"] for s in view["steps"]] == ["SUCCESS", "ERROR"]
    assert _executions(folder, "dose") == 1


@pytest.mark.parametrize("value", ["bogus", "Hold", "", 1, True])
def test_an_unknown_on_error_of_a_step_is_refused_at_decoration(value: Any) -> None:
    def bad() -> None:
        return None

    with pytest.raises(WorkflowError) as refused:
        step(name="hold.bad_step", on_error=value)(bad)
    assert str(refused.value) == f"step hold.bad_step: on_error must be one of 'raise', 'hold', got {value!r}"
