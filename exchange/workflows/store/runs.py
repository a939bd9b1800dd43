"""Run rows: creation (with deduplication), claiming with leases, status changes, listing."""

from __future__ import annotations

import builtins
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, func, or_, select, update

from exchange.workflows.store import records as r
from exchange.workflows.store.database import Database
from exchange.workflows.store.schema import runs


@dataclass(frozen=True)
class NewRun:
    workflow: str
    params_json: str
    code_version: str
    created_by: str
    queue: str = "default"
    partition_key: str | None = None
    priority: int = 0
    dedup_id: str | None = None
    timeout_seconds: float | None = None


class RunTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, new: NewRun, *, owner: str | None, conn: Connection) -> str:
        """Insert an ENQUEUED run (PENDING and owned when ``owner`` is given); returns its id.

        A ``dedup_id`` that is already used raises IntegrityError (the caller returns the existing run).
        """
        now = time.time()
        run_id = str(uuid.uuid4())
        conn.execute(
            runs.insert().values(
                id=run_id,
                workflow=new.workflow,
                status=r.PENDING if owner else r.ENQUEUED,
                state=None,
                params=new.params_json,
                queue=new.queue,
                partition_key=new.partition_key,
                priority=new.priority,
                dedup_id=new.dedup_id,
                timeout_seconds=new.timeout_seconds,
                code_version=new.code_version,
                owner=owner,
                lease_expires_at=None,
                cancel_requested=0,
                created_by=new.created_by,
                created_at=now,
                updated_at=now,
                executions=0,
            )
        )
        return run_id

    def by_dedup(self, dedup_id: str) -> str | None:
        with self.db.read() as conn:
            return conn.execute(select(runs.c.id).where(runs.c.dedup_id == dedup_id)).scalar()

    def get(self, run_id: str) -> r.RunRecord | None:
        with self.db.read() as conn:
            row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
        return r.RunRecord.from_row(row) if row else None

    def list(
        self, status: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> builtins.list[r.RunRecord]:
        query = select(runs).order_by(runs.c.created_at.desc()).limit(limit)
        if status:
            query = query.where(runs.c.status == status)
        if workflow:
            query = query.where(runs.c.workflow == workflow)
        with self.db.read() as conn:
            return [r.RunRecord.from_row(row) for row in conn.execute(query)]

    def claim(
        self, owner: str, limit: int, lease_seconds: float, queues: Sequence[str] | None = None
    ) -> builtins.list[r.RunRecord]:
        """Move up to ``limit`` ENQUEUED runs to PENDING under ``owner``.

        Highest ``priority`` first, then oldest. A run whose ``partition_key`` already has an active
        run (or another run claimed in this batch) stays ENQUEUED. On PostgreSQL the candidate rows are
        locked with SKIP LOCKED so several gateways can claim from one store.
        """
        if limit <= 0:
            return []
        now = time.time()
        active = (
            select(runs.c.partition_key)
            .where(runs.c.status.in_(r.ACTIVE_STATUSES), runs.c.partition_key.is_not(None))
            .scalar_subquery()
        )
        query = (
            select(runs.c.id, runs.c.partition_key)
            .where(
                runs.c.status == r.ENQUEUED,
                or_(runs.c.partition_key.is_(None), runs.c.partition_key.not_in(active)),
            )
            .order_by(runs.c.priority.desc(), runs.c.created_at)
            .limit(limit * 4)
        )
        if queues:
            query = query.where(runs.c.queue.in_(list(queues)))
        if not self.db.is_sqlite:
            query = query.with_for_update(skip_locked=True, of=runs)
        claimed: list[str] = []
        with self.db.write() as conn:
            seen_keys: set[str] = set()
            for run_id, key in conn.execute(query):
                if key is not None:
                    if key in seen_keys:
                        continue
                    seen_keys.add(key)
                claimed.append(run_id)
                if len(claimed) >= limit:
                    break
            if not claimed:
                return []
            conn.execute(
                update(runs)
                .where(runs.c.id.in_(claimed), runs.c.status == r.ENQUEUED)
                .values(status=r.PENDING, owner=owner, lease_expires_at=now + lease_seconds, updated_at=now)
            )
            rows = conn.execute(select(runs).where(runs.c.id.in_(claimed), runs.c.owner == owner)).all()
        return [r.RunRecord.from_row(row) for row in rows]

    def reclaim(self, owner: str, lease_seconds: float, *, own: bool = True) -> builtins.list[r.RunRecord]:
        """Take over runs whose lease expired and, with ``own``, this node's unfinished runs (which
        only a restart of the node may do: a running gateway's own runs are executing)."""
        now = time.time()
        expired = and_(runs.c.owner != owner, or_(runs.c.lease_expires_at < now, runs.c.owner.is_(None)))
        cond = and_(
            runs.c.status.in_(r.ACTIVE_STATUSES),
            or_(runs.c.owner == owner, expired) if own else expired,
        )
        with self.db.write() as conn:
            query = select(runs.c.id).where(cond)
            if not self.db.is_sqlite:
                query = query.with_for_update(skip_locked=True)
            ids = list(conn.execute(query).scalars())
            if not ids:
                return []
            conn.execute(
                update(runs)
                .where(runs.c.id.in_(ids))
                .values(status=r.PENDING, owner=owner, lease_expires_at=now + lease_seconds, updated_at=now)
            )
            rows = conn.execute(select(runs).where(runs.c.id.in_(ids))).all()
        return [r.RunRecord.from_row(row) for row in rows]

    def mark_running(self, run_id: str, owner: str, conn: Connection) -> r.RunRecord | None:
        """PENDING → RUNNING for the owner; sets the deadline on first execution. None if not ours."""
        now = time.time()
        row = conn.execute(select(runs).where(runs.c.id == run_id)).first()
        if row is None or row.owner != owner or row.status not in r.ACTIVE_STATUSES:
            return None
        values: dict[str, Any] = dict(status=r.RUNNING, updated_at=now, executions=row.executions + 1)
        if row.started_at is None:
            values["started_at"] = now
            if row.timeout_seconds is not None:
                values["deadline_at"] = now + row.timeout_seconds
        conn.execute(update(runs).where(runs.c.id == run_id).values(**values))
        rec = r.RunRecord.from_row(row)
        for key, value in values.items():
            setattr(rec, key, value)
        return rec

    def finish(
        self,
        run_id: str,
        status: str,
        *,
        owner: str | None,
        result_json: str | None = None,
        error_type: str | None = None,
        error_message: str | None = None,
        conn: Connection | None = None,
    ) -> bool:
        """Record the final status. With ``owner`` only the owning process may finish the run."""
        now = time.time()
        stmt = update(runs).where(runs.c.id == run_id, runs.c.status.not_in(r.FINAL_STATUSES))
        if owner is not None:
            stmt = stmt.where(runs.c.owner == owner)
        stmt = stmt.values(
            status=status,
            result=result_json,
            error_type=error_type,
            error_message=error_message,
            finished_at=now,
            updated_at=now,
            lease_expires_at=None,
        )
        if conn is not None:
            return conn.execute(stmt).rowcount > 0
        with self.db.write() as c:
            return c.execute(stmt).rowcount > 0

    def set_fields(self, run_id: str, conn: Connection | None = None, **values: Any) -> None:
        stmt = update(runs).where(runs.c.id == run_id).values(**values)
        if conn is not None:
            conn.execute(stmt)
            return
        with self.db.write() as c:
            c.execute(stmt)

    def request_cancel(self, run_id: str, reason: str | None, conn: Connection) -> str | None:
        """Flag the run for cancellation; an ENQUEUED run is cancelled at once. Returns its status."""
        row = conn.execute(select(runs.c.status).where(runs.c.id == run_id)).first()
        if row is None:
            return None
        now = time.time()
        if row.status == r.ENQUEUED:
            conn.execute(
                update(runs)
                .where(runs.c.id == run_id)
                .values(status=r.CANCELLED, cancel_requested=1, cancel_reason=reason, finished_at=now,
                        updated_at=now, error_type="Cancelled", error_message=reason or "cancelled")
            )
            return r.CANCELLED
        if row.status in r.ACTIVE_STATUSES:
            conn.execute(
                update(runs)
                .where(runs.c.id == run_id)
                .values(cancel_requested=1, cancel_reason=reason, updated_at=now)
            )
        return str(row.status)

    def cancel_requested(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """Of ``run_ids``, those flagged for cancellation, with the reason."""
        if not run_ids:
            return {}
        with self.db.read() as conn:
            rows = conn.execute(
                select(runs.c.id, runs.c.cancel_reason).where(
                    runs.c.id.in_(list(run_ids)), runs.c.cancel_requested == 1
                )
            ).all()
        return {row.id: row.cancel_reason for row in rows}

    def heartbeat(self, owner: str, lease_seconds: float) -> int:
        now = time.time()
        with self.db.write() as conn:
            return conn.execute(
                update(runs)
                .where(runs.c.owner == owner, runs.c.status.in_(r.ACTIVE_STATUSES))
                .values(lease_expires_at=now + lease_seconds)
            ).rowcount

    def count_by_status(self) -> dict[str, int]:
        with self.db.read() as conn:
            rows = conn.execute(select(runs.c.status, func.count()).group_by(runs.c.status)).all()
        return {str(status): int(n) for status, n in rows}
