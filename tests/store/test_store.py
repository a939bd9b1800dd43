"""The system store, one suite run against SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from exchange.errors import StoreError
from exchange.workflows.store import records as r
from exchange.workflows.store.database import Database
from exchange.workflows.store.records import StepRecord
from exchange.workflows.store.runs import NewRun
from exchange.workflows.store.schema import LATEST_VERSION, current_version
from exchange.workflows.store.store import Store


def new_run(**kw: object) -> NewRun:
    values: dict[str, object] = dict(workflow="wf", params_json="{}", code_version="v1", created_by="tester")
    values.update(kw)
    return NewRun(**values)  # type: ignore[arg-type]


@pytest.fixture
def store(store_url: str) -> Store:
    s = Store(store_url)
    yield s  # type: ignore[misc]
    s.close()


def test_a_new_store_is_at_the_latest_schema_version(store: Store) -> None:
    with store.db.read() as conn:
        assert current_version(conn) == LATEST_VERSION


def test_an_upgrade_keeps_existing_runs(store_url: str) -> None:
    old = Database(store_url)
    old.migrate(target=1)  # the store as the first release left it
    with old.write() as conn:
        conn.execute(text(
            "INSERT INTO exchange_runs (id, workflow, status, params, queue, priority, code_version, "
            "cancel_requested, created_by, created_at, updated_at, executions) VALUES "
            "('old-run', 'wf', 'SUCCESS', '{}', 'default', 0, 'v0', 0, 'me', 1.0, 1.0, 1)"
        ))
    old.dispose()
    store = Store(store_url)
    try:
        with store.db.read() as conn:
            assert current_version(conn) == LATEST_VERSION
        rec = store.runs.get("old-run")
        assert rec is not None and rec.status == "SUCCESS"
        store.values.set("old-run", "k", "1")  # the table added by migration 2 works
        assert store.values.get("old-run", "k") == "1"
    finally:
        store.close()


def test_a_store_newer_than_the_code_is_refused(store: Store) -> None:
    with store.db.write() as conn:
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
    claimed = [rec.id for rec in store.runs.claim("node-a", 10, 30.0, ["default"])]
    assert a2 in claimed and b in claimed
    assert a1 not in claimed and q not in claimed  # one per partition; other queue untouched
    assert store.runs.claim("node-b", 10, 30.0, ["default"]) == []  # tank1 still active
    store.finish_run(a2, r.SUCCESS, owner="node-a", result_json="1")
    assert [rec.id for rec in store.runs.claim("node-b", 10, 30.0, ["default"])] == [a1]


def test_concurrent_claims_never_hand_one_run_to_two_gateways(store: Store) -> None:
    ids = {store.create_run(new_run())[0] for _ in range(40)}
    claimed: dict[str, list[str]] = {"n1": [], "n2": [], "n3": []}

    def claim(owner: str) -> None:
        while True:
            got = store.runs.claim(owner, 3, 30.0)
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


def test_reclaim_takes_own_runs_and_expired_leases_only(store: Store) -> None:
    mine, _ = store.create_run(new_run())
    theirs, _ = store.create_run(new_run())
    expired, _ = store.create_run(new_run())
    store.runs.claim("me", 1, 30.0)
    store.runs.claim("them", 1, 30.0)
    store.runs.claim("dead", 1, 0.01)
    time.sleep(0.05)  # let the 10 ms lease lapse
    got = {rec.id for rec in store.runs.reclaim("me", 30.0)}
    assert got == {mine, expired}
    assert store.runs.get(theirs).owner == "them"  # type: ignore[union-attr]


def test_only_the_owner_can_finish_a_run(store: Store) -> None:
    run_id, _ = store.create_run(new_run())
    store.runs.claim("me", 1, 30.0)
    assert not store.finish_run(run_id, r.SUCCESS, owner="stale-node", result_json="1")
    assert store.finish_run(run_id, r.SUCCESS, owner="me", result_json="1")
    assert not store.finish_run(run_id, r.ERROR, owner="me")  # final stays final


def test_steps_messages_and_events_round_trip_atomically(store: Store) -> None:
    run_id, _ = store.create_run(new_run())
    status, m1 = store.send_message(run_id, "cmd", {"cmd": "HOLD"}, actor="op", reason="break")
    assert status == "ENQUEUED" and m1 is not None
    assert store.send_message("missing-run", "cmd", {}, actor=None, reason=None) == (None, None)
    (pending,) = store.mailbox.pending(run_id, "cmd", 10)
    assert pending.id == m1 and pending.actor == "op"
    store.record_step_with_events(
        run_id,
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
    with pytest.raises(StoreError):  # the same sequence number twice is refused, not overwritten
        store.steps.record(run_id, duplicate, replace=False)
    with pytest.raises(StoreError, match="store"):  # the hot path too
        store.steps.insert_fast(run_id, duplicate)
    store.steps.insert_fast(run_id, StepRecord(seq=2, name="y", status="SUCCESS", attempts=1, output="2",
                                               started_at=1.0, finished_at=2.0))
    assert store.steps.load(run_id)[2].output == "2"
    assert store.steps.load(run_id)[1].name == "exchange.recvCommand"
    kinds = [e.kind for e in store.events.list(run_id)]
    assert kinds == ["status", "command"]


def test_progress_history_is_capped(store: Store) -> None:
    run_id, _ = store.create_run(new_run())
    for i in range(30):
        store.write_progress(run_id, f"p{i}", {"i": i}, history_max=10, step_seq=None)
    assert store.events.count(run_id, "progress") == 10
    rec = store.runs.get(run_id)
    assert rec is not None and rec.progress == "p29"


def test_a_failed_multi_statement_write_leaves_nothing_behind(store: Store) -> None:
    run_id, _ = store.create_run(new_run())
    _, message_id = store.send_message(run_id, "cmd", {"cmd": "STOP"}, actor="op", reason=None)
    assert message_id is not None
    store.steps.insert_fast(run_id, StepRecord(seq=1, name="a", status="SUCCESS", attempts=1, started_at=1.0))
    taken = StepRecord(seq=1, name="exchange.recvCommand", status="SUCCESS", attempts=1, started_at=1.0)
    with pytest.raises(StoreError):  # seq 1 is taken: the whole receive must roll back
        store.record_step_with_events(run_id, taken, replace=False, consumed_ids=[message_id],
                                      new_events=[("command", {"cmd": "STOP"}, "op", None)])
    with pytest.raises(ValueError, match="not columns"):
        store.record_step_with_events(run_id, StepRecord(seq=2, name="b", status="SUCCESS", attempts=1,
                                                         started_at=1.0), replace=False,
                                      consumed_ids=[message_id], run_fields={"no_such_column": 1})
    assert [m.id for m in store.mailbox.pending(run_id, "cmd", 10)] == [message_id]  # still unconsumed
    assert sorted(store.steps.load(run_id)) == [1]
    assert [e.kind for e in store.events.list(run_id)] == ["status"]
    # the thread's connection is still usable after both failures
    store.record_step_with_events(run_id, StepRecord(seq=2, name="b", status="SUCCESS", attempts=1,
                                                     started_at=1.0), replace=False, consumed_ids=[message_id])
    assert store.mailbox.pending(run_id, "cmd", 10) == []
