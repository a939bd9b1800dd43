"""The audit log of what people do outside runs (tags written by hand), on SQLite and PostgreSQL."""

from __future__ import annotations

from exchange._store.admin.audit import PENDING
from exchange._store.sql.database import Database
from exchange._store.store import Store
from exchange._store.tables import schema

DETAILS = {"device": "plc1", "address": "HR1", "value": 42, "old_value": 17, "old_quality": "Good"}


def test_an_entry_is_pending_until_finished_with_its_outcome(store: Store) -> None:
    entry_id = store.audit.begin("tag_write", "[p]Tank/Speed", actor="anna@hmi", reason="check", details=DETAILS)
    pending = store.audit.get(entry_id)
    assert pending is not None and pending.outcome == PENDING and pending.finished_at is None
    assert (pending.actor, pending.action, pending.target, pending.reason) == ("anna@hmi", "tag_write",
                                                                            "[p]Tank/Speed", "check")
    assert pending.details == DETAILS
    assert abs(pending.at - store.clock.now()) < 5

    store.audit.finish(entry_id, "WRITTEN", "acknowledged by the device")
    done = store.audit.get(entry_id)
    assert done is not None and (done.outcome, done.outcome_note) == ("WRITTEN", "acknowledged by the device")
    assert done.finished_at is not None and done.finished_at >= done.at
    assert store.audit.get(entry_id + 1) is None


def test_entries_are_the_newest_oldest_first_by_action_and_target(store: Store) -> None:
    ids = [store.audit.begin("tag_write", target, actor="bert", reason=None, details={"n": n})
           for n, target in enumerate(["[p]A", "[p]B", "[p]A", "[p]A"])]
    other = store.audit.begin("maintenance", "[p]A", actor="bert", reason=None, details=None)
    assert [e.id for e in store.audit.entries()] == [*ids, other]
    assert [e.id for e in store.audit.entries(action="tag_write", target="[p]A")] == [ids[0], ids[2], ids[3]]
    assert [e.id for e in store.audit.entries(action="tag_write", target="[p]A", limit=2)] == [ids[2], ids[3]]
    assert store.audit.entries(target="[p]C") == []
    assert [e.details for e in store.audit.entries(target="[p]B")] == [{"n": 1}]


def test_an_upgraded_store_gets_the_audit_log(empty_store_url: str) -> None:
    added_by = next(i for i, m in enumerate(schema.MIGRATIONS) if "audit log" in (m.__doc__ or ""))
    old = Database(empty_store_url)
    old.migrate(target=added_by)  # the store as the release before the audit log left it
    old.dispose()
    store = Store(empty_store_url)
    try:
        entry_id = store.audit.begin("tag_write", "[p]A", actor="carl", reason=None, details=DETAILS)
        assert [e.id for e in store.audit.entries()] == [entry_id]
    finally:
        store.close()
