"""Group commit on SQLite and PostgreSQL (where a batch is pipelined): units that share a batch
commit together, a unit that fails or is refused takes nothing of the others with it, and each
caller gets its own unit's result."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from exchange._store import records as r
from exchange._store.records import Fence, StepRecord
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.sql import commits
from exchange._store.store import Store
from exchange.errors import OwnershipLost, StoreDataError
from tests.waiting import wait_until

WRITERS = 12


def held_run(store: Store, owner: str = "me") -> Fence:
    run_id, _ = store.create_run(
        NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="tester"),
        holder=Holder(owner=owner, node=owner, lease_seconds=30.0),
    )
    return Fence(run_id, owner, 1)


def status_events(store: Store, run_id: str) -> list[Any]:
    return [json.loads(e.payload or "null") for e in store.events.list(run_id, ["status"])]


def queued(store: Store) -> int:
    """Units waiting in the store's group commit (the list is replaced at each batch: read it anew)."""
    return len(store.db.commits._queue)


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


def test_commands_starts_and_lease_renewals_go_ahead_of_the_runs_writes_waiting(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy gateway has hundreds of the runs' writes queued; an operator's command, a start and a
    lease renewal must not wait for all of them. Batches of 4 here: six runs' writes queue behind a
    batch held open, and the fourth of them blocks its batch until the end of the test. The
    command, the start and the renewal must be done while it blocks (in the next batch, ahead of the
    runs' writes); the runs' writes keep their own order."""
    monkeypatch.setattr(commits, "MAX_BATCH", 4)
    target = held_run(store)
    store.runs.register_owner("me", 30.0)  # its renewal names its runs
    inside, release, blocked = threading.Event(), threading.Event(), threading.Event()
    order: list[int] = []

    def hold(cur: Any) -> None:
        inside.set()
        assert release.wait(30)

    def runs_write(i: int) -> Callable[[Any], None]:
        def fn(cur: Any) -> None:
            store.db.sql.runs.update_run(cur, target.run_id, {"updated_at": float(i)})
            order.append(i)
            if i == 4:
                assert blocked.wait(30)
        return fn

    threads = [threading.Thread(target=store.db.unit, args=(hold, "a batch held open"))]
    threads[0].start()
    try:
        assert inside.wait(30)
        for i in range(1, 7):
            threads.append(threading.Thread(target=store.db.unit, args=(runs_write(i), f"a run's write {i}")))
            threads[-1].start()
            wait_until(lambda i=i: queued(store) == i, 30, interval_s=0.005, message="the runs' write to queue")
        done: dict[str, Any] = {}
        callers = [
            threading.Thread(target=lambda: done.update(message=store.send_message(
                target.run_id, "cmd", {"cmd": "HOLD"}, actor="operator", reason=None))),
            threading.Thread(target=lambda: done.update(start=store.create_run(
                NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="operator")))),
            threading.Thread(target=lambda: done.update(renewed=store.runs.heartbeat("me", 30.0))),
        ]
        for caller in callers:
            caller.start()
        # SQLite: all three queue with the runs' writes; PostgreSQL: the renewal does, the command
        # and the start commit on a committer of their own
        urgent_here = 3 if store.db.request_commits is store.db.commits else 1
        wait_until(lambda: queued(store) == 6 + urgent_here, 30, interval_s=0.005,
                   message="the command, the start and the renewal to queue")
        release.set()
        for caller in callers:
            caller.join(15)
            assert not caller.is_alive(), "a command, a start or a lease renewal waited behind the runs' writes"
        assert done["message"][1] is not None
        assert done["start"][1] is True
        assert done["renewed"] == {target.run_id: 1}
    finally:
        release.set()
        blocked.set()
        for t in threads:
            t.join(30)
    assert order == [1, 2, 3, 4, 5, 6]
    assert store.mailbox.pending(target.run_id, "cmd", 8)[0].id == done["message"][1]


def test_urgent_and_ordinary_units_from_many_threads_all_commit_and_one_batch_runs_at_a_time(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Urgent units jump the queue, so the caller promoted to lead the next batch may find its own
    unit pushed out of that batch: every unit must still commit, and never two batches at once (on
    PostgreSQL they would share one connection)."""
    monkeypatch.setattr(commits, "MAX_BATCH", 2)
    target = held_run(store)
    in_batch = threading.Lock()
    overlaps: list[str] = []
    units_before = store.db.commits.units

    def write(cur: Any) -> None:
        if not in_batch.acquire(blocking=False):
            overlaps.append(threading.current_thread().name)
            return
        try:
            store.db.sql.runs.update_run(cur, target.run_id, {"updated_at": time.time()})
        finally:
            in_batch.release()

    def caller(seed: int) -> None:
        for urgent in [bool(random_bit) for random_bit in random.Random(seed).choices((0, 1), k=25)]:
            store.db.unit(write, "a unit", lane="urgent" if urgent else "run")

    threads = [threading.Thread(target=caller, args=(seed,), name=f"caller-{seed}") for seed in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a unit never committed (a lost promotion)"
    assert overlaps == []
    assert store.db.commits.units - units_before == 32 * 25


def test_a_stream_of_urgent_units_does_not_hold_the_runs_writes_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Urgent units make a batch of their own, but never two in a row: urgent units queued while
    such a batch commits go in the next one together with the runs' writes waiting."""
    monkeypatch.setattr(commits, "MAX_BATCH", 8)
    target = held_run(store)
    inside, release = threading.Event(), threading.Event()
    batch_of: dict[str, int] = {}
    threads: list[threading.Thread] = []

    def unit(name: str, urgent: bool, then: Callable[[], None] = lambda: None) -> None:
        def fn(cur: Any) -> None:
            store.db.sql.runs.update_run(cur, target.run_id, {"updated_at": time.time()})
            batch_of[name] = store.db.commits.batches
            then()
        lane = "urgent" if urgent else "run"
        threads.append(threading.Thread(target=store.db.unit, args=(fn, name), kwargs={"lane": lane}))
        threads[-1].start()

    def more_urgent_units_arrive() -> None:  # while the first urgent batch is being written
        unit("urgent 3", True)
        unit("urgent 4", True)
        wait_until(lambda: queued(store) == 4, 30, interval_s=0.005, message="two more urgent units to queue")

    def hold(cur: Any) -> None:
        inside.set()
        assert release.wait(30)

    threads.append(threading.Thread(target=store.db.unit, args=(hold, "a batch held open")))
    threads[0].start()
    try:
        assert inside.wait(30)
        unit("run write 1", False)
        unit("run write 2", False)
        wait_until(lambda: queued(store) == 2, 30, interval_s=0.005, message="the runs' writes to queue")
        unit("urgent 1", True, more_urgent_units_arrive)
        unit("urgent 2", True)
        wait_until(lambda: queued(store) == 4, 30, interval_s=0.005, message="the urgent units to queue")
    finally:
        release.set()
        for t in threads:
            t.join(30)
    first = batch_of["urgent 1"]
    assert batch_of["urgent 2"] == first  # the urgent units waiting, on their own
    assert batch_of["run write 1"] == batch_of["run write 2"] == batch_of["urgent 3"] == batch_of["urgent 4"] \
        == first + 1, f"the runs' writes were held back: {batch_of}"


def _unit_of_two(store: Store, fence: Fence, second_fails: bool, read_between: bool) -> Callable[[Any], None]:
    """A unit of two (chained) step inserts for ``fence``'s run; the second a duplicate (the database refuses
    it) when ``second_fails``; with ``read_between``, it reads the first's row count before the second."""
    sql = store.db.sql.steps

    def unit(cur: Any) -> None:
        sql.fenced_step(fence, step(7), replace=False)(cur)  # a chained step: two statements
        if read_between:
            assert cur.rowcount == 1
        sql.fenced_step(fence, step(7 if second_fails else 8), replace=False)(cur)

    return unit


@pytest.mark.parametrize("read_between", [False, True])
def test_on_postgresql_a_lone_write_goes_without_begin_and_a_lone_unit_of_two_stays_one_transaction(
    pg_url: str, read_between: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of one unit on a live connection is sent without BEGIN and COMMIT (the pipeline's
    statements up to its Sync are one transaction), unless the unit reads a result between its
    statements (the read needs a Sync: BEGIN goes first). Either way a unit of two statements is one
    transaction: when its second fails, its first is not in the store, and the committer goes on."""
    monkeypatch.setattr(commits, "LIVE_CONNECTION_SECONDS", 60.0)  # live throughout, however slow the machine
    store = Store(pg_url)
    try:
        fence = held_run(store)
        store.steps.record(fence, step(1), replace=False)  # the committer's connection is open and live
        committer = store.db.commits
        alone = committer.alone
        store.steps.record(fence, step(2), replace=False)
        assert committer.alone == alone + 1  # neither BEGIN nor COMMIT
        with pytest.raises(OwnershipLost):  # a lone refusal is still a refusal
            store.steps.record(Fence(fence.run_id, fence.owner, 9), step(3), replace=False)
        with pytest.raises(StoreDataError):  # a lone statement the database refuses: its own error
            store.steps.record(fence, step(2), replace=False)

        with pytest.raises(StoreDataError):
            store.db.unit(_unit_of_two(store, fence, second_fails=True, read_between=read_between), "two inserts")
        assert sorted(store.steps.load(fence.run_id)) == [1, 2]  # the first of the two was rolled back
        alone = committer.alone
        store.db.unit(_unit_of_two(store, fence, second_fails=False, read_between=read_between), "two inserts")
        assert sorted(store.steps.load(fence.run_id)) == [1, 2, 7, 8]
        assert committer.alone == alone + (0 if read_between else 1)  # a read mid-unit: BEGIN ... COMMIT
        store.steps.record(fence, step(9), replace=False)  # the committer goes on
        assert sorted(store.steps.load(fence.run_id)) == [1, 2, 7, 8, 9]
    finally:
        store.close()
