"""A start in a gateway with a free worker makes the claim its dispatcher would make, in the start's
own commit: the run is RUNNING when ``start`` returns, in the claim's order (a run waiting before it
is taken first), never past a partition key, a maintenance drain or the last free worker. The
dispatcher's own claims are held back here (a slow claim), so what is RUNNING was claimed by the
start. SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.gateway.maintenance import Maintenance
from exchange._store.runs.runs import RunTable
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from tests.engine.conftest import Engine
from tests.waiting import wait_until


@step(name="startclaim.double")
def double(value: int) -> int:
    return value * 2


@workflow(name="startclaim.quick")
def quick(value: int = 1) -> int:
    return double(value)


@workflow(name="startclaim.waiter")
def waiter() -> str:
    command = getWorkflows().recvCommand("RUNNING", timeoutSeconds=600, maxMessages=1)
    return str(command)


@pytest.fixture
def claims_held_back(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The dispatcher's claims wait until the event is set (set at the end in any case)."""
    released = threading.Event()
    claim = RunTable.claim

    def held_back(self: RunTable, *args: Any, **kwargs: Any) -> Any:
        released.wait(60)
        return claim(self, *args, **kwargs)

    monkeypatch.setattr(RunTable, "claim", held_back)
    yield released
    released.set()


@contextmanager
def gateway(store_url: str, tmp_path: Path, workers: int, held_back: threading.Event | None = None
            ) -> Iterator[Engine]:
    """A runtime and its dispatcher of ``workers``; at the end the held-back claims go on, then it stops."""
    engine = Engine(store_url, tmp_path, workers=workers)
    try:
        yield engine
    finally:
        if held_back is not None:
            held_back.set()
        engine.close()


def statuses(engine: Engine, *run_ids: str) -> list[str]:
    return [engine.runtime.store.runs.get(run_id).status for run_id in run_ids]  # type: ignore[union-attr]


def status_events(engine: Engine, run_id: str) -> list[str]:
    view = engine.runtime.get_run(run_id, steps=False)
    return [event["payload"]["status"] for event in view["events"] if event["kind"] == "status"]


def test_a_start_with_a_free_worker_returns_its_run_running(
    store_url: str, tmp_path: Path, claims_held_back: threading.Event
) -> None:
    with gateway(store_url, tmp_path, 2, claims_held_back) as engine:
        run_id = engine.runtime.start("startclaim.quick", {"value": 21})
        rec = engine.runtime.store.runs.get(run_id)
        assert rec is not None and rec.status in ("RUNNING", "SUCCESS"), rec
        assert rec.owner == engine.dispatcher.owner and rec.executions == 1
        assert engine.runtime.wait_for(run_id, 30)["result"] == 42
        # The same history as a run the dispatcher claimed: enqueued, then its first execution.
        assert status_events(engine, run_id) == ["ENQUEUED", "RUNNING", "SUCCESS"]


def test_a_start_takes_the_run_waiting_before_its_own(
    store_url: str, tmp_path: Path, claims_held_back: threading.Event
) -> None:
    with gateway(store_url, tmp_path, 1, claims_held_back) as engine:
        # Enqueued without a claim (as another process would), with a higher priority.
        first, _ = engine.runtime.create_run("startclaim.waiter", {}, priority=5)
        second = engine.runtime.start("startclaim.quick", {})
        assert statuses(engine, first, second) == ["RUNNING", "ENQUEUED"]
        claims_held_back.set()
        engine.runtime.send_command(first, "STOP", "done", actor="test")
        assert engine.runtime.wait_for(second, 30)["status"] == "SUCCESS"
        assert engine.runtime.wait_for(first, 30)["status"] == "SUCCESS"


def test_a_start_leaves_its_run_to_the_dispatcher_when_no_worker_is_free(
    store_url: str, tmp_path: Path, claims_held_back: threading.Event
) -> None:
    # The dispatcher's claims are held back, as in the tests above: a worker freed after the start
    # returned (the waiter's execution ended and was handed out again: an outage or a lost lease on a
    # loaded machine) must not let the dispatcher take the queued run before its status is read. What
    # is RUNNING here was claimed by a start.
    with gateway(store_url, tmp_path, 1, claims_held_back) as engine:
        busy = engine.runtime.start("startclaim.waiter", {})
        assert statuses(engine, busy) == ["RUNNING"]
        wait_until(lambda: engine.dispatcher.free_slots() == 0, 10, message="the one worker busy")
        queued = engine.runtime.start("startclaim.quick", {})
        executions = engine.runtime.store.runs.get(busy).executions  # type: ignore[union-attr]
        assert statuses(engine, busy, queued) == ["RUNNING", "ENQUEUED"], (
            f"the waiting run's executions: {executions} (more than one: its worker was freed meanwhile)")
        claims_held_back.set()
        engine.runtime.send_command(busy, "STOP", "make room", actor="test")
        assert engine.runtime.wait_for(queued, 30)["status"] == "SUCCESS"


def test_a_start_never_claims_a_run_with_a_partition_key(
    store_url: str, tmp_path: Path, claims_held_back: threading.Event
) -> None:
    with gateway(store_url, tmp_path, 4, claims_held_back) as engine:
        keyed = engine.runtime.start("startclaim.quick", {}, partitionKey="line-1")
        assert statuses(engine, keyed) == ["ENQUEUED"]
        claims_held_back.set()
        assert engine.runtime.wait_for(keyed, 30)["status"] == "SUCCESS"


def test_a_start_claims_nothing_while_a_maintenance_drain_is_in_force(
    store_url: str, tmp_path: Path, claims_held_back: threading.Event
) -> None:
    with gateway(store_url, tmp_path, 4, claims_held_back) as engine:
        maintenance = Maintenance(engine.runtime)
        maintenance.drain(actor="test", reason="shift change")
        drained = engine.runtime.start("startclaim.quick", {})
        assert statuses(engine, drained) == ["ENQUEUED"]
        maintenance.exit(actor="test")
        claims_held_back.set()
        assert engine.runtime.wait_for(drained, 30)["status"] == "SUCCESS"
