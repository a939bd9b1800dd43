"""Each mailbox message knows what became of it (schema 4), on SQLite and PostgreSQL; messages a store
of schema 3 consumed are read from the receive's events."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from exchange._engine.operator import command_fate
from exchange._store.records import MESSAGE_DROPPED, Fence, StepRecord
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.sql.database import Database
from exchange._store.store import Store
from exchange.errors import UnknownRun, WorkflowError


def held_run(store: Store) -> Fence:
    run_id, _ = store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="me"),
                                 holder=Holder(owner="gw/1", node="gw", lease_seconds=30.0))
    return Fence(run_id, "gw/1", 1)


def post(store: Store, run_id: str, cmd: str) -> int:
    _, message_id = store.send_message(run_id, "cmd", {"cmd": cmd}, actor="op", reason=None)
    assert message_id is not None
    return message_id


def receive(seq: int) -> StepRecord:
    return StepRecord(seq=seq, name="exchange.recvCommand", status="SUCCESS", attempts=1, started_at=1.0)


def test_a_receive_records_what_became_of_each_message(store_url: str) -> None:
    store = Store(store_url)
    try:
        fence = held_run(store)
        run_id = fence.run_id
        hold, resume, later = (post(store, run_id, c) for c in ("HOLD", "RESUME", "STOP"))
        store.record_step_with_events(
            fence, receive(1), replace=False, consumed_ids=[hold, resume],
            new_events=[("command", {"cmd": "HOLD", "message_id": hold, "state": "RUNNING"}, "op", None)],
            outcomes={hold: ("CONSUMED", "accepted in state RUNNING"),
                      resume: (MESSAGE_DROPPED, "RESUME is not accepted in state RUNNING")},
        )
        store.report_state(fence, "HELD", actor="gw/1")
        fates = {m: store.mailbox.fate(m) for m in (hold, resume, later)}
        assert (fates[hold].outcome, fates[hold].consumed_seq) == ("CONSUMED", 1)
        assert (fates[resume].outcome, fates[resume].outcome_note) == (
            "DROPPED", "RESUME is not accepted in state RUNNING")
        assert fates[later].consumed_at is None and fates[later].outcome is None

        held = command_fate.outcome(store, run_id, hold)
        assert (held["outcome"], held["cmd"], held["state_after"], held["step_seq"]) == ("CONSUMED", "HOLD", "HELD", 1)
        assert command_fate.outcome(store, run_id, resume)["outcome"] == "DROPPED"
        assert command_fate.outcome(store, run_id, later)["outcome"] == "WAITING"
        assert store.mailbox.waiting_before(run_id, "cmd")[0].id == later
        with pytest.raises(WorkflowError, match=f"has no message {later + 1}"):
            command_fate.outcome(store, run_id, later + 1)
        with pytest.raises(UnknownRun):
            command_fate.outcome(store, "no-such-run", hold)
        # A plain receive without notes: CONSUMED.
        store.record_step_with_events(fence, receive(2), replace=False, consumed_ids=[later])
        assert store.mailbox.fate(later).outcome == "CONSUMED"  # type: ignore[union-attr]
    finally:
        store.close()


def test_an_upgrade_from_schema_3_reads_old_outcomes_from_the_events(empty_store_url: str) -> None:
    old = Database(empty_store_url)
    old.migrate(target=3)
    with old.transaction() as conn:  # the mailbox as release 3 left it
        conn.execute(text("ALTER TABLE exchange_mailbox DROP COLUMN outcome"))
        conn.execute(text("ALTER TABLE exchange_mailbox DROP COLUMN outcome_note"))
    old.dispose()
    old = Database(empty_store_url)  # a fresh connection pool: no statement cached with the dropped columns
    with old.transaction() as conn:
        conn.execute(text(
            "INSERT INTO exchange_runs (id, workflow, status, state, params, queue, priority, code_version, "
            "cancel_requested, created_by, created_at, updated_at, executions) VALUES "
            "('old-run', 'wf', 'RUNNING', 'HELD', '{}', 'default', 0, 'v0', 0, 'me', 1.0, 1.0, 1)"))
        for message_id, cmd, consumed in ((1, "HOLD", 1), (2, "RESUME", 1), (3, "STOP", None)):
            conn.execute(text(
                "INSERT INTO exchange_mailbox (id, run_id, topic, payload, actor, sent_at, consumed_seq, "
                "consumed_at) VALUES (:id, 'old-run', 'cmd', :payload, 'op', 1.0, :seq, :at)"),
                {"id": message_id, "payload": '{"cmd": "%s"}' % cmd, "seq": consumed,
                 "at": None if consumed is None else 2.0})
        events = (("command", '{"cmd": "HOLD", "message_id": 1, "state": "RUNNING"}', None, 1),
                  ("command_dropped", '{"cmd": "RESUME", "message_id": 2, "state": "RUNNING"}',
                   "RESUME is not accepted in state RUNNING", 1),
                  ("state", '{"state": "HELD"}', None, None))
        for kind, payload, reason, seq in events:
            conn.execute(text(
                "INSERT INTO exchange_events (run_id, kind, at, reason, step_seq, payload) "
                "VALUES ('old-run', :kind, 3.0, :reason, :seq, :payload)"),
                {"kind": kind, "reason": reason, "seq": seq, "payload": payload})
    old.dispose()

    store = Store(empty_store_url)
    try:
        held = command_fate.outcome(store, "old-run", 1)
        assert (held["outcome"], held["note"], held["state_after"]) == ("CONSUMED", "accepted in state RUNNING", "HELD")
        dropped = command_fate.outcome(store, "old-run", 2)
        assert (dropped["outcome"], dropped["note"]) == ("DROPPED", "RESUME is not accepted in state RUNNING")
        assert command_fate.outcome(store, "old-run", 3)["outcome"] == "WAITING"
        assert command_fate.judge(store, "old-run", "HOLD") == (
            "HOLD is not accepted in state STOPPED (the state the run is expected to report after the 1 "
            "command(s) waiting before it)")
        assert command_fate.judge(store, "old-run", "RESET") is None  # STOPPED accepts RESET
    finally:
        store.close()
