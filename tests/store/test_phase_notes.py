"""The progress notes of steps in progress (``RunContext.note_step``), read back by the store: the
phases runs command now, and the attention row of a phase held by its equipment; on SQLite and
PostgreSQL."""

from __future__ import annotations

from exchange._engine.operator.attention import attention_rows
from exchange._store import codec
from exchange._store import records as r
from exchange._store.records import Fence, StepRecord
from exchange._store.runs.runs import Holder, NewRun
from exchange._store.store import Store


def started_run(store: Store, owner: str, note: object, *, state: str | None = None) -> Fence:
    run_id, _ = store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="t"),
                                 holder=Holder(owner=owner, node=owner, lease_seconds=30.0))
    fence = Fence(run_id, owner, 1)
    now = store.clock.now()
    rec = StepRecord(seq=1, name="phase.run", status=r.STEP_STARTED, attempts=1, started_at=now,
                     output=codec.dumps(note))
    store.record_step_with_events(fence, rec, replace=False,
                                  run_fields={"state": state, "updated_at": now} if state else None)
    return fence


def test_phase_notes_of_unfinished_runs_and_the_equipment_on_the_attention_list(store: Store) -> None:
    held = started_run(store, "a", {"phase": "R1/Charge", "stage": "running", "state": "HELD",
                                    "held_by": "equipment", "held_since": store.clock.now()}, state="HELD")
    running = started_run(store, "b", {"phase": "R2/Heat", "stage": "running", "state": "RUNNING", "held_by": None})
    started_run(store, "c", {"stage": "waiting"})  # another step's note: not a phase
    active = {row.note["phase"]: row.run_id for row in store.phase_notes.active()}
    assert active == {"R1/Charge": held.run_id, "R2/Heat": running.run_id}
    found = store.phase_notes.of_run(running.run_id)
    assert found is not None and found.note["state"] == "RUNNING" and found.seq == 1
    rows = [row for row in attention_rows(store, recent_hours=1.0) if row.reason == "equipment"]
    assert [(row.run_id, row.state) for row in rows] == [(held.run_id, "HELD")]
    assert "R1/Charge held by its equipment" in rows[0].detail
    assert store.finish_run(running, r.SUCCESS, result_json="null")
    assert [row.note["phase"] for row in store.phase_notes.active()] == ["R1/Charge"]  # finished runs left out
