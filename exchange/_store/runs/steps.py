"""Step outcome rows: the checkpoint of each step call, keyed by (run, sequence number).

Every step row is written by the statements of :mod:`exchange._store.sql.step_statements`: alone with
:meth:`StepTable.record` (one self-fenced statement, its own commit), or together with consumed
messages and events in :meth:`exchange._store.store.Store.record_step_with_events`.
"""

from __future__ import annotations

from sqlalchemy import select

from exchange._store.records import STEP_STARTED, Fence, StepRecord
from exchange._store.sql import Database
from exchange._store.tables import steps


def outcome_label(rec: StepRecord) -> str:
    """How the write of a step row is named (in errors and fault-injection logs)."""
    if rec.status == STEP_STARTED:
        return f"the start of the side effect of step {rec.name!r} (sequence {rec.seq}, attempt {rec.attempts})"
    return f"the outcome of step {rec.name!r} (sequence {rec.seq}, attempt {rec.attempts})"


class StepTable:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._sql = db.sql.steps  # the step's statements, looked up once (a write per step)

    def record(self, fence: Fence, rec: StepRecord, *, replace: bool) -> None:
        """Commit a step outcome for the execution holding ``fence`` (OwnershipLost if it no longer
        does); ``replace`` updates the RETRYING row an earlier attempt wrote."""
        self.db.unit(self._sql.fenced_step(fence, rec, replace=replace), f"run {fence.run_id}: {outcome_label(rec)}")

    def load(self, run_id: str) -> dict[int, StepRecord]:
        with self.db.read() as conn:
            rows = conn.execute(select(steps).where(steps.c.run_id == run_id).order_by(steps.c.seq)).all()
        return {row.seq: StepRecord.from_row(row) for row in rows}
