"""Cancellation at every blocking point, run timeouts, and the start options."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from exchange._engine.gateway.dispatcher import Dispatcher
from exchange.errors import Cancelled, InvalidParams
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from exchange.workflows.steps.sleep import sleep_chunked
from tests.engine.conftest import Engine, make_runtime
from tests.waiting import wait_until

GATE = threading.Event()
ORDER: list[str] = []


@step(name="cancel.always_down", options={"retries_allowed": True, "max_attempts": 10, "interval_seconds": 60})
def always_down() -> None:
    raise ConnectionError("down")


@step(name="cancel.swallowing")
def swallowing() -> str:
    try:
        getWorkflows().checkCancelled()
    except Exception:  # a careless step: Cancelled must pass through this
        return "swallowed"
    return "not cancelled"


@workflow(name="cancel.sleeper")
def sleeper() -> None:
    getWorkflows().progress("sleeping")
    sleep_chunked(total_ms=600_000, chunk_ms=250)


@workflow(name="cancel.waiter")
def waiter() -> None:
    getWorkflows().recvCommand("RUNNING", timeoutSeconds=600)
    getWorkflows().recvCommand("RUNNING", timeoutSeconds=600)


@workflow(name="cancel.retrier")
def retrier() -> None:
    always_down()


@workflow(name="cancel.careless")
def careless() -> str:
    sleep_chunked(total_ms=600_000, chunk_ms=50)
    return swallowing()


@workflow(name="options.blocker")
def blocker(tag: str) -> str:
    ORDER.append(tag)
    while not GATE.is_set():
        sleep_chunked(total_ms=20, chunk_ms=10)
    return tag


@workflow(name="cancel.catcher")
def catcher() -> str:
    try:
        sleep_chunked(total_ms=600_000, chunk_ms=250)
    except Cancelled:
        return "cleaned up"  # catching Cancelled to clean up does not make the run a success
    return "slept"


def _running(engine: Engine, run_id: str) -> None:
    def status() -> str:
        return str(engine.runtime.get_run(run_id, steps=False, events=False)["status"])

    wait_until(lambda: status() == "RUNNING", message=lambda: f"RUNNING, still {status()}")


@pytest.mark.parametrize("name", ["cancel.sleeper", "cancel.waiter", "cancel.retrier", "cancel.careless",
                                  "cancel.catcher"])
def test_cancel_reaches_every_blocking_point(sqlite_engine: Engine, name: str) -> None:
    rt = getWorkflows()
    run_id = rt.start(name)
    _running(sqlite_engine, run_id)
    if name == "cancel.retrier":
        wait_until(lambda: rt.getRun(run_id)["steps"] and rt.getRun(run_id)["steps"][0]["status"] == "RETRYING",
                   message="backoff")
    rt.cancel(run_id, "operator abort")
    view = rt.waitFor(run_id, 10)
    assert view["status"] == "CANCELLED"
    assert view["error"] == {"type": "Cancelled", "message": "operator abort"}
    cancel_events = [e for e in view["events"] if e["kind"] == "cancel"]
    assert cancel_events and cancel_events[0]["reason"] == "operator abort"


def test_cancel_from_another_process_is_seen_through_the_store(sqlite_engine: Engine) -> None:
    rt = getWorkflows()
    run_id = rt.start("cancel.sleeper")
    _running(sqlite_engine, run_id)
    other = make_runtime(sqlite_engine.store_url, sqlite_engine.tmp_path)  # its own store connection
    try:
        other.store.request_cancel(run_id, actor="other-process", reason="from elsewhere")
    finally:
        other.close()
    view = rt.waitFor(run_id, 10)
    assert view["status"] == "CANCELLED" and view["error"]["message"] == "from elsewhere"


def test_an_enqueued_run_is_cancelled_at_once(sqlite_url: str, tmp_path: Any) -> None:
    runtime = make_runtime(sqlite_url, tmp_path)
    try:
        run_id = runtime.start("cancel.sleeper")
        assert runtime.cancel(run_id, "not needed") == "CANCELLED"
        assert runtime.get_run(run_id)["status"] == "CANCELLED"
    finally:
        runtime.close()


def test_a_run_past_its_timeout_is_cancelled(engine: Engine) -> None:
    rt = getWorkflows()
    view = rt.waitFor(rt.start("cancel.sleeper", timeoutSeconds=0.3), 10)
    assert view["status"] == "CANCELLED" and view["error"]["message"] == "timeout"


def test_deduplication_returns_the_existing_run(engine: Engine) -> None:
    rt = getWorkflows()
    first = rt.start("cancel.sleeper", deduplicationId="batch-42")
    assert rt.start("cancel.sleeper", deduplicationId="batch-42") == first
    other = rt.start("cancel.sleeper", deduplicationId="batch-43")
    assert other != first
    rt.cancel(first)
    rt.cancel(other)
    with pytest.raises(InvalidParams, match="unknown start option"):
        rt.start("cancel.sleeper", dedup="x")


def test_one_active_run_per_partition_key(engine: Engine) -> None:
    rt = getWorkflows()
    GATE.clear()
    first = rt.start("options.blocker", {"tag": "tank1-a"}, partitionKey="tank1")
    second = rt.start("options.blocker", {"tag": "tank1-b"}, partitionKey="tank1")
    other = rt.start("options.blocker", {"tag": "tank2"}, partitionKey="tank2")
    _running(engine, first)
    _running(engine, other)
    assert rt.getRun(second)["status"] == "ENQUEUED"
    GATE.set()
    assert rt.waitFor(second, 20)["status"] == "SUCCESS"
    assert rt.getRun(first)["finished_at"] <= rt.getRun(second)["started_at"]


def test_priority_and_queues(sqlite_url: str, tmp_path: Any) -> None:
    runtime = make_runtime(sqlite_url, tmp_path)
    from exchange.workflows.engine.instance import set_runtime

    set_runtime(runtime)
    GATE.set()
    ORDER.clear()
    try:
        low = runtime.start("options.blocker", {"tag": "low"}, priority=1)
        high = runtime.start("options.blocker", {"tag": "high"}, priority=9)
        elsewhere = runtime.start("options.blocker", {"tag": "other-queue"}, queue="packaging")
        dispatcher = Dispatcher(runtime, workers=1, queues=["default"])
        dispatcher.start()
        try:
            assert runtime.wait_for(low, 20)["status"] == "SUCCESS"
            assert runtime.wait_for(high, 20)["status"] == "SUCCESS"
            assert ORDER == ["high", "low"]
            assert runtime.get_run(elsewhere)["status"] == "ENQUEUED"
        finally:
            dispatcher.stop()
    finally:
        set_runtime(None)
        runtime.close()


def test_a_second_gateway_with_the_same_node_id_is_refused(engine: Engine) -> None:
    from exchange.errors import StoreError

    other = make_runtime(engine.store_url, engine.tmp_path)
    elsewhere = make_runtime(engine.store_url, engine.tmp_path, node_id="other-node")
    try:
        with pytest.raises(StoreError, match="another gateway with node id 'test-node'"):
            Dispatcher(other).start()
        different = Dispatcher(elsewhere)
        different.start()  # a different node id is fine
        different.stop()
    finally:
        other.close()
        elsewhere.close()
