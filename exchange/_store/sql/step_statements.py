"""The hot path's statements of step records: a step row inserted (or a RETRYING row updated) in a
unit that holds the run's fence, or self-fenced, as one statement of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._store.records import Fence, StepRecord
from exchange._store.sql.spelling import STEP_COLUMNS, fence_exists, fence_params, statement, values_of
from exchange._store.sql.typed_sql import Bound, Cursor
from exchange._store.tables import steps

if TYPE_CHECKING:
    from exchange._store.sql.backends import Backend

_STEP_UPDATED = STEP_COLUMNS[2:]


class StepStatements:
    """Step records, spelled for ``backend``."""

    def __init__(self, backend: Backend) -> None:
        guarded = fence_exists(backend)
        self.insert_step = statement(
            backend, "insert_step",
            f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}) VALUES ({values_of(STEP_COLUMNS)})")
        self.insert_step_fenced = statement(backend, "insert_step_fenced", (
            f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}) "
            f"SELECT {values_of(STEP_COLUMNS)} WHERE {guarded}"
        ), fenced=True)
        update_step = (f"UPDATE {steps.name} SET {', '.join(f'{c} = :{c}' for c in _STEP_UPDATED)} "
                       f"WHERE run_id = :run_id AND seq = :seq")
        self.update_step = statement(backend, "update_step", update_step)
        self.update_step_fenced = statement(backend, "update_step_fenced", f"{update_step} AND {guarded}",
                                            fenced=True)

    @staticmethod
    def step_params(run_id: str, rec: StepRecord) -> dict[str, object]:
        return {
            "run_id": run_id, "seq": rec.seq, "name": rec.name, "status": rec.status, "attempts": rec.attempts,
            "output": rec.output, "error_type": rec.error_type, "error_message": rec.error_message,
            "error_blob": rec.error_blob, "skipped_ops": rec.skipped_ops, "next_attempt_at": rec.next_attempt_at,
            "started_at": rec.started_at, "finished_at": rec.finished_at,
            "side_effect": 1 if rec.side_effect else None,
        }

    def record_step(self, cur: Cursor, run_id: str, rec: StepRecord, *, replace: bool) -> None:
        """Insert (or, with ``replace``, update) a step row inside a unit that already holds the
        run's fence."""
        (self.update_step if replace else self.insert_step).run(cur, self.step_params(run_id, rec))

    def fenced_step(self, fence: Fence, rec: StepRecord, *, replace: bool) -> Bound:
        """One self-fenced statement recording ``rec`` (insert, or update of a RETRYING row)."""
        statement = self.update_step_fenced if replace else self.insert_step_fenced
        params = self.step_params(fence.run_id, rec)
        params.update(fence_params(fence))  # in place: no third dict to merge the two into
        return statement.bind(params)
