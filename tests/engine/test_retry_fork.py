"""Retry and fork of a run, in a real engine on SQLite and PostgreSQL.

Every step appends a line to a file, so the file counts what really executed: a retry executes only
the failed step again (the recorded ones replay), a fork only the steps from its position on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.execution.context import current_run
from exchange.errors import FatalError, InvalidArgument, UnknownRun, WorkflowError
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from exchange.workflows.steps.sleep import sleep_chunked
from tests.engine.conftest import Engine
from tests.harness import read_lines
from tests.waiting import holds_for, wait_until


def _append(path: str, *words: object) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(" ".join(str(w) for w in words) + "\n")


@step(name="rerun.mark")
def mark(path: str, label: str) -> str:
    _append(path, label)
    return label


@step(name="rerun.post", options={"retries_allowed": True, "max_attempts": 2, "interval_seconds": 0.05})
def post(path: str, flag: str) -> str:
    """Fails (retried once) until the flag file exists: an MES that is down, then back."""
    ctx = current_run()
    assert ctx is not None and ctx.step is not None
    _append(path, "post", ctx.step.attempt)
    if not os.path.exists(flag):
        raise ConnectionError("MES refused the connection")
    return "posted"


@step(name="rerun.effect")
def effect(path: str, flag: str) -> str:
    """Begins its side effect (as a tag write does), then fails until the flag file exists."""
    ctx = current_run()
    assert ctx is not None and ctx.step is not None
    ctx.begin_side_effect()
    _append(path, "effect", ctx.step.attempt, "in-doubt" if ctx.step.resumed_in_doubt else "fresh")
    if not os.path.exists(flag):
        raise FatalError("the valve did not confirm")
    return "done"


@step(name="rerun.slow_retry", options={"retries_allowed": True, "max_attempts": 3, "interval_seconds": 30})
def slow_retry(path: str) -> None:
    ctx = current_run()
    assert ctx is not None and ctx.step is not None
    _append(path, "slow", ctx.step.attempt)
    raise ConnectionError("still down")


@workflow(name="rerun.backoff")
def backoff(path: str) -> None:
    mark(path, "a")
    slow_retry(path)


@workflow(name="rerun.batch")
def batch(path: str, flag: str) -> list[str]:
    return [mark(path, "a"), mark(path, "b"), post(path, flag), mark(path, "d")]


@workflow(name="rerun.effects")
def effects(path: str, flag: str) -> list[str]:
    return [mark(path, "a"), effect(path, flag)]


@workflow(name="rerun.polls_after_failure")
def polls_after_failure(path: str, flag: str) -> list[str]:
    rt = getWorkflows()
    mark(path, "a")
    try:
        posted = post(path, flag)
    except ConnectionError:
        for _ in range(3):  # idle polls after the failed step: the run's quiet tail
            rt.recvCommand(timeoutSeconds=0.01)
        rt.setEvent("failed", True)  # a side effect: the tail is written before it
        raise
    return [posted, mark(path, "c")]


@workflow(name="rerun.waits")
def waits(path: str) -> str:
    rt = getWorkflows()
    mark(path, "a")
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.2)
        if cmd and cmd["cmd"] == "STOP":
            break
    return mark(path, "z")


@workflow(name="rerun.sleeps")
def sleeps(path: str) -> str:
    mark(path, "a")
    sleep_chunked(total_ms=2500, chunk_ms=250)  # long enough for its wake-up time to be recorded
    return mark(path, "z")


def _files(tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path / "side.txt"), str(tmp_path / "mes-is-back")


def _labels(path: str) -> list[str]:
    return [" ".join(line) for line in read_lines(Path(path))]


def _finished(run_id: str, timeout_s: float = 30) -> dict[str, Any]:
    view = getWorkflows().waitFor(run_id, timeout_s)
    assert view["status"] in ("SUCCESS", "ERROR", "CANCELLED"), view
    return view


def test_a_retry_replays_recorded_steps_and_runs_the_failed_one_again(engine: Engine, tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    rt = getWorkflows()
    run_id = rt.start("rerun.batch", {"path": path, "flag": flag})
    failed = _finished(run_id)
    assert failed["status"] == "ERROR" and failed["error"]["type"] == "ConnectionError"
    assert _labels(path) == ["a", "b", "post 1", "post 2"]

    # Without the MES the retry fails again, with the step's retry policy applied anew: 2 attempts.
    assert rt.retry(run_id[:8], reason="try once more") == run_id
    again = _finished(run_id)
    assert again["status"] == "ERROR" and again["steps"][2]["attempts"] == 2
    assert _labels(path) == ["a", "b", "post 1", "post 2", "post 1", "post 2"]

    Path(flag).touch()
    assert rt.retry(run_id, reason="MES back") == run_id
    done = _finished(run_id)
    assert done["status"] == "SUCCESS", done["error"]
    assert done["id"] == run_id and done["result"] == ["a", "b", "posted", "d"]
    assert done["error"] is None and done["finished_at"] is not None
    # a and b ran once (replayed twice), the failed step once more, d once
    assert _labels(path) == ["a", "b", "post 1", "post 2", "post 1", "post 2", "post 1", "d"]
    assert [(s["seq"], s["status"], s["attempts"]) for s in done["steps"]] == [
        (1, "SUCCESS", 1), (2, "SUCCESS", 1), (3, "SUCCESS", 1), (4, "SUCCESS", 1)]
    retried = [e for e in done["events"] if e["kind"] == "retried"]
    assert [e["reason"] for e in retried] == ["try once more", "MES back"]
    assert all(e["actor"] and "@" in e["actor"] for e in retried)  # the default actor: user@host
    assert retried[1]["payload"]["status"] == "ERROR"
    assert retried[1]["payload"]["error"]["type"] == "ConnectionError"
    assert retried[1]["payload"]["step"] == {"seq": 3, "name": "rerun.post", "status": "ERROR", "in_doubt": False}
    statuses = [e["payload"]["status"] for e in done["events"] if e["kind"] == "status"]
    assert statuses == ["ENQUEUED", "RUNNING", "ERROR", "ENQUEUED", "RUNNING", "ERROR", "ENQUEUED", "RUNNING",
                        "SUCCESS"]
    assert done["executions"] == 3


def test_a_failed_step_that_began_its_side_effect_runs_again_in_doubt(engine: Engine, tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    rt = getWorkflows()
    run_id = rt.start("rerun.effects", {"path": path, "flag": flag})
    assert _finished(run_id)["status"] == "ERROR"
    Path(flag).touch()
    rt.retry(run_id, reason="valve checked")
    done = _finished(run_id)
    assert done["status"] == "SUCCESS", done["error"]
    # The retried attempt is told its side effect may have happened, and is numbered 1 again.
    assert _labels(path) == ["a", "effect 1 fresh", "effect 1 in-doubt"]
    (retried,) = [e for e in done["events"] if e["kind"] == "retried"]
    assert retried["payload"]["step"]["in_doubt"] is True


def test_the_quiet_tail_after_a_failed_step_does_not_steer_the_retry(engine: Engine, tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    rt = getWorkflows()
    run_id = rt.start("rerun.polls_after_failure", {"path": path, "flag": flag})
    assert _finished(run_id)["status"] == "ERROR"
    Path(flag).touch()
    rt.retry(run_id)
    done = _finished(run_id)
    assert done["status"] == "SUCCESS", done["error"]  # not a NonDeterminismError from the old polls
    assert done["result"] == ["posted", "c"]
    assert _labels(path) == ["a", "post 1", "post 2", "post 1", "c"]


def test_a_cancelled_run_is_retried_from_where_it_stopped(engine: Engine, tmp_path: Path) -> None:
    path, _ = _files(tmp_path)
    rt = getWorkflows()
    run_id = rt.start("rerun.waits", {"path": path})
    wait_until(lambda: rt.getRun(run_id)["state"] == "RUNNING", 20, message="the run to wait for commands")
    rt.cancel(run_id, reason="wrong silo")
    cancelled = _finished(run_id)
    assert cancelled["status"] == "CANCELLED" and cancelled["cancel_requested"] is True
    rt.retry(run_id, reason="silo was right")
    wait_until(lambda: rt.getRun(run_id)["status"] == "RUNNING", 20, message="the retried run to execute")
    view = rt.getRun(run_id)
    assert view["cancel_requested"] is False and view["error"] is None
    rt.sendCommand(run_id, "STOP")
    done = _finished(run_id)
    assert done["status"] == "SUCCESS" and done["result"] == "z"
    assert _labels(path) == ["a", "z"]  # "a" was recorded: replayed, not executed again


def test_a_sleep_cut_by_a_cancel_wakes_at_its_recorded_time_after_a_retry(engine: Engine, tmp_path: Path) -> None:
    path, _ = _files(tmp_path)
    rt = getWorkflows()
    store = engine.runtime.store
    run_id = rt.start("rerun.sleeps", {"path": path})
    wake_at = wait_until(lambda: (rec := store.runs.get(run_id)) is not None and rec.quiet_wake_at, 20,
                         message="the sleep's wake-up time to be recorded")
    rt.cancel(run_id, reason="operator")
    assert _finished(run_id)["status"] == "CANCELLED"
    wait_until(lambda: store.clock.now() > wake_at, 10, message="the recorded wake-up time to pass")
    rt.retry(run_id)
    done = _finished(run_id)
    assert done["status"] == "SUCCESS" and done["result"] == "z"
    rec = store.runs.get(run_id)
    assert rec is not None and rec.quiet_wake_at == wake_at  # no new sleep was started: it woke as recorded
    assert _labels(path) == ["a", "z"]


def test_a_retried_run_gets_its_timeout_afresh(engine: Engine, tmp_path: Path) -> None:
    path, _ = _files(tmp_path)
    rt = getWorkflows()
    run_id = rt.start("rerun.waits", {"path": path}, timeoutSeconds=1.0)
    timed_out = _finished(run_id)
    assert timed_out["status"] == "CANCELLED" and timed_out["error"]["message"] == "timeout"
    retried_at = engine.runtime.store.clock.now()
    rt.retry(run_id, reason="longer batch")
    wait_until(lambda: engine.runtime.store.runs.get(run_id).executions == 2, 20,  # type: ignore[union-attr]
               message="the retried run to start")
    rec = engine.runtime.store.runs.get(run_id)
    assert rec is not None and rec.deadline_at is not None and rec.deadline_at >= retried_at + 1.0
    again = _finished(run_id)
    assert again["status"] == "CANCELLED" and again["error"]["message"] == "timeout"
    assert _labels(path) == ["a"]


def test_a_retry_is_refused_for_a_run_that_did_not_fail(engine: Engine, tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    Path(flag).touch()
    rt = getWorkflows()
    succeeded = rt.start("rerun.batch", {"path": path, "flag": flag})
    assert _finished(succeeded)["status"] == "SUCCESS"
    running = rt.start("rerun.waits", {"path": path}, partitionKey="line1")
    wait_until(lambda: rt.getRun(running)["state"] == "RUNNING", 20, message="the keyed run to execute")
    queued = rt.start("rerun.waits", {"path": path}, partitionKey="line1")  # waits for the key
    for run_id, status in ((succeeded, "SUCCESS"), (running, "RUNNING"), (queued, "ENQUEUED")):
        before = rt.getRun(run_id)
        assert before["status"] == status
        with pytest.raises(WorkflowError, match=f"run {run_id} is {status}: only an ERROR or CANCELLED run can be "
                                                f"retried; nothing changed"):
            rt.retry(run_id, reason="no")
        after = rt.getRun(run_id)
        assert after["status"] == status and len(after["events"]) == len(before["events"])
        assert after["steps"] == before["steps"]
    with pytest.raises(UnknownRun):
        rt.retry("ffffffff-0000-0000-0000-000000000000")
    rt.cancel(queued)
    rt.sendCommand(running, "STOP")
    assert _finished(running)["status"] == "SUCCESS"


def test_a_retried_run_waits_for_its_partition_key_like_any_queued_run(engine: Engine, tmp_path: Path) -> None:
    path, _ = _files(tmp_path)
    rt = getWorkflows()
    first = rt.start("rerun.waits", {"path": path}, partitionKey="line2")
    wait_until(lambda: rt.getRun(first)["state"] == "RUNNING", 20, message="the first run to execute")
    rt.cancel(first)
    assert _finished(first)["status"] == "CANCELLED"
    second = rt.start("rerun.waits", {"path": path}, partitionKey="line2")
    wait_until(lambda: rt.getRun(second)["status"] == "RUNNING", 20, message="the second run to take the key")
    rt.retry(first)
    assert holds_for(lambda: rt.getRun(first)["status"] == "ENQUEUED", 0.5)  # the key holds it back
    rt.sendCommand(second, "STOP")
    assert _finished(second)["status"] == "SUCCESS"
    wait_until(lambda: rt.getRun(first)["status"] == "RUNNING", 20, message="the retried run to take the key")
    rt.sendCommand(first, "STOP")
    assert _finished(first)["status"] == "SUCCESS"


def test_a_fork_copies_the_steps_before_its_position_and_leaves_the_original(engine: Engine,
                                                                              tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    Path(flag).touch()
    rt = getWorkflows()
    original = rt.start("rerun.batch", {"path": path, "flag": flag})
    before = _finished(original)
    assert before["status"] == "SUCCESS"
    assert _labels(path) == ["a", "b", "post 1", "d"]

    forked = rt.fork(original, 3, reason="post the batch again")
    assert forked != original
    done = _finished(forked)
    assert done["status"] == "SUCCESS", done["error"]
    assert done["result"] == ["a", "b", "posted", "d"] and done["params"] == before["params"]
    assert done["forked_from"] == original and done["workflow"] == "rerun.batch"
    # steps 1 and 2 were copied and replayed; 3 and 4 executed in the new run
    assert _labels(path) == ["a", "b", "post 1", "d", "post 1", "d"]
    assert [(s["seq"], s["output"]) for s in done["steps"]] == [(1, "a"), (2, "b"), (3, "posted"), (4, "d")]
    assert [s["started_at"] for s in done["steps"][:2]] == [s["started_at"] for s in before["steps"][:2]]
    (event,) = [e for e in done["events"] if e["kind"] == "forked"]
    assert event["payload"] == {"from_run": original, "from_step": 3, "steps_copied": 2}
    assert event["reason"] == "post the batch again" and "@" in event["actor"]
    assert rt.getRun(original) | {"owner_alive": None} == before | {"owner_alive": None}

    whole = rt.fork(original, 5)  # after the last step: every step copied, nothing executed again
    assert _finished(whole)["result"] == ["a", "b", "posted", "d"]
    assert len(_labels(path)) == 6
    from_start = rt.fork(original, 1)
    assert _finished(from_start)["status"] == "SUCCESS"
    assert _labels(path)[6:] == ["a", "b", "post 1", "d"]


def test_a_fork_position_outside_the_run_is_refused_naming_it(engine: Engine, tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    rt = getWorkflows()
    run_id = rt.start("rerun.batch", {"path": path, "flag": flag})
    assert _finished(run_id)["status"] == "ERROR"  # 3 steps recorded: 1..4 are positions to fork from
    runs_before = len(rt.listRuns())
    for bad in (0, 5, -1):
        with pytest.raises(InvalidArgument, match=f"from_step {bad} is outside 1..4: run {run_id} has 3 recorded"):
            rt.fork(run_id, bad)
    for bad in (True, "2", 2.5, None):
        with pytest.raises(InvalidArgument, match="fork: from_step must be a whole number"):
            rt.fork(run_id, bad)  # type: ignore[arg-type]
    with pytest.raises(UnknownRun):
        rt.fork("ffffffff-0000-0000-0000-000000000000", 1)
    assert len(rt.listRuns()) == runs_before
    # Forking right after the failed step copies its error: the new run fails at once, executing nothing.
    Path(flag).touch()
    replayed = rt.fork(run_id, 4)
    failed = _finished(replayed)
    assert failed["status"] == "ERROR" and failed["error"]["type"] == "ConnectionError"
    assert _labels(path) == ["a", "b", "post 1", "post 2"]
    # From the failed step: it runs again in the new run, now that the MES is back.
    fixed = rt.fork(run_id, 3)
    assert _finished(fixed)["status"] == "SUCCESS"
    assert _labels(path) == ["a", "b", "post 1", "post 2", "post 1", "d"]


def test_a_fork_cannot_cut_off_a_step_under_way_and_a_retry_skips_its_backoff(engine: Engine,
                                                                               tmp_path: Path) -> None:
    path, _ = _files(tmp_path)
    rt = getWorkflows()
    run_id = rt.start("rerun.backoff", {"path": path})
    wait_until(lambda: [s["status"] for s in rt.getRun(run_id)["steps"]] == ["SUCCESS", "RETRYING"], 20,
               message="the step to wait out its 30 s backoff")
    refusal = (rf"fork: step 2 \('rerun.slow_retry'\) of run {run_id} has no recorded outcome "
               r"\(RETRYING: under way or in doubt\); fork from step 2 or earlier")
    with pytest.raises(WorkflowError, match=refusal):
        rt.fork(run_id, 3)
    forked = rt.fork(run_id, 2)  # before it: the new run executes the step itself
    wait_until(lambda: _labels(path).count("slow 1") == 2, 20, message="the fork to execute the step")
    assert _labels(path) == ["a", "slow 1", "slow 1"]
    for each in (run_id, forked):
        rt.cancel(each, reason="end of test")
        assert _finished(each)["status"] == "CANCELLED"
    # Cancelled in its backoff, retried: fresh attempts at once, not after the 30 s the row said.
    rt.retry(run_id)
    wait_until(lambda: [(s["status"], s["attempts"]) for s in rt.getRun(run_id)["steps"]][1] == ("RETRYING", 1),
               10, message="the retried step's first attempt to fail")
    assert _labels(path).count("slow 1") == 3
    rt.cancel(run_id)
    assert _finished(run_id)["status"] == "CANCELLED"
