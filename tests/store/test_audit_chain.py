"""The tamper-evident audit chain of a run (exchange._store.sql.chain), on SQLite and PostgreSQL:
a run written the ordinary ways (start, steps begun and finished, events of a step, commands, states,
values, a retry) checks ``ok``; an edit made with raw SQL (a command's reason changed, a step's output
changed, a step deleted, the newest event deleted) is ``tampered``, naming the entry; a run written
before the chain existed is ``unchained``; commands sent from several threads while the run writes
its steps still check ``ok``."""

from __future__ import annotations

import threading

from sqlalchemy import text

from exchange._store import records as r
from exchange._store.records import Fence, NewEvent, StepRecord
from exchange._store.store import Store
from tests.store.test_store import held_run, holder, new_run


def step(seq: int, status: r.StepStatus = r.STEP_SUCCESS, output: str | None = "1", attempts: int = 1) -> StepRecord:
    return StepRecord(seq=seq, name=f"s{seq}", status=status, attempts=attempts, output=output, started_at=10.0 + seq,
                      finished_at=None if status == r.STEP_STARTED else 10.5 + seq)


def written_run(store: Store) -> Fence:
    """A run written as a gateway and an operator write one: every kind of link."""
    fence = held_run(store)
    store.steps.record(fence, step(1, r.STEP_STARTED, None), replace=False)  # a side effect begun...
    store.record_step_with_events(fence, step(1), replace=True,  # ... and done, with its event
                                  new_events=[NewEvent("tag_write", {"tag": "Speed", "value": 3}, None, None)])
    store.steps.record(fence, step(2, r.STEP_RETRYING, None, attempts=1), replace=False)
    store.steps.record(fence, step(2, r.STEP_SUCCESS, "2", attempts=2), replace=True)
    store.send_message(fence.run_id, "command", {"cmd": "HOLD"}, actor="ann", reason="checking the seal",
                       event=("command", {"cmd": "HOLD"}))
    store.report_state(fence, "HELD", actor="ann")
    store.write_progress(fence, "half way", None, history_max=1, step_seq=2)  # not chained: pruned
    store.write_progress(fence, "nearly", None, history_max=1, step_seq=2)
    store.values.set(fence, "lot", '"L7"')
    store.events.add_fenced(fence, "note", {"text": "sample taken"}, actor="bob", step_seq=2)
    store.steps.record(fence, step(3), replace=False)
    return fence


def check(store: Store, run_id: str) -> tuple[str, str | None]:
    found = store.chains.check(run_id)
    assert found is not None
    return found.state, found.problem


def tamper(store: Store, sql: str, **params: object) -> None:
    with store.db.engine.begin() as conn:
        assert conn.execute(text(sql), params).rowcount == 1


def test_a_run_written_normally_is_intact_and_each_edit_outside_exchange_is_named(store: Store) -> None:
    runs = [written_run(store).run_id for _ in range(5)]
    for run_id in runs:
        assert check(store, run_id) == ("ok", None)
        assert store.chains.head(run_id) == store.chains.check(run_id).head  # type: ignore[union-attr]
    changed_reason, changed_output, deleted_step, deleted_newest, intact = runs

    tamper(store, "UPDATE exchange_events SET reason = 'routine' WHERE run_id = :r AND kind = 'command'",
           r=changed_reason)
    state, problem = check(store, changed_reason)
    assert state == "tampered" and problem is not None
    assert problem.startswith("event ") and "(command, by ann) was changed" in problem

    tamper(store, "UPDATE exchange_steps SET output = '3' WHERE run_id = :r AND seq = 2", r=changed_output)
    assert check(store, changed_output) == ("tampered", "step 2 ('s2', SUCCESS) was changed (entry 6 of the chain)")

    tamper(store, "DELETE FROM exchange_steps WHERE run_id = :r AND seq = 1", r=deleted_step)
    state, problem = check(store, deleted_step)
    assert state == "tampered" and problem is not None
    assert problem.startswith("entry 2 of the chain (after event ") and problem.endswith(
        "(status, by tester), before event " + problem.split("before event ")[1])
    assert problem.endswith("(tag_write)) was deleted")

    tamper(store, "DELETE FROM exchange_steps WHERE run_id = :r AND seq = 3", r=deleted_newest)
    state, problem = check(store, deleted_newest)  # the newest entry: the run's head says there were 11
    assert state == "tampered" and problem is not None
    assert problem.startswith("entry 11 of the chain (after event ") and problem.endswith("(note, by bob)) was deleted")

    assert check(store, intact) == ("ok", None)  # the others' edits are not this run's


def test_the_newest_event_deleted_and_an_event_past_the_head_are_caught(store: Store) -> None:
    fence = held_run(store)
    store.steps.record(fence, step(1), replace=False)
    store.send_message(fence.run_id, "command", {"cmd": "STOP"}, actor="ann", reason="end of shift",
                       event=("command", {"cmd": "STOP"}))
    assert check(store, fence.run_id) == ("ok", None)
    tamper(store, "DELETE FROM exchange_events WHERE run_id = :r AND kind = 'command'", r=fence.run_id)
    assert check(store, fence.run_id) == ("tampered", "entry 3 of the chain (after step 1 ('s1', SUCCESS)) was deleted")
    # the run's row made to match the shortened chain by its count: its head still covers the deleted one
    tamper(store, "UPDATE exchange_runs SET audit_seq = 2 WHERE id = :r", r=fence.run_id)
    assert check(store, fence.run_id) == ("tampered", "the newest entry (2 of the chain) was deleted or changed")


def test_a_retried_run_stays_intact_and_a_run_from_before_the_chain_is_unchained(store: Store) -> None:
    fence = held_run(store)
    store.steps.record(fence, step(1, r.STEP_STARTED, None), replace=False)
    store.finish_run(fence, r.ERROR, error=("ValueError", "lost"))
    store.reruns.retry(fence.run_id, actor="ann", reason="the valve was fixed")
    assert check(store, fence.run_id) == ("ok", None)
    # the start's event, the step begun, the end's event (PostgreSQL: the run's UPDATE's own WITH),
    # the step written again by the retry, the retry's two events
    assert store.chains.check(fence.run_id).links == 6  # type: ignore[union-attr]
    tamper(store, "UPDATE exchange_events SET payload = '{}' WHERE run_id = :r AND kind = 'status' "
                  "AND payload LIKE '%ERROR%'", r=fence.run_id)
    state, problem = check(store, fence.run_id)
    assert state == "tampered" and problem is not None and "(status, by me) was changed (entry 3" in problem

    old = held_run(store).run_id
    for sql in ("UPDATE exchange_runs SET audit_seq = NULL, audit_head = NULL, audit_prev = NULL WHERE id = :r",
                "UPDATE exchange_events SET chain_seq = NULL, chain_prev = NULL, chain_hash = NULL WHERE run_id = :r"):
        tamper(store, sql, r=old)
    assert check(store, old) == ("unchained", None)


def test_commands_from_several_threads_while_the_run_writes_its_steps_stay_chained(store: Store) -> None:
    fence = held_run(store)
    stop = threading.Event()
    sent: list[int] = []

    def operator(name: str) -> None:
        while not stop.is_set() and len(sent) < 300:
            store.send_message(fence.run_id, "command", {"cmd": "HOLD"}, actor=name, reason=f"by {name}",
                               event=("command", {"cmd": "HOLD"}))
            sent.append(1)

    threads = [threading.Thread(target=operator, args=(f"op{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    try:
        for seq in range(1, 41):
            store.steps.record(fence, step(seq, r.STEP_STARTED, None), replace=False)
            store.record_step_with_events(fence, step(seq), replace=True,
                                          new_events=[NewEvent("tag_write", {"seq": seq}, None, None)])
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert sent
    found = store.chains.check(fence.run_id)
    assert found is not None and (found.state, found.problem) == ("ok", None)
    assert found.links == 1 + 40 * 3 + len(sent)


def test_the_running_status_of_a_claim_and_of_a_start_is_chained(store: Store) -> None:
    """A start's one-statement claim and an execution's start (one statement each on PostgreSQL,
    the RUNNING status event written by the UPDATE's WITH) are links like every other event, for
    an owner whose name is not plain ASCII too."""
    run_id, _, taken = store.create_and_claim(new_run(), holder("nœud-1/7"), None)
    assert [rec.id for rec in taken] == [run_id]
    fence = taken[0].fence()
    store.steps.record(fence, step(1), replace=False)
    assert store.finish_run(fence, r.ERROR, error=("Boom", "it broke"))
    store.reruns.retry(run_id, actor="ann", reason="again")
    again = store.runs.claim(holder("nœud-2/8"), 1)
    assert [rec.id for rec in again] == [run_id]
    started = store.start_execution(again[0].fence(), 30.0)  # a recovered run's execution starts again
    assert started is not None and started.executions == 3
    assert store.finish_run(again[0].fence(), r.SUCCESS, result_json="1")
    running = [e for e in store.events.list(run_id) if e.kind == "status" and '"RUNNING"' in (e.payload or "")]
    assert len(running) == 3
    with store.db.read() as conn:
        unchained = conn.execute(text("SELECT count(*) FROM exchange_events WHERE run_id = :r AND chain_seq IS NULL "
                                      "AND kind <> 'progress'"), {"r": run_id}).scalar_one()
    assert unchained == 0
    assert check(store, run_id) == ("ok", None)
    second = running[1]
    tamper(store, "UPDATE exchange_events SET payload = :p WHERE id = :e",
           p=(second.payload or "").replace("2", "9"), e=second.id)
    state, problem = check(store, run_id)
    assert state == "tampered" and problem is not None and "(status, by nœud-2/8) was changed" in problem
