"""Group commit on SQLite and PostgreSQL (where a batch is pipelined): units that share a batch
commit together, a unit that fails or is refused takes nothing of the others with it, and each
caller gets its own unit's result."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from exchange.errors import OwnershipLost, StoreDataError
from exchange.workflows._store import records as r
from exchange.workflows._store.records import Fence, StepRecord
from exchange.workflows._store.runs import Holder, NewRun
from exchange.workflows._store.store import Store

WRITERS = 12


@pytest.fixture
def store(store_url: str) -> Store:
    s = Store(store_url)
    yield s  # type: ignore[misc]
    s.close()


def held_run(store: Store, owner: str = "me") -> Fence:
    run_id, _ = store.create_run(
        NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="tester"),
        holder=Holder(owner=owner, node=owner, lease_seconds=30.0),
    )
    return Fence(run_id, owner, 1)


def status_events(store: Store, run_id: str) -> list[Any]:
    return [json.loads(e.payload or "null") for e in store.events.list(run_id, ["status"])]


def step(seq: int) -> StepRecord:
    return StepRecord(seq=seq, name=f"s{seq}", status="SUCCESS", attempts=1, output=str(seq), started_at=1.0)


def in_one_batch(store: Store, writes: list[Callable[[], Any]]) -> list[Any]:
    """Run ``writes`` from threads of their own while the committer is held inside a batch, so they
    queue up and share the next one; each write's result or exception, in order."""
    inside, release = threading.Event(), threading.Event()

    def hold(cur: Any) -> None:
        inside.set()
        assert release.wait(30)

    holder = threading.Thread(target=store.db.unit, args=(hold, "a unit that holds the committer"))
    holder.start()
    assert inside.wait(30)
    batches_before, units_before = store.db.commits.batches, store.db.commits.units
    outcomes: list[Any] = [None] * len(writes)

    def write(i: int) -> None:
        try:
            outcomes[i] = writes[i]()
        except BaseException as exc:  # OwnershipLost is not an Exception (workflow code must not catch it)
            outcomes[i] = exc

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writes))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(store.db.commits._queue) < len(writes):  # every write queued behind the held batch
        assert time.monotonic() < deadline, "the writes did not queue"
        time.sleep(0.005)
    release.set()
    holder.join(30)
    for t in threads:
        t.join(30)
    # they went together: one batch for all of them (plus one per unit when it had to be split)
    assert store.db.commits.units - units_before >= len(writes)
    assert store.db.commits.batches - batches_before in (1, 1 + len(writes))
    return outcomes


def test_writes_of_many_runs_share_one_batch_and_each_caller_gets_its_own_result(store: Store) -> None:
    fences = [held_run(store) for _ in range(WRITERS)]
    outcomes = in_one_batch(store, [lambda f=f: store.steps.record(f, step(1), replace=False) for f in fences])
    assert outcomes == [None] * WRITERS
    for fence in fences:
        assert store.steps.load(fence.run_id)[1].output == "1"
    # results read back from the batch: each run's own record, and a refusal for a stale fence
    ends = in_one_batch(store, [lambda f=f: store.finish_run(f, r.SUCCESS, result_json=f'"{f.run_id}"')
                                for f in fences[:4]]
                        + [lambda: store.finish_run(Fence(fences[4].run_id, "other", 1), r.SUCCESS)])
    assert ends == [True, True, True, True, False]
    for fence in fences[:4]:
        run = store.runs.get(fence.run_id)
        assert run is not None and run.status == r.SUCCESS and run.result == f'"{fence.run_id}"'
        assert status_events(store, fence.run_id)[-1] == {"status": "SUCCESS"}
    unfinished = store.runs.get(fences[4].run_id)
    assert unfinished is not None and unfinished.status == r.PENDING


def test_a_failing_unit_fails_alone_and_the_rest_of_its_batch_commits(store: Store) -> None:
    fences = [held_run(store) for _ in range(WRITERS)]
    for fence in fences:
        store.steps.record(fence, step(1), replace=False)
    stale = Fence(fences[1].run_id, fences[1].owner, fences[1].generation + 5)
    writes: list[Callable[[], Any]] = [lambda f=f: store.steps.record(f, step(2), replace=False) for f in fences]
    writes[3] = lambda: store.steps.record(fences[3], step(1), replace=False)  # seq 1 exists: the database refuses
    writes[1] = lambda: store.steps.record(stale, step(2), replace=False)  # a lost fence: refused, nothing written
    outcomes = in_one_batch(store, writes)
    assert isinstance(outcomes[3], StoreDataError)
    assert isinstance(outcomes[1], OwnershipLost)
    assert [o for i, o in enumerate(outcomes) if i not in (1, 3)] == [None] * (WRITERS - 2)
    for i, fence in enumerate(fences):
        assert sorted(store.steps.load(fence.run_id)) == ([1] if i in (1, 3) else [1, 2])
    # the committer goes on after the failed batch
    store.steps.record(fences[3], step(2), replace=False)
    assert sorted(store.steps.load(fences[3].run_id)) == [1, 2]


def test_an_execution_start_reads_its_own_row_back_from_a_shared_batch(store: Store) -> None:
    """The claim starts a first execution; a takeover's execution is started by start_execution,
    which counts it, keeps the first start time and deadline, and logs it."""
    run_ids = [store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="t",
                                       timeout_seconds=600.0))[0] for _ in range(4)]
    claimed = store.runs.claim(Holder(owner="old/1", node="old", lease_seconds=0.01), 4)
    assert sorted(rec.id for rec in claimed) == sorted(run_ids)
    for rec in claimed:
        assert rec.status == r.RUNNING and rec.executions == 1 and rec.started_at is not None
        assert rec.deadline_at == pytest.approx(rec.started_at + 600.0)
        assert status_events(store, rec.id)[-1] == {"status": "RUNNING", "execution": 1, "owner": "old/1"}
    time.sleep(0.05)
    taken = store.runs.take_over_expired(Holder(owner="new/1", node="new", lease_seconds=30.0))
    assert len(taken) == 4
    first = {rec.id: rec for rec in claimed}
    started = in_one_batch(store, [lambda rec=rec: store.start_execution(rec.fence(), 30.0) for rec in taken]
                           + [lambda: store.start_execution(claimed[0].fence(), 30.0)])  # the old, stale fence
    assert started[-1] is None
    for rec, again in zip(taken, started[:-1]):
        assert again is not None and again.id == rec.id and again.status == r.RUNNING and again.executions == 2
        assert again.started_at == first[rec.id].started_at and again.deadline_at == first[rec.id].deadline_at
        assert again.owner == "new/1"
        assert status_events(store, rec.id)[-1] == {"status": "RUNNING", "execution": 2, "owner": "new/1"}


def test_on_postgresql_starts_and_messages_do_not_wait_behind_a_batch_of_the_runs_writes(pg_url: str) -> None:
    store = Store(pg_url)
    inside, release = threading.Event(), threading.Event()

    def hold(cur: Any) -> None:
        inside.set()
        assert release.wait(30)

    try:
        target = held_run(store)
        holder = threading.Thread(target=store.db.unit, args=(hold, "a batch of the runs' writes, held open"))
        holder.start()
        try:
            assert inside.wait(30)
            done: dict[str, Any] = {}

            def requests() -> None:
                done["start"] = store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1",
                                                        created_by="operator"))
                done["message"] = store.send_message(target.run_id, "cmd", {"cmd": "HOLD"}, actor="op", reason=None)

            caller = threading.Thread(target=requests)
            caller.start()
            # well within PostgreSQL's idle-in-transaction limit on the held batch (5 s)
            caller.join(3.0)
            assert not caller.is_alive(), "a start or a message waited for the runs' batch"
            assert holder.is_alive()  # that batch is still open
            run_id, created = done["start"]
            assert created and store.runs.get(run_id).status == r.ENQUEUED
            status, message_id = done["message"]
            assert message_id is not None and store.mailbox.pending(target.run_id, "cmd", 8)[0].id == message_id
        finally:
            release.set()
            holder.join(30)
    finally:
        store.close()
