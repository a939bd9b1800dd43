"""The batch record's process values in the store, on SQLite and PostgreSQL: one tick's rows of
several runs in one statement, written only for the runs still active (nothing after a run's end);
a gap keeps its quality, a value JSON cannot hold is kept as a gap that says so."""

from __future__ import annotations

from sqlalchemy import update

from exchange._store import ValueSample
from exchange._store import records as r
from exchange._store.runs.runs import NewRun
from exchange._store.store import Store
from exchange._store.tables.schema import runs


def _run(store: Store, status: r.RunStatus) -> str:
    run_id, _ = store.create_run(NewRun("plant.fill", "{}", "v1", "test"))
    with store.db.transaction("test") as conn:
        conn.execute(update(runs).where(runs.c.id == run_id).values(status=status))
    return run_id


def test_a_tick_is_kept_for_the_active_runs_only(store: Store) -> None:
    running, pending, ended, queued = (_run(store, status) for status in (r.RUNNING, r.PENDING, r.SUCCESS,
                                                                           r.ENQUEUED))
    at = store.clock.now()
    samples = [ValueSample(run_id, "[p]Level", at, 41.5, None, 500) for run_id in (running, pending, ended, queued)]
    samples += [ValueSample(running, "[p]Mode", at, [1, "auto"], None, 500),
                ValueSample(running, "[p]Dead", at, None, "Bad_NotConnected: no answer", 500),
                ValueSample(pending, "[p]Mode", at, float("nan"), None, 500)]
    store.record_values.add(samples)
    assert store.record_values.of_run(ended) == [] and store.record_values.of_run(queued) == []
    kept = [(s.tag, s.value, s.quality, s.interval_ms) for s in store.record_values.of_run(running)]
    assert kept == [("[p]Dead", None, "Bad_NotConnected: no answer", 500), ("[p]Level", 41.5, None, 500),
                    ("[p]Mode", [1, "auto"], None, 500)]  # by tag
    nan = [s for s in store.record_values.of_run(pending) if s.tag == "[p]Mode"]
    assert [(s.value, s.quality) for s in nan] == [(None, "not JSON: float")]
    assert all(s.at == at for s in store.record_values.of_run(running))
