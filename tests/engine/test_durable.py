"""Durable execution in one process: recording, replay after a restart, non-determinism, outputs."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from exchange._engine.definition.registry import REGISTRY, WorkflowDef
from exchange._engine.execution.context import current_run
from exchange.errors import (
    DuplicateWorkflow,
    FatalError,
    InvalidParams,
    OutsideRunError,
    UnknownRun,
    UnknownWorkflow,
)
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from exchange.workflows.steps.sleep import sleep_chunked
from tests.engine.conftest import Engine
from tests.waiting import wait_until

CALLS: Counter[str] = Counter()
FLAGS: dict[str, Any] = {"second_step": "durable.b"}
LOOPS: Counter[str] = Counter()  # loops made by each idle_loop run, replays included


@step(name="durable.add")
def add(a: int, b: int) -> int:
    CALLS["add"] += 1
    return a + b


@step(name="durable.fail_fatal")
def fail_fatal(text: str) -> None:
    CALLS["fail_fatal"] += 1
    raise FatalError(f"refused: {text}")


@step(name="durable.not_json")
def not_json() -> object:
    return {"when": threading.Lock()}


@step(name="durable.holds_itself")
def holds_itself() -> object:
    value: list[object] = []
    value.append(value)
    return value


@step(name="durable.too_deep")
def too_deep() -> object:
    value: list[object] = []
    inner = value
    for _ in range(100_000):  # deeper than the interpreter's recursion limit
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    return value


@step(name="durable.huge")
def huge() -> str:
    return "x" * 2_000_000


@workflow(name="durable.sum")
def sum_workflow(n: int = 3) -> dict[str, int]:
    total = 0
    for i in range(n):
        total = add(total, i)
    return {"total": total}


@workflow(name="durable.wait_after_steps")
def wait_after_steps(n: int = 3) -> dict[str, Any]:
    """Steps, then a wait for a command: a restart in the wait replays the steps without running them."""
    rt = getWorkflows()
    total = 0
    for i in range(n):
        total = add(total, i)
    try:
        fail_fatal("first")
    except FatalError as exc:
        caught = str(exc)
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.05)
        if cmd:
            return {"total": total, "caught": caught, "cmd": cmd["cmd"]}


@step(name="durable.a")
def step_a() -> str:
    return "a"


@step(name="durable.b")
def step_b() -> str:
    return "b"


@workflow(name="durable.changing")
def changing() -> str:
    rt = getWorkflows()
    step_a() if FLAGS["second_step"] == "durable.a" else step_b()
    while rt.recvCommand("RUNNING", timeoutSeconds=0.05) is None:
        pass
    return "done"


@workflow(name="durable.bad_output")
def bad_output(step_name: str) -> None:
    {"durable.not_json": not_json, "durable.holds_itself": holds_itself, "durable.too_deep": too_deep}[step_name]()


@workflow(name="durable.huge_output")
def huge_output() -> None:
    huge()


def current_run_id() -> str:
    ctx = current_run()
    assert ctx is not None
    return ctx.run_id


@workflow(name="durable.idle_loop")
def idle_loop(sleep_ms: int = 50) -> int:
    """Polls and sleeps without steps until a STOP arrives; returns how many loops it made."""
    rt = getWorkflows()
    loops = 0
    while True:
        loops += 1
        LOOPS[current_run_id()] += 1
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.01)
        if cmd and cmd["cmd"] == "STOP":
            return loops
        sleep_chunked(total_ms=sleep_ms, chunk_ms=10)


@workflow(name="durable.progress_and_events")
def progress_and_events() -> str:
    rt = getWorkflows()
    for i in range(5):
        rt.progress(f"step {i + 1}/5", {"i": i})
    rt.setEvent("ready", {"at": 5})
    return "ok"


def test_steps_are_recorded_and_the_result_stored(engine: Engine) -> None:
    CALLS.clear()
    rt = getWorkflows()
    run_id = rt.start("durable.sum", {"n": 4})
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"total": 6}
    assert [s["seq"] for s in view["steps"]] == [1, 2, 3, 4]
    assert [s["output"] for s in view["steps"]] == [0, 1, 3, 6]
    assert all(s["status"] == "SUCCESS" and s["attempts"] == 1 and s["name"] == "durable.add" for s in view["steps"])
    assert CALLS["add"] == 4
    statuses = [e["payload"]["status"] for e in view["events"] if e["kind"] == "status"]
    assert statuses == ["ENQUEUED", "RUNNING", "SUCCESS"]


def test_restart_replays_recorded_steps_without_running_them(engine: Engine) -> None:
    CALLS.clear()
    run_id = getWorkflows().start("durable.wait_after_steps", {"n": 3})
    wait_until(lambda: len(engine.runtime.get_run(run_id)["steps"]) == 4, message="4 recorded steps")
    assert CALLS == Counter({"add": 3, "fail_fatal": 1})

    assert engine.restart() == [run_id]
    getWorkflows().sendCommand(run_id, "STOP", "done testing")
    view = getWorkflows().waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == {"total": 3, "caught": "refused: first", "cmd": "STOP"}
    # Replay returned the recorded outputs and re-raised the recorded error: nothing ran again.
    assert CALLS == Counter({"add": 3, "fail_fatal": 1})
    assert view["executions"] == 2


def test_changed_code_under_a_running_run_is_a_non_determinism_error(sqlite_engine: Engine) -> None:
    FLAGS["second_step"] = "durable.a"
    run_id = getWorkflows().start("durable.changing")
    wait_until(lambda: sqlite_engine.runtime.get_run(run_id)["steps"], message="first step")
    FLAGS["second_step"] = "durable.b"
    try:
        sqlite_engine.restart()
        # Held on its code (execution/code_hold.py), not failed: STOP ends it with the divergence.
        wait_until(lambda: sqlite_engine.runtime.get_run(run_id)["state"] == "HELD", 20, message="held")
        getWorkflows().sendCommand(run_id, "STOP")
        view = getWorkflows().waitFor(run_id, 20)
    finally:
        FLAGS["second_step"] = "durable.a"
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "NonDeterminismError"
    message = view["error"]["message"]
    assert "step 1" in message and "recorded durable.a" in message and "calls durable.b" in message


@pytest.mark.parametrize("step_name", ["durable.not_json", "durable.holds_itself", "durable.too_deep"])
def test_a_step_output_that_is_not_json_fails_at_the_call(sqlite_engine: Engine, step_name: str) -> None:
    view = getWorkflows().waitFor(getWorkflows().start("durable.bad_output", {"step_name": step_name}), 20)
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "StepOutputError"
    assert step_name in view["error"]["message"] and "JSON" in view["error"]["message"]
    assert view["steps"][0]["status"] == "ERROR"


def test_a_step_output_over_the_limit_says_to_store_data_elsewhere(sqlite_engine: Engine) -> None:
    view = getWorkflows().waitFor(getWorkflows().start("durable.huge_output"), 20)
    assert view["status"] == "ERROR"
    assert view["error"]["type"] == "OutputTooLarge"
    assert "store large data elsewhere" in view["error"]["message"]


def test_idle_polls_and_short_sleeps_write_nothing_and_the_run_goes_on_after_restart(engine: Engine) -> None:
    """A loop of idle polls and short sleeps leaves no step row and does not even update the run's
    row (its answers steer nothing until a side effect); after a restart it runs on from its last
    recorded point."""
    run_id = getWorkflows().start("durable.idle_loop", {"sleep_ms": 20})
    store = engine.runtime.store
    wait_until(lambda: LOOPS[run_id] >= 20, message="20 loops")
    before = store.runs.get(run_id)
    assert store.steps.load(run_id) == {}  # no rows for idle polls and sleeps
    assert before is not None and before.quiet_ops is None and before.quiet_wake_at is None, before
    engine.restart()
    getWorkflows().sendCommand(run_id, "STOP")
    view = getWorkflows().waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] >= 1
    assert [s["name"] for s in view["steps"]] == ["exchange.recvCommand"]
    # The polls and sleeps of the loops made after the restart, before the poll that got STOP:
    assert engine.runtime.store.steps.load(run_id)[1].skipped_ops == 2 * (view["result"] - 1)


def test_a_long_sleep_records_its_wake_up_time_and_a_restart_wakes_no_earlier(engine: Engine) -> None:
    run_id = getWorkflows().start("durable.idle_loop", {"sleep_ms": 3000})
    store = engine.runtime.store
    rec = wait_until(lambda: (lambda r: r if r is not None and r.quiet_wake_at is not None else None)(
        store.runs.get(run_id)), message="a recorded sleep")
    assert rec is not None and rec.quiet_ops == 1 and rec.quiet_wake_at is not None  # after one idle poll
    engine.restart()
    wait_until(lambda: LOOPS[run_id] >= 3, 20, message="the second loop after the restart's replay")
    # The replay answered the recorded poll at once and slept only what was left of the 3 s, so the
    # loop reached its next poll no earlier than the recorded wake-up time.
    assert engine.runtime.store.clock.now() >= rec.quiet_wake_at - 0.05
    getWorkflows().sendCommand(run_id, "STOP")
    assert getWorkflows().waitFor(run_id, 20)["status"] == "SUCCESS"


def test_progress_keeps_the_latest_value_and_history_and_events_are_readable(engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("durable.progress_and_events")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS"
    assert view["progress"] == {"message": "step 5/5", "extra": {"i": 4}}
    history = [e["payload"]["message"] for e in view["events"] if e["kind"] == "progress"]
    assert history[-1] == "step 5/5" and len(history) >= 1
    assert rt.getEvent(run_id, "ready") == {"at": 5}
    assert rt.getEvent(run_id, "missing", timeoutSeconds=0.05) is None


def test_bad_start_input_is_refused_naming_the_thing(sqlite_engine: Engine) -> None:
    rt = getWorkflows()
    with pytest.raises(UnknownWorkflow, match="'no.such'"):
        rt.start("no.such")
    with pytest.raises(InvalidParams, match=r"durable.sum.*parameter 'm' is unknown \(the workflow takes n\)"):
        rt.start("durable.sum", {"m": 1})
    with pytest.raises(InvalidParams, match="not JSON"):
        rt.start("durable.sum", {"n": {1, 2}})
    with pytest.raises(UnknownRun, match="nope"):
        rt.getRun("nope")
    with pytest.raises(OutsideRunError, match="checkCancelled"):
        rt.checkCancelled()
    assert sqlite_engine.runtime.store.runs.list() == []  # nothing half-created


def test_two_workflows_with_one_name_name_both_modules() -> None:
    existing = REGISTRY.get("durable.sum")
    with pytest.raises(DuplicateWorkflow) as info:
        REGISTRY.add(WorkflowDef("durable.sum", sum_workflow, "apps.other_module", "v", ""))
    assert existing.module in str(info.value) and "apps.other_module" in str(info.value)
