"""Retention on SQLite and PostgreSQL: 10,000 finished runs, some with steps, events, mail and values;
exactly the runs the settings name are deleted with all their rows, never an unfinished one, and no
row is left pointing at a deleted run."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, func, insert, select, update

from exchange._config import config_from_dict
from exchange._engine.gateway.retention import DAY_SECONDS, Retention
from exchange._engine.operator.runtime import Runtime
from exchange._store import records as r
from exchange._store.runs.runs import NewRun
from exchange._store.tables.schema import audit_log, events, mailbox, record_values, run_values, runs, steps

FINISHED = 10_000
SEED_BATCH = 1000


def _runtime(store_url: str, **retention: Any) -> Runtime:
    return Runtime(config_from_dict({"store": {"url": store_url}, "apps": {"paths": []}, "retention": retention},
                                    env={}))


@pytest.fixture
def seeded(store_url: str) -> Iterator[tuple[str, dict[str, float], list[str]]]:
    """The store with FINISHED finished runs (finished 1..FINISHED hours ago, one every hour), 3
    unfinished runs created long ago, dependent rows for every 10th run, and audit entries."""
    runtime = _runtime(store_url)
    store = runtime.store
    template_id, _ = store.create_run(NewRun("plant.cip", "{}", "v1", "test"))
    with store.db.read() as conn:
        template = dict(conn.execute(select(runs).where(runs.c.id == template_id)).mappings().one())
    now = store.clock.now()
    finished_at: dict[str, float] = {}
    rows = []
    for i in range(FINISHED):
        run_id = str(uuid.uuid4())
        finished_at[run_id] = now - (i + 1) * 3600.0
        rows.append({**template, "id": run_id, "status": r.FINAL_STATUSES[i % 3],
                     "created_at": finished_at[run_id] - 60, "finished_at": finished_at[run_id],
                     "updated_at": finished_at[run_id]})
    unfinished = []
    for status in (r.ENQUEUED, r.RUNNING, r.PENDING):
        run_id = str(uuid.uuid4())
        unfinished.append(run_id)
        rows.append({**template, "id": run_id, "status": status, "created_at": now - 400 * DAY_SECONDS,
                     "finished_at": None, "updated_at": now - 400 * DAY_SECONDS})
    with_rows = [run_id for i, run_id in enumerate(finished_at) if i % 10 == 0] + unfinished
    with store.db.transaction("seed") as conn:
        conn.execute(update(runs).where(runs.c.id == template_id).values(status=r.SUCCESS, finished_at=now))
        for first in range(0, len(rows), SEED_BATCH):
            conn.execute(insert(runs), rows[first:first + SEED_BATCH])
        conn.execute(insert(steps), [{"run_id": run_id, "seq": 1, "name": "s", "status": "SUCCESS", "attempts": 1,
                                      "skipped_ops": 0, "started_at": now} for run_id in with_rows])
        conn.execute(insert(events), [{"run_id": run_id, "kind": "status", "at": now} for run_id in with_rows])
        conn.execute(insert(mailbox), [{"run_id": run_id, "topic": "cmd", "payload": "{}", "sent_at": now}
                                       for run_id in with_rows])
        conn.execute(insert(run_values), [{"run_id": run_id, "key": "k", "value": "1", "updated_at": now}
                                          for run_id in with_rows])
        conn.execute(insert(record_values), [{"run_id": run_id, "tag": "[p]Level", "at": now, "value": "1.5",
                                              "interval_ms": 1000} for run_id in with_rows])
        conn.execute(insert(audit_log), [{"at": now - days * DAY_SECONDS, "actor": "a", "action": "tag_write",
                                          "target": "t", "outcome": outcome}
                                         for days, outcome in ((100, "WRITTEN"), (100, "PENDING"), (1, "WRITTEN"))])
    finished_at[template_id] = now
    runtime.close()
    yield store_url, finished_at, unfinished


def _remaining(store_url: str) -> tuple[set[str], dict[str, int]]:
    runtime = _runtime(store_url)
    with runtime.store.db.read() as conn:
        ids = set(conn.execute(select(runs.c.id)).scalars())
        orphans = {
            table.name: int(conn.execute(select(func.count()).select_from(table)
                                         .where(table.c.run_id.not_in(select(runs.c.id)))).scalar_one())
            for table in (steps, events, mailbox, run_values, record_values)
        }
        orphans["audit"] = int(conn.execute(select(func.count()).select_from(audit_log)).scalar_one())
    runtime.close()
    return ids, orphans


def test_retention_by_age_deletes_exactly_the_old_finished_runs(
        seeded: tuple[str, dict[str, float], list[str]]) -> None:
    store_url, finished_at, unfinished = seeded
    runtime = _runtime(store_url, finished_runs_days=30)
    cutoff = runtime.store.clock.now() - 30 * DAY_SECONDS
    expected_gone = {run_id for run_id, at in finished_at.items() if at < cutoff}
    dry = Retention(runtime).apply(dry_run=True)
    assert dry.by_age == len(expected_gone) and dry.dry_run
    report = Retention(runtime).apply()
    runtime.close()
    assert report.by_age == len(expected_gone) == FINISHED - 30 * 24 + 1  # 720 hours kept
    ids, counts = _remaining(store_url)
    assert ids == (set(finished_at) - expected_gone) | set(unfinished)
    # no orphan; the old finished audit entry went, the PENDING one stays
    assert counts == {"exchange_steps": 0, "exchange_events": 0, "exchange_mailbox": 0, "exchange_run_values": 0,
                      "exchange_record_values": 0, "audit": 2}
    assert report.audit_entries == 1


def test_retention_by_count_keeps_the_newest_and_every_unfinished_run(
        seeded: tuple[str, dict[str, float], list[str]]) -> None:
    store_url, finished_at, unfinished = seeded
    runtime = _runtime(store_url, max_finished_runs=1234)
    report = Retention(runtime).apply()
    runtime.close()
    newest = sorted(finished_at, key=lambda run_id: -finished_at[run_id])[:1234]
    ids, counts = _remaining(store_url)
    assert report.by_count == len(finished_at) - 1234
    assert ids == set(newest) | set(unfinished)
    assert all(count == 0 for name, count in counts.items() if name != "audit")


def test_one_gateway_takes_the_retention_lease_per_interval(store_url: str) -> None:
    first, second = _runtime(store_url, max_finished_runs=5), _runtime(store_url, max_finished_runs=5)
    try:
        taken = [Retention(rt).apply_if_due(owner) is not None for rt, owner in ((first, "gw-a"), (second, "gw-b"))]
        assert taken == [True, False]
        assert Retention(first).apply_if_due("gw-a") is None  # within the interval: nobody
    finally:
        first.close()
        second.close()


def test_retention_passes_of_every_size_send_the_same_statements(store_url: str) -> None:
    """Each pass of a gateway's retention deletes what finished since the one before: a different
    number of runs each time. What it sends must not depend on that number: the SQLite driver keeps
    a prepared statement per SQL text on each connection (tens of kB for a list of a few hundred
    ids), and a text per number grew a soak's gateway by 10 MB in 20 minutes. Counted, not timed:
    12 passes of 12 sizes, by age, by count and of the audit log, send only the first pass's texts."""
    runtime = _runtime(store_url, finished_runs_days=1, max_finished_runs=1)
    store = runtime.store
    template_id, _ = store.create_run(NewRun("plant.cip", "{}", "v1", "test"))
    with store.db.read() as conn:
        template = dict(conn.execute(select(runs).where(runs.c.id == template_id)).mappings().one())
    passes: list[set[str]] = []
    capturing = [False]

    def sent(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if capturing[0]:
            passes[-1].add(statement)

    event.listen(store.db.engine, "before_cursor_execute", sent)
    try:
        for size in range(1, 13):
            now = store.clock.now()
            old = [str(uuid.uuid4()) for _ in range(size)]
            recent = [str(uuid.uuid4()) for _ in range(size + 1)]  # one stays
            with store.db.transaction("seed") as conn:
                conn.execute(insert(runs), [{**template, "id": run_id, "status": r.SUCCESS, "dedup_id": None,
                                             "finished_at": at, "updated_at": at}
                                            for ids, at in ((old, now - 2 * DAY_SECONDS), (recent, now))
                                            for run_id in ids])
                conn.execute(insert(steps), [{"run_id": run_id, "seq": 1, "name": "s", "status": "SUCCESS",
                                              "attempts": 1, "skipped_ops": 0, "started_at": now}
                                             for run_id in old + recent])
                conn.execute(insert(audit_log), [{"at": now - 2 * DAY_SECONDS, "actor": "a", "action": "tag_write",
                                                  "target": "t", "outcome": "WRITTEN"}] * size)
            passes.append(set())
            capturing[0] = True
            report = Retention(runtime).apply()
            capturing[0] = False
            assert (report.by_age, report.audit_entries) == (size, size)
            assert report.by_count >= size
            with store.db.read() as conn:
                assert conn.execute(select(func.count()).select_from(runs)
                                    .where(runs.c.status.in_(list(r.FINAL_STATUSES)))).scalar_one() == 1
                assert conn.execute(select(func.count()).select_from(steps)
                                    .where(steps.c.run_id.not_in(select(runs.c.id)))).scalar_one() == 0
    finally:
        event.remove(store.db.engine, "before_cursor_execute", sent)
        runtime.close()
    new_texts = [len(texts - passes[0]) for texts in passes[1:]]
    assert new_texts == [0] * 11, f"statements a pass sent that the first did not, by pass: {new_texts}"
