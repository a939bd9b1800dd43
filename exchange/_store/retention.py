"""Deleting finished runs with everything that hangs on them, in short batches.

A batch is one transaction: the runs' steps, events, mailbox messages and published values, then the
runs themselves, each statement bounded by the batch's ids, and the run rows deleted only while they
are still finished (a guard in the statement itself, whatever the caller chose).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, select

from exchange._store import records as r
from exchange._store.database import Database
from exchange._store.schema import audit_log, events, mailbox, prompts, run_values, runs, steps, streams

_DEPENDENTS = (steps, events, mailbox, run_values, streams, prompts)
_FINAL = list(r.FINAL_STATUSES)


class RetentionTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def finished_before(self, cutoff: float, limit: int) -> list[str]:
        """Up to ``limit`` ids of runs that finished before store time ``cutoff``, oldest first."""
        query = (select(runs.c.id).where(runs.c.status.in_(_FINAL), runs.c.finished_at < cutoff)
                 .order_by(runs.c.finished_at).limit(limit))
        with self.db.read() as conn:
            return list(conn.execute(query).scalars())

    def count_finished_before(self, cutoff: float) -> int:
        with self.db.read() as conn:
            return int(conn.execute(select(func.count()).where(runs.c.status.in_(_FINAL), runs.c.finished_at < cutoff))
                       .scalar_one())

    def finished_count(self) -> int:
        with self.db.read() as conn:
            return int(conn.execute(select(func.count()).where(runs.c.status.in_(_FINAL))).scalar_one())

    def oldest_finished(self, limit: int) -> list[str]:
        """The ids of the ``limit`` runs that finished first."""
        query = select(runs.c.id).where(runs.c.status.in_(_FINAL)).order_by(runs.c.finished_at).limit(limit)
        with self.db.read() as conn:
            return list(conn.execute(query).scalars())

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Delete the finished runs among ``run_ids`` and their rows in every table; how many runs."""
        if not run_ids:
            return 0
        ids = list(run_ids)
        with self.db.transaction(f"deleting {len(ids)} finished runs") as conn:
            kept = set(conn.execute(select(runs.c.id).where(runs.c.id.in_(ids), runs.c.status.not_in(_FINAL)))
                       .scalars())
            doomed = [run_id for run_id in ids if run_id not in kept]  # never a run that is not finished
            if not doomed:
                return 0
            for table in _DEPENDENTS:
                conn.execute(delete(table).where(table.c.run_id.in_(doomed)))
            deleted = conn.execute(delete(runs).where(runs.c.id.in_(doomed), runs.c.status.in_(_FINAL))).rowcount
        return int(deleted)

    def prune_audit(self, cutoff: float, limit: int) -> int:
        """Delete up to ``limit`` finished audit entries recorded before ``cutoff``; how many."""
        with self.db.transaction("pruning the audit log") as conn:
            old = select(audit_log.c.id).where(audit_log.c.at < cutoff, audit_log.c.outcome != "PENDING")
            ids = list(conn.execute(old.order_by(audit_log.c.id).limit(limit)).scalars())
            if not ids:
                return 0
            return int(conn.execute(delete(audit_log).where(audit_log.c.id.in_(ids))).rowcount)
