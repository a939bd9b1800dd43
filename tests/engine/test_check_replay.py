"""``Runtime.check_replay`` (``exchange check-replay``): runs in flight on SQLite and PostgreSQL, waiting on a
command, on a prompt and on a unit, replayed against changed code without executing anything. Renaming,
inserting or removing a step, changing a branch, returning early, changing the signature and dropping
the workflow are each reported where they happen; a change guarded by ``rt.patched`` replays."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.definition import REGISTRY, Registry, WorkflowDef
from exchange._engine.operator.runtime import Runtime
from exchange.errors import FatalError, InvalidArgument
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import operator, units
from exchange.workflows.testing import HistoryDiverges, replay_history
from tests.engine.conftest import Engine
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

FIELDS = {"ok": {"type": "bool"}}


@step(name="chk.fill")
def fill(litres: int) -> dict[str, int]:
    return {"litres": litres}


@step(name="chk.mix")
def mix(litres: int) -> int:
    return litres * 2


@step(name="chk.heat")
def heat(litres: int) -> int:
    return litres + 1


@step(name="chk.fill_v2")
def fill_v2(litres: int) -> dict[str, int]:
    return {"litres": litres}


@step(name="chk.weigh")
def weigh(litres: int, unit: str = "kg") -> float:
    return float(litres)


# The code the runs are recorded by: two steps (the second on a branch), then a wait on a command.
@workflow(name="chk.command")
def on_command(litres: int = 10) -> str:
    rt = getWorkflows()
    fill(litres)
    if litres > 5:
        mix(litres)
    else:
        heat(litres)
    rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


@workflow(name="chk.prompt")
def on_prompt(litres: int = 10) -> Any:
    fill(litres)
    operator.prompt("ok", "Is the tank clean?", fields=FIELDS)
    heat(litres)
    return operator.prompt("again", "And now?", fields=FIELDS)


def renamed(litres: int = 10) -> str:
    rt = getWorkflows()
    fill_v2(litres)
    mix(litres)
    rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


def inserted(litres: int = 10) -> str:
    rt = getWorkflows()
    fill(litres)
    weigh(litres, unit="t")
    mix(litres)
    rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


def removed(litres: int = 10) -> str:
    rt = getWorkflows()
    fill(litres)
    rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


def branch_changed(litres: int = 10) -> str:
    rt = getWorkflows()
    fill(litres)
    if litres > 50:
        mix(litres)
    else:
        heat(litres)
    rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


def patched_insert(litres: int = 10) -> str:
    rt = getWorkflows()
    fill(litres)
    if rt.patched("weigh-first"):
        weigh(litres)
    if litres > 5:
        mix(litres)
    else:
        heat(litres)
    rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


def returns_early(litres: int = 10) -> str:
    fill(litres)
    return "done"


def typed_differently(litres: str = "10") -> str:
    return "done"


def prompt_then_more(litres: int = 10) -> Any:
    fill(litres)
    answer = operator.prompt("ok", "Is the tank clean?", fields=FIELDS)
    if not answer["values"]["ok"]:
        return None
    heat(litres)
    return operator.prompt("again", "And now?", fields=FIELDS)


def checker(engine: Engine | StepEngine, **workflows: Any) -> Runtime:
    """A runtime over the engine's store whose registry holds ``workflows`` (name -> function): the
    code "on disk now", while the engine's gateway goes on running the old code."""
    registry = Registry()
    for name, fn in workflows.items():
        registry.add(WorkflowDef(name=name, fn=fn, module=f"new.{fn.__name__}", code_version=f"new-{fn.__name__}",
                                 description=""))
    return Runtime(engine.runtime.config, store=engine.runtime.store, registry=registry)


def steps_of(engine: Engine | StepEngine, run_id: str) -> list[str]:
    return [s["name"] for s in getWorkflows().getRun(run_id)["steps"]]


def start_waiting_on_command(engine: Engine, litres: int = 10) -> str:
    run_id = getWorkflows().start("chk.command", {"litres": litres})
    wait_until(lambda: len(steps_of(engine, run_id)) == 2, 20, message="the run's two steps")
    return run_id


def test_runs_waiting_on_a_command_replay_or_diverge_where_the_code_changed(engine: Engine) -> None:
    run_id = start_waiting_on_command(engine)
    store = engine.runtime.store
    row_before, steps_before = store.runs.get(run_id), store.steps.load(run_id)

    same = checker(engine, **{"chk.command": on_command}).check_replay([run_id])
    assert [(o.status, o.steps_replayed, o.ends_at, o.next_call) for o in same] == [
        ("ok", 2, 3, "exchange.recvCommand")]

    def divergence(fn: Any) -> dict[str, Any]:
        (outcome,) = checker(engine, **{"chk.command": fn}).check_replay([run_id[:8]])
        assert outcome.status == "diverges", outcome
        assert outcome.divergence is not None
        return outcome.divergence.as_dict()

    found = divergence(renamed)
    assert (found["kind"], found["seq"], found["recorded"]["name"], found["called"]) == (
        "step", 1, "chk.fill", "chk.fill_v2")
    assert found["recorded"]["output"] == "{'litres': int}" and found["arguments"] == "(int)"
    found = divergence(inserted)
    assert (found["kind"], found["seq"], found["recorded"]["name"], found["called"], found["arguments"]) == (
        "step", 2, "chk.mix", "chk.weigh", "(int, unit=str)")
    found = divergence(removed)
    assert (found["kind"], found["seq"], found["recorded"]["name"], found["called"]) == (
        "step", 2, "chk.mix", "exchange.recvCommand")
    found = divergence(branch_changed)
    assert (found["kind"], found["seq"], found["recorded"]["name"], found["called"]) == (
        "step", 2, "chk.mix", "chk.heat")
    found = divergence(returns_early)
    assert (found["kind"], found["seq"], found["now"]) == ("returned_early", 2, "the workflow returns")
    assert "chk.mix" in found["message"]
    found = divergence(typed_differently)
    assert found["kind"] == "signature" and "litres" in found["now"]
    (gone,) = checker(engine, other=returns_early).check_replay([run_id])
    assert gone.status == "diverges" and gone.divergence is not None and gone.divergence.kind == "no_workflow"

    (guarded,) = checker(engine, **{"chk.command": patched_insert}).check_replay([run_id])
    assert (guarded.status, guarded.ends_at, guarded.next_call) == ("ok", 3, "exchange.recvCommand")

    # Nothing was written, and the run still waits in its gateway on the old code.
    assert store.runs.get(run_id) == row_before and store.steps.load(run_id) == steps_before
    getWorkflows().sendCommand(run_id, "STOP")
    assert getWorkflows().waitFor(run_id, 20)["status"] == "SUCCESS"


def test_a_patched_run_replays_and_a_patch_removed_too_early_diverges(engine: Engine) -> None:
    engine.runtime.registry.add(WorkflowDef(name="chk.patched", fn=patched_insert, module=__name__,
                                            code_version="patched", description=""))
    run_id = getWorkflows().start("chk.patched", {"litres": 10})
    wait_until(lambda: len(steps_of(engine, run_id)) == 4, 20, message="the run's four steps")
    assert steps_of(engine, run_id)[1] == "exchange.patched:weigh-first"
    (ok,) = checker(engine, **{"chk.patched": patched_insert}).check_replay([run_id])
    assert (ok.status, ok.steps_replayed, ok.ends_at) == ("ok", 4, 5)
    (early,) = checker(engine, **{"chk.patched": on_command}).check_replay([run_id])
    assert early.divergence is not None
    assert (early.divergence.kind, early.divergence.seq, early.divergence.called) == ("patched", 2, "chk.mix")
    getWorkflows().cancel(run_id)


def test_runs_waiting_on_a_prompt_and_all_active(engine: Engine) -> None:
    rt = getWorkflows()
    first = rt.start("chk.prompt", {"litres": 3})
    wait_until(lambda: rt.getRun(first)["prompt"], 20, message="the first prompt")
    second = rt.start("chk.prompt", {"litres": 4})
    wait_until(lambda: rt.getRun(second)["prompt"], 20, message="the second run's prompt")
    rt.answerPrompt(second, "ok", {"ok": False}, actor="op")
    wait_until(lambda: (rt.getRun(second)["prompt"] or {}).get("key") == "again", 20, message="the next prompt")
    command = start_waiting_on_command(engine)

    outcomes = checker(engine, **{"chk.prompt": on_prompt, "chk.command": on_command}).check_replay(all_active=True)
    assert [(o.run_id, o.status, o.ends_at, o.next_call) for o in outcomes] == [
        (first, "ok", 2, "exchange.prompt"), (second, "ok", 4, "exchange.prompt"),
        (command, "ok", 3, "exchange.recvCommand")]
    # The new code returns when the answer was no: the second run, answered no, has steps left.
    changed = checker(engine, **{"chk.prompt": prompt_then_more, "chk.command": on_command})
    by_run = {o.run_id: o for o in changed.check_replay(all_active=True, since=None)}
    assert by_run[first].status == "ok" and by_run[command].status == "ok"
    assert by_run[second].divergence is not None and by_run[second].divergence.kind == "returned_early"
    for run_id in (first, second, command):
        rt.cancel(run_id)


@pytest.mark.parametrize("litres", [3])
def test_a_run_that_took_the_other_branch_replays_where_the_first_diverged(engine: Engine, litres: int) -> None:
    run_id = start_waiting_on_command(engine, litres)
    (outcome,) = checker(engine, **{"chk.command": branch_changed}).check_replay([run_id])
    assert outcome.status == "ok", outcome
    getWorkflows().cancel(run_id)


@step(name="chk.refused", options={"max_attempts": 1})
def refused(litres: int) -> None:
    raise FatalError(f"{litres} litres is too much")


@workflow(name="chk.caught")
def caught(litres: int = 10) -> str:
    try:
        refused(litres)
    except FatalError:  # replayed from the file, the recorded error is rebuilt as its class
        fill(litres)
    getWorkflows().recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


def test_an_exported_history_replays_from_its_file_and_a_change_fails_the_test(
    sqlite_engine: Engine, tmp_path: Path,
) -> None:
    rt = getWorkflows()
    run_id = rt.start("chk.caught", {"litres": 900})
    wait_until(lambda: len(steps_of(sqlite_engine, run_id)) == 2, 20, message="the run's two steps")
    document = sqlite_engine.runtime.export_run(run_id[:8])
    assert [(s["name"], s["status"], (s["error"] or {}).get("type")) for s in document["steps"]] == [
        ("chk.refused", "ERROR", "exchange.errors.FatalError"), ("chk.fill", "SUCCESS", None)]
    path = tmp_path / "caught.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert replay_history(path)["status"] == "ok"

    original = REGISTRY.get("chk.caught")
    REGISTRY.add(dataclasses.replace(original, fn=lambda litres=10: renamed(litres)))  # the code is changed
    try:
        with pytest.raises(HistoryDiverges) as raised:
            replay_history(path)
    finally:
        REGISTRY.add(original)
    message = str(raised.value)
    assert f"run {run_id} of chk.caught diverges at sequence 1 [step]" in message
    assert "recorded chk.refused (ERROR); now calls chk.fill_v2 with (int)" in message
    assert raised.value.outcome["divergence"]["seq"] == 1

    path.write_text(json.dumps({**document, "version": 99}), encoding="utf-8")
    with pytest.raises(InvalidArgument, match="version 99; this Exchange reads version 1"):
        replay_history(path)
    rt.cancel(run_id)


@workflow(name="chk.unit")
def on_unit(litres: int = 10) -> str:
    rt = getWorkflows()
    fill(litres)
    with units.acquire("R1"):
        mix(litres)
        rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


def unit_renamed(litres: int = 10) -> str:
    rt = getWorkflows()
    fill(litres)
    with units.acquire("R1"):
        heat(litres)  # was chk.mix
        rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"


@pytest.fixture
def unit_engine(tmp_path: Path) -> Iterator[StepEngine]:
    """An engine on SQLite with one unit, R1 (``[units.R1]``)."""
    engine = StepEngine(tmp_path, {"units": {"R1": {"class": "reactor"}}})
    yield engine
    engine.close()


def test_runs_holding_and_waiting_for_a_unit_replay_and_a_step_renamed_after_the_grant_diverges(
    unit_engine: StepEngine,
) -> None:
    engine = unit_engine
    rt = getWorkflows()
    holder = rt.start("chk.unit", {"litres": 10})
    wait_until(lambda: steps_of(engine, holder) == ["chk.fill", "units.acquire", "chk.mix"], 20,
               message="the first run holding R1 and waiting on a command")
    waiter = rt.start("chk.unit", {"litres": 4})
    wait_until(lambda: [r.run_id for r in engine.runtime.store.units.waiting()] == [waiter], 20,
               message="the second run waiting for R1")
    store = engine.runtime.store
    before = [(store.runs.get(run_id), store.steps.load(run_id)) for run_id in (holder, waiter)]
    holders_before = store.units.holders()

    same = checker(engine, **{"chk.unit": on_unit}).check_replay([holder, waiter])
    assert [(o.run_id, o.status, o.ends_at, o.next_call) for o in same] == [
        (holder, "ok", 4, "exchange.recvCommand"), (waiter, "ok", 2, "units.acquire")], same

    changed = {o.run_id: o for o in checker(engine, **{"chk.unit": unit_renamed}).check_replay([holder, waiter])}
    found = changed[holder].divergence
    assert found is not None and (found.kind, found.seq, found.called) == ("step", 3, "chk.heat")
    assert found.recorded is not None and found.recorded["name"] == "chk.mix"
    assert changed[waiter].status == "ok"  # its history ends at the acquire, before the renamed step

    # Nothing written: the rows, the steps and who holds R1 are as they were.
    assert [(store.runs.get(run_id), store.steps.load(run_id)) for run_id in (holder, waiter)] == before
    assert store.units.holders() == holders_before
    rt.sendCommand(holder, "STOP")
    assert rt.waitFor(holder, 20)["status"] == "SUCCESS"
    wait_until(lambda: rt.getRun(waiter)["state"] == "RUNNING" and len(steps_of(engine, waiter)) == 3, 20,
               message="the second run granted R1")
    rt.cancel(waiter)
