"""Leases renewed per owner: a renewal writes the owner's one row however many runs it holds, and a
run is taken over only once its own grant and its owner's row have both run out. SQLite and
PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading
import time

from sqlalchemy import text

from exchange._store.runs.runs import Holder, NewRun
from exchange._store.store import Store


def holder(owner: str, lease_seconds: float = 30.0) -> Holder:
    return Holder(owner=owner, node=owner.split("/")[0], lease_seconds=lease_seconds)


def claimed(store: Store, owner: Holder, count: int) -> list[str]:
    for _ in range(count):
        store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="tester"), holder=None)
    return [rec.id for rec in store.runs.claim(owner, count)]


def own_grants(store: Store, run_ids: list[str]) -> dict[str, float]:
    """The runs' own lease column, as the claim wrote it (reads show the effective lease)."""
    with store.db.read() as conn:
        rows = conn.execute(text("SELECT id, lease_expires_at FROM exchange_runs")).all()
    return {row[0]: row[1] for row in rows if row[0] in run_ids}


def test_a_renewal_renews_every_run_of_its_owner_without_writing_them(store: Store) -> None:
    owner = holder("gw/1", lease_seconds=0.05)  # the claims' grants lapse at once
    store.runs.register_owner(owner.owner, 30.0)
    ids = claimed(store, owner, 3)
    grants = own_grants(store, ids)
    time.sleep(0.1)  # let the 50 ms grants lapse (fault set-up, not a wait for a condition)
    renewed = store.runs.heartbeat(owner.owner, 30.0)
    assert renewed == {run_id: 1 for run_id in ids}
    assert own_grants(store, ids) == grants, "the renewal wrote the run rows"
    assert store.runs.take_over_expired(holder("other/1")) == [], "runs of a renewing owner were taken"
    for run_id in ids:  # what people see is the lease as it stands
        rec = store.runs.get(run_id)
        assert rec is not None and rec.lease_expires_at is not None
        assert rec.lease_expires_at > store.clock.now() + 20


def test_once_the_owners_row_runs_out_its_runs_are_taken_and_its_renewal_drops_them(store: Store) -> None:
    owner = holder("gw/1", lease_seconds=0.05)
    store.runs.register_owner(owner.owner, 0.05)
    ids = claimed(store, owner, 2)
    time.sleep(0.1)
    taken = store.runs.take_over_expired(holder("rescuer/1"))
    assert sorted(rec.id for rec in taken) == sorted(ids)
    assert all(rec.owner == "rescuer/1" and rec.lease_generation == 2 for rec in taken)
    assert store.runs.heartbeat(owner.owner, 30.0) == {}, "a renewal still named runs another owner took"
    assert store.runs.take_over_expired(holder("third/1")) == []  # the rescuer's own grants are fresh


def test_a_run_is_kept_while_either_its_grant_or_its_owner_is_fresh(store: Store) -> None:
    quick = holder("gw/1", lease_seconds=0.05)
    store.runs.register_owner(quick.owner, 0.05)  # the owner's row lapses...
    (fresh_grant,) = claimed(store, holder("gw/1", lease_seconds=30.0), 1)  # ...but this grant does not
    time.sleep(0.1)
    assert store.runs.take_over_expired(holder("other/1")) == []
    assert store.runs.get(fresh_grant).owner == "gw/1"  # type: ignore[union-attr]


def test_a_node_recovery_takes_runs_of_owners_with_and_without_rows(store: Store) -> None:
    old = holder("node/1")
    store.runs.register_owner(old.owner, 30.0)  # alive by its row; the node lock says it is dead
    with_row = claimed(store, old, 1)
    without_row = claimed(store, holder("node/0"), 1)  # a process older than owner rows
    got = store.runs.recover_node(holder("node/2"), expired_only=False)
    assert sorted(rec.id for rec in got) == sorted(with_row + without_row)
    assert store.runs.heartbeat(old.owner, 30.0) == {}


def test_out_of_date_owner_rows_go_only_when_their_owner_holds_nothing(store: Store) -> None:
    busy = holder("busy/1")
    store.runs.register_owner(busy.owner, 30.0)
    claimed(store, busy, 1)
    store.runs.register_owner("gone/1", 30.0)
    with store.db.transaction() as conn:  # both rows two hours out of date
        conn.execute(text("UPDATE exchange_owners SET lease_expires_at = lease_expires_at - 7300"))
    store.runs.register_owner("idle/1", 30.0)
    assert store.runs.heartbeat("idle/1", 30.0) == {}  # an owner holding nothing tidies up
    with store.db.read() as conn:
        left = {row[0] for row in conn.execute(text("SELECT owner FROM exchange_owners"))}
    assert left == {"busy/1", "idle/1"}


def test_an_owner_whose_row_is_gone_renews_nothing_then_gets_it_back(store: Store) -> None:
    owner = holder("gw/1")
    store.runs.register_owner(owner.owner, 30.0)
    ids = claimed(store, owner, 1)
    with store.db.transaction() as conn:
        conn.execute(text("DELETE FROM exchange_owners"))
    assert store.runs.heartbeat(owner.owner, 30.0) == {}, "runs renewed by a row that was not there"
    assert store.runs.heartbeat(owner.owner, 30.0) == {ids[0]: 1}  # the row is back


def test_a_takeover_skips_an_owner_renewing_at_that_moment(pg_url: str) -> None:
    """PostgreSQL: a renewal holds its owner's row until it commits; a takeover that finds the row
    locked leaves the owner's runs alone (it would otherwise take runs the renewal is about to
    count as renewed), and takes them once the row is free and still out of date."""
    store = Store(pg_url)
    try:
        owner = holder("gw/1", lease_seconds=0.05)
        store.runs.register_owner(owner.owner, 0.05)
        ids = claimed(store, owner, 2)
        time.sleep(0.1)
        renewing = store.db.engine.connect()
        try:
            transaction = renewing.begin()
            renewing.execute(text("SELECT 1 FROM exchange_owners WHERE owner = 'gw/1' FOR UPDATE"))
            assert store.runs.take_over_expired(holder("rescuer/1")) == []
            transaction.rollback()
        finally:
            renewing.close()
        assert sorted(rec.id for rec in store.runs.take_over_expired(holder("rescuer/1"))) == sorted(ids)
    finally:
        store.close()


def test_a_takeover_that_finds_nothing_expired_takes_no_write_lock(sqlite_url: str) -> None:
    """SQLite: the keeper looks for expired leases every second. With nothing expired the look is a
    read, so it neither waits for nor holds the store's one write lock (here another process holds
    it, as `exchange send` or a second gateway's commit does); before, every look opened a write
    transaction and waited up to the busy timeout (30 s) behind any writer."""
    store = Store(sqlite_url)
    try:
        owner = holder("gw/1")
        store.runs.register_owner(owner.owner, 30.0)
        claimed(store, owner, 2)
        writer = sqlite3.connect(sqlite_url[len("sqlite:///"):], timeout=0, isolation_level=None)
        answers: list[object] = []
        try:
            writer.execute("BEGIN IMMEDIATE")
            looker = threading.Thread(target=lambda: answers.append(store.runs.take_over_expired(holder("other/1"))))
            looker.start()
            looker.join(timeout=5.0)
            assert answers == [[]], "the look waited for the write lock another connection holds"
        finally:
            writer.execute("ROLLBACK")
            writer.close()
            looker.join()
        # Once a lease has run out, the same call still takes the run.
        with store.db.transaction() as conn:
            conn.execute(text("UPDATE exchange_owners SET lease_expires_at = 0"))
            conn.execute(text("UPDATE exchange_runs SET lease_expires_at = 0"))
        assert len(store.runs.take_over_expired(holder("other/1"))) == 2
    finally:
        store.close()
