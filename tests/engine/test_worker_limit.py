"""A gateway whose workers are all taken by long-lived runs says so: its log names the limit and the
runs waiting for a worker, ``/metrics`` shows runs executing against the limit, and once a run ends
the next one starts and the log says a worker is free. SQLite and PostgreSQL, a real gateway."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import requests

from exchange._engine.gateway.saturation import Saturation
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.store import Store
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, operator_loop_app, wait_until

LISTENING = re.compile(r"gateway API listening on (\S+)")
SATURATED = "all 2 workers of this gateway are busy and 1 run(s) wait ENQUEUED"


def test_a_gateway_with_every_worker_busy_says_so_and_starts_the_next_run_when_one_ends(
    tmp_path: Path, store_url: str, exchange_zygote: ForkServer
) -> None:
    env = ExchangeEnv.create(tmp_path, store_url=store_url, zygote=exchange_zygote, engine={"workers": 2})
    env.write_app("units", operator_loop_app("unit.loop"))
    runtime = env.runtime()
    try:
        run_ids = env.start_runs("unit.loop", [{}] * 3)  # queued before the gateway looks
        with env.gateway("--api", "127.0.0.1:0") as gateway:
            gateway.start(timeout_s=60)
            wait_until(lambda: SATURATED in gateway.log_text(), 30,
                       message=lambda: f"the saturation warning\n{gateway.log_text()}")
            statuses = [runtime.store.runs.get(r).status for r in run_ids]
            assert sorted(statuses) == ["ENQUEUED", "RUNNING", "RUNNING"], statuses
            url = LISTENING.findall(gateway.log_text())[0]
            metrics = requests.get(f"{url}/metrics", timeout=10).text
            assert "exchange_gateway_runs_executing 2.0" in metrics, metrics
            assert "exchange_gateway_workers 2.0" in metrics, metrics

            queued = next(r for r, status in zip(run_ids, statuses) if status == "ENQUEUED")
            first = next(r for r, status in zip(run_ids, statuses) if status == "RUNNING")
            runtime.send_command(first, "STOP", "make room", actor="test")
            wait_until(lambda: runtime.store.runs.get(queued).status == "RUNNING", 30, message="the queued run RUNNING")
            wait_until(lambda: "a worker is free again" in gateway.log_text(), 30,
                       message=lambda: f"the line saying a worker is free\n{gateway.log_text()}")
            assert gateway.log_text().count(SATURATED) == 1, "warned again with a worker free"
            for run_id in run_ids:
                if run_id != first:
                    runtime.send_command(run_id, "STOP", "done", actor="test")
            wait_until(lambda: runtime.store.runs.count_by_status().get("SUCCESS", 0) == 3, 60,
                       message=lambda: f"all stopped: {runtime.store.runs.count_by_status()}")
            assert gateway.stop() == 0, gateway.log_text()
    finally:
        runtime.close()


def new_run(store: Store, *, queue: str = "default", partition_key: str | None = None) -> str:
    run_id, _created = store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="tester",
                                               queue=queue, partition_key=partition_key), holder=None)
    return run_id


def test_runs_waiting_for_a_worker_leave_out_those_behind_their_partition_key(store: Store) -> None:
    """What the warning counts is what a claim could take: a run queued behind an active run of its
    partition key waits for that run, not for a worker; a queue filter counts its queues only."""
    gateway = Holder(owner="gw/1", node="gw", lease_seconds=30.0)
    store.runs.register_owner(gateway.owner, 30.0)
    new_run(store, partition_key="tank-1")
    assert len(store.runs.claim(gateway, 1)) == 1  # tank-1 is active now
    new_run(store, partition_key="tank-1")  # waits for it
    new_run(store, partition_key="tank-2")
    new_run(store)
    new_run(store, queue="cip")
    assert store.runs.count_claimable() == 3
    assert store.runs.count_claimable(["cip"]) == 1
    assert store.runs.count_claimable(["default", "cip"]) == 3
    assert store.runs.count_claimable(["other"]) == 0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_store_is_asked_only_while_every_worker_is_busy_and_at_most_once_a_look(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="exchange._engine.gateway.saturation")
    clock, asked = Clock(), []

    def count_waiting() -> int:
        asked.append(clock.now)
        return 4

    watch = Saturation(8, count_waiting, look_seconds=30, repeat_seconds=600, clock=clock)
    watch.observe(3)
    assert asked == [] and not watch.warned
    watch.observe(0)
    assert asked == [1000.0] and watch.warned
    assert "all 8 workers of this gateway are busy and 4 run(s) wait ENQUEUED" in caplog.text
    clock.now += 10
    watch.observe(0)
    assert asked == [1000.0], "looked again within the look interval"
    clock.now += 25
    watch.observe(0)
    assert asked == [1000.0, 1035.0]
    assert caplog.text.count("workers of this gateway are busy") == 1, "repeated before the repeat interval"
    clock.now += 600
    watch.observe(0)
    assert caplog.text.count("workers of this gateway are busy") == 2
    watch.observe(1)
    assert not watch.warned and "a worker is free again (1 of 8)" in caplog.text
    watch.observe(0)  # saturated again: looks at once
    assert asked[-1] == clock.now and caplog.text.count("workers of this gateway are busy") == 3
