"""A parent run with a child, through a chain of gateway processes each killed with SIGKILL right
after (or right before) a store write, so every point of both runs' lives sees a crash: the parent
still has exactly one child, its stream value is written once, and both finish."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until

APP = """
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows


@step(name="fam.square")
def square(n):
    return n * n


@workflow(name="fam.child")
def child(n):
    return square(n) + square(1)


@workflow(name="fam.parent")
def parent(n):
    rt = getWorkflows()
    child_id = rt.startChild("fam.child", {"n": n})
    done = rt.waitFor(child_id, 120)
    rt.writeStream("log", {"child": child_id, "result": done["result"]})
    return done["result"]
"""
MAX_PROCESSES = 80


@pytest.mark.parametrize(("mode", "beyond_starts"), [("after", 1), ("before", 2)])
def test_one_child_and_one_stream_value_whatever_the_crash_point(tmp_path: Path, exchange_zygote: ForkServer,
                                                                 mode: str, beyond_starts: int) -> None:
    """Each process first starts an execution of every unfinished run (one write each), then dies
    at the next write (after it: the next process goes on from there), or before the one after it
    (the undone write is redone first)."""
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote, engine={"node_id": "fam"})
    env.write_app("fam_app", APP)
    runtime = env.runtime()
    (parent_id,) = env.start_runs("fam.parent", [{"n": 6}])
    kills = 0
    with env.gateway() as gateway:
        for _ in range(MAX_PROCESSES):
            if runtime.store.runs.get(parent_id).finished:
                break
            unfinished = [run for run in runtime.list_runs() if run["status"] in ("ENQUEUED", "PENDING", "RUNNING")]
            kill_at = len(unfinished) + beyond_starts
            gateway.spawn({f"EXCHANGE_FAULT_KILL_{mode.upper()}_WRITE": str(kill_at),
                           "EXCHANGE_FAULT_WRITE_LOG": str(tmp_path / f"faults-{kills}.log")})
            proc = gateway.proc
            assert proc is not None
            wait_until(lambda proc=proc: proc.poll() is not None or runtime.store.runs.get(parent_id).finished, 60,
                       interval_s=0.005, message=lambda: f"the gateway to die or finish\n{gateway.log_text()}")
            if proc.poll() is None:
                gateway.stop()
            kills += proc.returncode == -9
        else:
            raise AssertionError(f"the runs did not finish within {MAX_PROCESSES} processes")
    view = runtime.get_run(parent_id)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == 37 and kills >= 4  # the chain went through the parent's and the child's writes
    children = runtime.list_runs(workflow="fam.child")
    assert [c["id"] for c in children] == [c["id"] for c in view["children"]] and len(children) == 1
    assert children[0]["parent_run_id"] == parent_id and children[0]["status"] == "SUCCESS"
    assert [item["value"] for item in runtime.store.streams.read(parent_id, "log", 0, 100)] == [
        {"child": children[0]["id"], "result": 37}]
