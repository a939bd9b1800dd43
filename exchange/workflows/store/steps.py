"""Step outcome rows: the checkpoint of each step call, keyed by (run, sequence number)."""

from __future__ import annotations

from sqlalchemy import Connection, Insert, Update, insert, select, update

from exchange.workflows.store.database import Database
from exchange.workflows.store.records import StepRecord
from exchange.workflows.store.schema import steps


class StepTable:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._insert = insert(steps)

    def insert_fast(self, run_id: str, rec: StepRecord) -> None:
        """Commit a new step outcome on the hot path (one raw DBAPI statement, its own transaction)."""
        self.db.execute_raw(self.db.raw.insert_step, self.db.raw.step_params(run_id, rec))

    def load(self, run_id: str) -> dict[int, StepRecord]:
        with self.db.read() as conn:
            rows = conn.execute(select(steps).where(steps.c.run_id == run_id).order_by(steps.c.seq)).all()
        return {row.seq: StepRecord.from_row(row) for row in rows}

    def record(self, run_id: str, rec: StepRecord, *, replace: bool, conn: Connection | None = None) -> None:
        """Commit a step outcome; ``replace`` updates a RETRYING row written by an earlier attempt."""
        values = dict(
            name=rec.name,
            status=rec.status,
            attempts=rec.attempts,
            output=rec.output,
            error_type=rec.error_type,
            error_message=rec.error_message,
            error_blob=rec.error_blob,
            skipped_ops=rec.skipped_ops,
            next_attempt_at=rec.next_attempt_at,
            started_at=rec.started_at,
            finished_at=rec.finished_at,
        )
        stmt: Insert | Update
        if replace:
            stmt = update(steps).where(steps.c.run_id == run_id, steps.c.seq == rec.seq).values(**values)
            params = None
        else:
            stmt = self._insert
            params = dict(values, run_id=run_id, seq=rec.seq)
        if conn is not None:
            conn.execute(stmt, params) if params else conn.execute(stmt)
            return
        with self.db.write() as c:
            c.execute(stmt, params) if params else c.execute(stmt)

