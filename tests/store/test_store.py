"""The system store, one suite run against SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from pytest_mock import MockerFixture
from sqlalchemy import text

from exchange._store import records as r
from exchange._store.records import Fence, StepRecord
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.sql.database import Database
from exchange._store.store import Store
from exchange._store.tables.schema import LATEST_VERSION, current_version
from exchange.errors import OwnershipLost, StoreDataError, StoreError
from tests.waiting import wait_until


def new_run(**kw: object) -> NewRun:
    values: dict[str, object] = dict(workflow="wf", params_json="{}", code_version="v1", created_by="tester")
    values.update(kw)
    return NewRun(**values)  # type: ignore[arg-type]


def holder(owner: str, lease_seconds: float = 30.0) -> Holder:
    return Holder(owner=owner, node=owner.split("/")[0], lease_seconds=lease_seconds)


def held_run(store: Store, owner: str = "me", **kw: object) -> Fence:
    """A run created held by ``owner`` (as ``exchange run`` does); returns its fence."""
    run_id, _ = store.create_run(new_run(**kw), holder=holder(owner))
    return Fence(run_id, owner, 1)


def test_a_new_store_is_at_the_latest_schema_version(empty_store_url: str) -> None:
    store = Store(empty_store_url)  # an empty database: this open migrates it
    try:
        with store.db.read() as conn:
            assert current_version(conn) == LATEST_VERSION
    finally:
        store.close()


def test_an_upgrade_keeps_existing_runs(empty_store_url: str) -> None:
    old = Database(empty_store_url)
    old.migrate(target=1)  # the store as the first release left it
    with old.transaction() as conn:
        conn.execute(text(
            "INSERT INTO exchange_runs (id, workflow, status, params, queue, priority, code_version, "
            "cancel_requested, created_by, created_at, updated_at, executions) VALUES "
            "('old-run', 'wf', 'SUCCESS', '{}', 'default', 0, 'v0', 0, 'me', 1.0, 1.0, 1)"
        ))
    old.dispose()
    store = Store(empty_store_url)
    try:
        with store.db.read() as conn:
            assert current_version(conn) == LATEST_VERSION
        rec = store.runs.get("old-run")
        assert rec is not None and rec.status == "SUCCESS"
        fence = held_run(store)
        store.values.set(fence, "k", "1")  # the table added by migration 2 works
        assert store.values.get(fence.run_id, "k") == "1"
    finally:
        store.close()


def test_an_upgrade_from_schema_2_fences_old_runs_and_repairs_shared_partitions(empty_store_url: str) -> None:
    """A store as release 2 left it: no fencing columns, and (the old claim's race) two active runs of
    one partition key. The upgrade keeps every run and puts all but one of those back in the queue."""
    old = Database(empty_store_url)
    old.migrate(target=2)
    with old.transaction() as conn:
        conn.execute(text("DROP INDEX uq_exchange_runs_active_partition"))
        conn.execute(text("DROP INDEX ix_exchange_runs_owner_node"))
        conn.execute(text("ALTER TABLE exchange_runs DROP COLUMN owner_node"))
        conn.execute(text("ALTER TABLE exchange_runs DROP COLUMN lease_generation"))
        old_runs = (("first", "RUNNING", 1.0), ("second", "RUNNING", 2.0), ("done", "SUCCESS", 0.5))
        for run_id, status, started in old_runs:
            conn.execute(text(
                "INSERT INTO exchange_runs (id, workflow, status, params, queue, partition_key, priority, "
                "code_version, owner, lease_expires_at, cancel_requested, created_by, created_at, updated_at, "
                "started_at, executions) VALUES (:id, 'wf', :status, '{}', 'default', 'tank1', 0, 'v0', "
                "'gw-old', 9e9, 0, 'me', 1.0, 1.0, :started, 1)"
            ), {"id": run_id, "status": status, "started": started})
    old.dispose()
    store = Store(empty_store_url)
    try:
        first, second, done = (store.runs.get(i) for i in ("first", "second", "done"))
        assert first is not None and first.status == "RUNNING" and first.owner_node == "gw-old"
        assert first.lease_generation == 1
        assert second is not None and second.status == "ENQUEUED" and second.owner is None
        assert done is not None and done.status == "SUCCESS"
        (recovered,) = store.runs.recover_node(Holder("gw-old/2", "gw-old", 30.0), expired_only=False)
        assert recovered.id == "first" and recovered.lease_generation == 2
    finally:
        store.close()


def test_a_store_newer_than_the_code_is_refused(store: Store) -> None:
    with store.db.transaction() as conn:
        conn.execute(text("UPDATE exchange_schema SET version = 999 WHERE id = 1"))
    with pytest.raises(StoreError, match="schema version 999, newer than this Exchange"):
        Store(store.db.url)


def test_an_unusable_store_url_is_a_clear_error(tmp_path: object) -> None:
    with pytest.raises(StoreError, match="not a valid database URL"):
        Store("this is not a url")
    with pytest.raises(StoreError, match="unsupported backend 'mysql'"):
        Store("mysql://u@localhost/db")
    with pytest.raises(StoreError, match="store postgresql"):
        Store("postgresql+psycopg://nobody:secret@127.0.0.1:1/none")


def test_deduplication_id_returns_the_first_run_even_when_starts_race(store: Store) -> None:
    results: list[tuple[str, bool]] = []

    def start() -> None:
        results.append(store.create_run(new_run(dedup_id="lot-7")))

    threads = [threading.Thread(target=start) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({run_id for run_id, _ in results}) == 1
    assert sum(created for _, created in results) == 1


def test_claim_respects_priority_partition_and_queue(store: Store) -> None:
    a1, _ = store.create_run(new_run(partition_key="tank1", priority=1))
    a2, _ = store.create_run(new_run(partition_key="tank1", priority=5))
    b, _ = store.create_run(new_run(partition_key="tank2"))
    q, _ = store.create_run(new_run(queue="other"))
    claimed = {rec.id: rec for rec in store.runs.claim(holder("node-a"), 10, ["default"])}
    assert a2 in claimed and b in claimed
    assert a1 not in claimed and q not in claimed  # one per partition; other queue untouched
    assert store.runs.claim(holder("node-b"), 10, ["default"]) == []  # tank1 still active
    assert store.finish_run(claimed[a2].fence(), r.SUCCESS, result_json="1")
    assert [rec.id for rec in store.runs.claim(holder("node-b"), 10, ["default"])] == [a1]


def test_concurrent_claims_never_hand_one_run_to_two_gateways(store: Store) -> None:
    ids = {store.create_run(new_run())[0] for _ in range(40)}
    claimed: dict[str, list[str]] = {"n1": [], "n2": [], "n3": []}

    def claim(owner: str) -> None:
        while True:
            got = store.runs.claim(holder(owner), 3)
            if not got:
                return
            claimed[owner].extend(rec.id for rec in got)

    threads = [threading.Thread(target=claim, args=(owner,)) for owner in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [run_id for owned in claimed.values() for run_id in owned]
    assert sorted(everything) == sorted(ids)  # each claimed exactly once


def test_recovery_takes_the_nodes_runs_and_takeover_only_expired_leases(store: Store) -> None:
    mine, _ = store.create_run(new_run())
    theirs, _ = store.create_run(new_run())
    expired, _ = store.create_run(new_run())
    (first,) = store.runs.claim(holder("me/1"), 1)
    store.runs.claim(holder("them/1"), 1)
    store.runs.claim(holder("dead/1", lease_seconds=0.01), 1)
    time.sleep(0.05)  # let the 10 ms lease lapse (fault set-up, not a wait for a condition)
    (recovered,) = store.runs.recover_node(holder("me/2"), expired_only=False)  # "me" restarted
    assert recovered.id == first.id == mine and recovered.owner == "me/2"
    assert recovered.lease_generation == first.lease_generation + 1
    (taken,) = store.runs.take_over_expired(holder("me/2"), exclude={mine})
    assert taken.id == expired and taken.owner == "me/2" and taken.owner_node == "me"
    assert store.runs.get(theirs).owner == "them/1"  # type: ignore[union-attr]
    assert store.runs.take_over_expired(holder("other/1")) == []  # every lease is fresh now


def test_a_takeover_by_a_gateway_serving_some_queues_takes_only_their_runs(store: Store) -> None:
    """A gateway started with --queue never executes another queue's runs, not even a dead gateway's
    (it may not have their workflows, or their line's devices)."""
    line1, _ = store.create_run(new_run(queue="line1"))
    line2, _ = store.create_run(new_run(queue="line2"))
    store.runs.claim(holder("dead/1", lease_seconds=0.01), 2)
    time.sleep(0.05)  # let the 10 ms lease lapse (fault set-up, not a wait for a condition)
    assert store.runs.take_over_expired(holder("other/1"), queues=["line3"]) == []
    (taken,) = store.runs.take_over_expired(holder("line2gw/1"), queues=["line2"])
    assert taken.id == line2 and taken.owner == "line2gw/1"
    assert store.runs.get(line1).owner == "dead/1"  # type: ignore[union-attr]
    (taken,) = store.runs.take_over_expired(holder("all/1"))  # no queues: every queue
    assert taken.id == line1


def test_recovery_with_an_uncertain_predecessor_takes_only_expired_leases(store: Store) -> None:
    store.create_run(new_run())
    store.create_run(new_run())
    fresh, stale = store.runs.claim(holder("me/1", lease_seconds=0.01), 1) + store.runs.claim(holder("me/1"), 1)
    time.sleep(0.05)
    got = store.runs.recover_node(holder("me/2"), expired_only=True)
    assert [rec.id for rec in got] == [fresh.id]
    assert store.runs.get(stale.id).owner == "me/1"  # type: ignore[union-attr]


def test_an_owned_run_has_a_lease_from_its_first_write_and_orphans_are_taken_over(store: Store) -> None:
    fence = held_run(store, "runner/7")
    rec = store.runs.get(fence.run_id)
    assert rec is not None and rec.status == r.PENDING and rec.lease_generation == 1
    assert rec.lease_expires_at is not None and rec.lease_expires_at > store.clock.now() + 20
    orphan, _ = store.create_run(new_run())
    nulls, _ = store.create_run(new_run())
    with store.db.transaction() as conn:  # what older versions could leave: active with no owner or no lease
        conn.execute(text("UPDATE exchange_runs SET status = 'RUNNING', owner = NULL WHERE id = :i"), {"i": orphan})
        conn.execute(text("UPDATE exchange_runs SET status = 'RUNNING', owner = 'x/1', lease_expires_at = NULL "
                          "WHERE id = :i"), {"i": nulls})
    got = {rec.id for rec in store.runs.take_over_expired(holder("rescuer/1"))}
    assert got == {orphan, nulls}


def test_leases_follow_the_store_clock_not_the_local_one(store: Store, mocker: MockerFixture) -> None:
    run_id, _ = store.create_run(new_run())
    real_now = time.time()
    mocker.patch("time.time", return_value=real_now + 3600.0)  # this machine's clock is an hour ahead
    store.clock.sync()
    assert abs(store.clock.now() - real_now) < 5  # the offset corrects it
    (rec,) = store.runs.claim(holder("skewed/1", lease_seconds=30.0), 1)
    assert rec.id == run_id and rec.lease_expires_at is not None
    assert abs(rec.lease_expires_at - (real_now + 30.0)) < 5  # computed by the database's clock
    assert store.runs.take_over_expired(holder("other/1")) == []  # not expired by a skewed clock


def test_only_the_current_fence_can_finish_a_run(store: Store) -> None:
    run_id, _ = store.create_run(new_run())
    (rec,) = store.runs.claim(holder("me/1"), 1)
    fence = rec.fence()
    assert not store.finish_run(Fence(run_id, "stale/1", fence.generation), r.SUCCESS, result_json="1")
    assert not store.finish_run(Fence(run_id, fence.owner, fence.generation - 1), r.SUCCESS, result_json="1")
    assert store.finish_run(fence, r.SUCCESS, result_json="1")
    assert not store.finish_run(fence, r.ERROR)  # final stays final


def test_every_write_of_a_stale_execution_is_refused_and_changes_nothing(store: Store) -> None:
    """A gateway that lost its run (paused past its lease, taken over) writes nothing more."""
    run_id, _ = store.create_run(new_run())
    (rec,) = store.runs.claim(holder("old/1", lease_seconds=0.01), 1)
    stale = rec.fence()
    store.steps.record(stale, StepRecord(seq=1, name="a", status="RETRYING", attempts=1, started_at=1.0),
                       replace=False)
    _, message_id = store.send_message(run_id, "cmd", {"cmd": "HOLD"}, actor="op", reason=None)
    assert message_id is not None
    time.sleep(0.05)
    (taken,) = store.runs.take_over_expired(holder("new/1"))
    assert taken.lease_generation == stale.generation + 1
    events_before = store.events.list(run_id)
    step = StepRecord(seq=2, name="b", status="SUCCESS", attempts=1, output="1", started_at=1.0)
    writes = {
        "step insert": lambda: store.steps.record(stale, step, replace=False),
        "step update": lambda: store.steps.record(
            stale, StepRecord(seq=1, name="a", status="SUCCESS", attempts=2, started_at=1.0), replace=True),
        "receive": lambda: store.record_step_with_events(stale, step, replace=False, consumed_ids=[message_id],
                                                         new_events=[("command", {"cmd": "HOLD"}, "op", None)]),
        "event": lambda: store.events.add_fenced(stale, "tag_write", {"tag": "x"}),
        "tail": lambda: store.runs.set_fields(stale, "a sleep", quiet_after_seq=1, quiet_ops=3),
        "value": lambda: store.values.set(stale, "k", "1"),
        "progress": lambda: store.write_progress(stale, "p", None, history_max=10, step_seq=None),
        "state": lambda: store.report_state(stale, "HELD", actor="x"),
    }
    accepted = []
    for what, write in writes.items():
        try:
            write()
            accepted.append(what)
        except OwnershipLost:
            pass
    assert accepted == []
    assert store.finish_run(stale, r.SUCCESS, result_json="1") is False
    assert store.start_execution(stale, 30.0) is None
    after = store.runs.get(run_id)
    assert after is not None and after.status == r.PENDING and after.owner == "new/1"
    assert after.quiet_ops is None and after.progress is None and after.state is None
    assert {s.seq: s.status for s in store.steps.load(run_id).values()} == {1: "RETRYING"}
    assert [m.id for m in store.mailbox.pending(run_id, "cmd", 10)] == [message_id]
    assert store.values.get(run_id, "k") is None
    assert store.events.list(run_id) == events_before
    assert store.start_execution(taken.fence(), 30.0) is not None  # the new owner goes on


def test_a_command_is_consumed_once_even_by_two_executions(store: Store) -> None:
    fence = held_run(store)
    _, message_id = store.send_message(fence.run_id, "cmd", {"cmd": "STOP"}, actor="op", reason=None)
    assert message_id is not None
    first = StepRecord(seq=1, name="exchange.recvCommand", status="SUCCESS", attempts=1, started_at=1.0)
    store.record_step_with_events(fence, first, replace=False, consumed_ids=[message_id])
    again = StepRecord(seq=2, name="exchange.recvCommand", status="SUCCESS", attempts=1, started_at=1.0)
    with pytest.raises(OwnershipLost, match="consumed by another execution"):
        store.record_step_with_events(fence, again, replace=False, consumed_ids=[message_id])
    assert sorted(store.steps.load(fence.run_id)) == [1]


def test_the_database_keeps_one_active_run_per_partition_key(store: Store) -> None:
    store.create_run(new_run(partition_key="tank1"))
    second, _ = store.create_run(new_run(partition_key="tank1"))
    store.runs.claim(holder("a/1"), 1)
    with pytest.raises(StoreDataError, match="refused"), store.db.transaction() as conn:  # even a direct UPDATE
        conn.execute(text("UPDATE exchange_runs SET status = 'RUNNING' WHERE id = :i"), {"i": second})
    from exchange.errors import WorkflowError

    with pytest.raises(WorkflowError, match="partition key 'tank1' already has an active run"):
        held_run(store, partition_key="tank1")


def test_claims_racing_from_many_gateways_activate_one_run_per_key(store: Store) -> None:
    keys = [f"line{i}" for i in range(4)]
    for _ in range(5):
        for key in keys:
            store.create_run(new_run(partition_key=key))
    barrier = threading.Barrier(6)
    claimed: list[r.RunRecord] = []
    lock = threading.Lock()

    def claim(owner: str) -> None:
        barrier.wait()
        got = store.runs.claim(holder(owner), 20)
        with lock:
            claimed.extend(got)

    threads = [threading.Thread(target=claim, args=(f"gw{i}/1",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(rec.partition_key for rec in claimed) == keys  # type: ignore[type-var]


def test_bad_data_is_named_and_not_an_outage(store: Store) -> None:
    fence = held_run(store)
    with pytest.raises(StoreDataError, match=r"refused a value in run .*: progress: UnicodeEncodeError"):
        store.write_progress(fence, "bad \udc80 text", None, history_max=10, step_seq=None)
    if store.db.backend.name != "sqlite":
        with pytest.raises(StoreDataError, match="NUL"):
            store.write_progress(fence, "nul \x00 byte", None, history_max=10, step_seq=None)
        with pytest.raises(StoreDataError):
            store.create_run(new_run(queue="q" * 500))
    store.write_progress(fence, "fine", None, history_max=10, step_seq=None)  # the connection still works
    assert store.runs.get(fence.run_id).progress == "fine"  # type: ignore[union-attr]


def test_the_node_row_names_the_lock_holder(store: Store) -> None:
    assert store.nodes.take("plant-1", "plant-1/10-aa") is None
    assert store.nodes.touch("plant-1", "plant-1/10-aa")
    previous = store.nodes.take("plant-1", "plant-1/11-bb")
    assert previous is not None and previous.owner == "plant-1/10-aa"
    assert not store.nodes.touch("plant-1", "plant-1/10-aa")  # the old holder learns it lost the lock
    assert store.nodes.touch("plant-1", "plant-1/11-bb")


def test_steps_messages_and_events_round_trip_atomically(store: Store) -> None:
    fence = held_run(store)
    run_id = fence.run_id
    status, m1 = store.send_message(run_id, "cmd", {"cmd": "HOLD"}, actor="op", reason="break")
    assert status == "PENDING" and m1 is not None
    assert store.send_message("missing-run", "cmd", {}, actor=None, reason=None) == (None, None)
    (pending,) = store.mailbox.pending(run_id, "cmd", 10)
    assert pending.id == m1 and pending.actor == "op"
    store.record_step_with_events(
        fence,
        StepRecord(seq=1, name="exchange.recvCommand", status="SUCCESS", attempts=1, output='{"cmd":"HOLD"}',
                   skipped_ops=4, started_at=1.0, finished_at=1.0),
        replace=False,
        consumed_ids=[pending.id],
        new_events=[("command", {"cmd": "HOLD"}, "op", "break")],
    )
    assert store.mailbox.pending(run_id, "cmd", 10) == []
    (step,) = store.steps.load(run_id).values()
    assert step.skipped_ops == 4 and step.output == '{"cmd":"HOLD"}'
    duplicate = StepRecord(seq=1, name="x", status="SUCCESS", attempts=1, started_at=1.0)
    with pytest.raises(StoreDataError, match="sequence 1"):  # the same number twice is refused, not overwritten
        store.steps.record(fence, duplicate, replace=False)
    store.steps.record(fence, StepRecord(seq=2, name="y", status="SUCCESS", attempts=1, output="2",
                                         started_at=1.0, finished_at=2.0), replace=False)
    assert store.steps.load(run_id)[2].output == "2"
    assert store.steps.load(run_id)[1].name == "exchange.recvCommand"
    kinds = [e.kind for e in store.events.list(run_id)]
    assert kinds == ["status", "command"]


def test_progress_history_is_capped(store: Store) -> None:
    fence = held_run(store)
    for i in range(30):
        store.write_progress(fence, f"p{i}", {"i": i}, history_max=10, step_seq=None)
    assert store.events.count(fence.run_id, "progress") == 10
    rec = store.runs.get(fence.run_id)
    assert rec is not None and rec.progress == "p29"


def test_a_failed_multi_statement_write_leaves_nothing_behind(store: Store) -> None:
    fence = held_run(store)
    run_id = fence.run_id
    _, message_id = store.send_message(run_id, "cmd", {"cmd": "STOP"}, actor="op", reason=None)
    assert message_id is not None
    store.steps.record(fence, StepRecord(seq=1, name="a", status="SUCCESS", attempts=1, started_at=1.0),
                       replace=False)
    taken = StepRecord(seq=1, name="exchange.recvCommand", status="SUCCESS", attempts=1, started_at=1.0)
    with pytest.raises(StoreDataError):  # seq 1 is taken: the whole receive must roll back
        store.record_step_with_events(fence, taken, replace=False, consumed_ids=[message_id],
                                      new_events=[("command", {"cmd": "STOP"}, "op", None)])
    with pytest.raises(ValueError, match="not columns"):
        store.record_step_with_events(fence, StepRecord(seq=2, name="b", status="SUCCESS", attempts=1,
                                                         started_at=1.0), replace=False,
                                      consumed_ids=[message_id], run_fields={"no_such_column": 1})
    assert [m.id for m in store.mailbox.pending(run_id, "cmd", 10)] == [message_id]  # still unconsumed
    assert sorted(store.steps.load(run_id)) == [1]
    assert [e.kind for e in store.events.list(run_id)] == ["status"]
    # the thread's connection is still usable after both failures
    store.record_step_with_events(fence, StepRecord(seq=2, name="b", status="SUCCESS", attempts=1,
                                                     started_at=1.0), replace=False, consumed_ids=[message_id])
    assert store.mailbox.pending(run_id, "cmd", 10) == []


def test_pooled_connections_killed_while_idle_are_replaced_without_an_error(pg_url: str) -> None:
    """After a store restart every idle pooled connection is dead: reads and writes must open new
    ones instead of reporting an outage that is over (a standby taking over used to exit on this)."""
    store = Store(pg_url)
    try:
        fence = held_run(store)
        store.send_message(fence.run_id, "t", "{}", actor="x", reason=None)
        assert store.mailbox.highest_id() > 0  # the reader pool and the committer hold connections now
        store.report_state(fence, "RUNNING", actor="x")
        with store.db.engine.connect() as conn:
            killed = conn.execute(text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )).scalar_one()
            # Gone, as after a restart (the committer's connection was used a moment ago: the next
            # write must still notice it is dead rather than pipeline its batch into it).
            def others() -> int:
                conn.rollback()  # a transaction keeps the statistics it first read
                return int(conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()"
                )).scalar_one())

            wait_until(lambda: others() == 0, 10, message="the killed sessions gone")
        assert killed >= 2
        assert store.mailbox.highest_id() > 0
        store.clock.sync()
        store.report_state(fence, "HELD", actor="x")
        assert store.runs.get(fence.run_id).state == "HELD"
    finally:
        store.close()

def test_a_key_activated_between_the_scan_and_the_take_refuses_only_its_own_run(
    pg_url: str, mocker: MockerFixture
) -> None:
    """PostgreSQL: another gateway activates a run of key ``k`` after this claim chose its
    candidates. The unique index refuses the run of ``k``; the claim still takes the other one (the
    batch falls back to one run per savepoint) and leaves the refused run queued."""
    store = Store(pg_url)
    try:
        first, _ = store.create_run(new_run(partition_key="k", priority=10))
        other, _ = store.create_run(new_run(priority=5))
        for _ in range(6):  # fill the scan (4 x the limit), so the second run of k lies beyond it
            store.create_run(new_run(priority=5))
        late, _ = store.create_run(new_run(partition_key="k", priority=0))
        take = store.runs._take_enqueued

        def another_gateway_first(*args: object, **kwargs: object) -> list[r.RunRecord]:
            with store.db.engine.begin() as conn:  # committed before this claim's take
                conn.execute(text("UPDATE exchange_runs SET status = 'RUNNING', owner = 'other/1' WHERE id = :i"),
                             {"i": late})
            return take(*args, **kwargs)  # type: ignore[arg-type]

        mocker.patch.object(store.runs, "_take_enqueued", side_effect=another_gateway_first)
        got = store.runs.claim(holder("me/1"), 2)
        assert [rec.id for rec in got] == [other]
        assert store.runs.get(first).status == r.ENQUEUED  # type: ignore[union-attr]
    finally:
        store.close()


def test_a_key_whose_oldest_run_another_claim_has_locked_is_skipped_whole(pg_url: str) -> None:
    """PostgreSQL: a claim skips the rows another claim has locked (SKIP LOCKED). When that row is
    the oldest queued run of a partition key (a start's claim for a free worker scans it, another
    gateway's claim holds it until its commit), the key's next run must not go first: runs of one
    key start in the order they were queued."""
    store = Store(pg_url)
    try:
        first, _ = store.create_run(new_run(partition_key="k"))
        second, _ = store.create_run(new_run(partition_key="k"))
        plain, _ = store.create_run(new_run())
        with store.db.engine.connect() as other_claim:
            other_claim.execute(text("SELECT id FROM exchange_runs WHERE id = :i FOR UPDATE"), {"i": first})
            assert [rec.id for rec in store.runs.claim(holder("me/1"), 4)] == [plain]
            other_claim.rollback()  # the other claim took nothing
        assert store.runs.get(second).status == r.ENQUEUED  # type: ignore[union-attr]
        assert [rec.id for rec in store.runs.claim(holder("me/1"), 4)] == [first]
        assert store.runs.count_claimable() == 0  # second waits behind its key's active run
    finally:
        store.close()


def test_a_keyed_run_queued_in_another_queue_does_not_hold_this_queues_runs_of_the_key(store: Store) -> None:
    elsewhere, _ = store.create_run(new_run(partition_key="k", queue="packaging"))  # no gateway serves it here
    here, _ = store.create_run(new_run(partition_key="k"))
    assert [rec.id for rec in store.runs.claim(holder("me/1"), 4, ["default"])] == [here]
    assert store.runs.get(elsewhere).status == r.ENQUEUED  # type: ignore[union-attr]
