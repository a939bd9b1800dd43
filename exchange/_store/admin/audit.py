"""The audit log: what people do outside any run (a tag written by hand), one row per action.

A row is written before the action is carried out (outcome :data:`PENDING`) and completed with its
outcome after it, each in its own short transaction, so an action whose process died half-way is
still on record: a row left PENDING may or may not have happened. Times are the store's clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update

from exchange._store import codec
from exchange._store.sql import Database
from exchange._store.tables import audit_log

__all__ = ["DONE", "PENDING", "AuditEntry", "AuditLog", "done_entry"]

PENDING = "PENDING"
DONE = "DONE"  # an action recorded in the same transaction that carried it out


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: float
    actor: str
    action: str
    target: str
    reason: str | None
    details: Any
    outcome: str
    outcome_note: str | None
    finished_at: float | None


def _entry(row: Any) -> AuditEntry:
    return AuditEntry(row.id, row.at, row.actor, row.action, row.target, row.reason, codec.loads(row.details),
                      row.outcome, row.outcome_note, row.finished_at)


def done_entry(at: float, action: str, target: str, *, actor: str, reason: str | None, details: Any) -> dict[str, Any]:
    """The row of an action stored in the caller's own transaction (saving a parameter template):
    it is on record exactly when the action is, so it is written DONE at once."""
    return dict(at=at, actor=actor, action=action, target=target, reason=reason, details=codec.dumps(details),
                outcome=DONE, finished_at=at)


class AuditLog:
    """The ``exchange_audit`` table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def begin(self, action: str, target: str, *, actor: str, reason: str | None, details: Any) -> int:
        """Record an action about to be carried out (outcome PENDING); its id. StoreError or
        StoreDataError when it cannot be recorded: the caller must not go on with the action."""
        values = dict(at=self.db.clock.now(), actor=actor, action=action, target=target, reason=reason,
                      details=codec.dumps(details), outcome=PENDING)
        with self.db.transaction(f"the audit record of {action} {target}") as conn:
            key = conn.execute(insert(audit_log).values(**values)).inserted_primary_key
        assert key is not None  # an autoincrement key is always returned
        return int(key[0])

    def record_done(self, action: str, target: str, *, actor: str, reason: str | None, details: Any,
                    label: str | None = None) -> None:
        """Record an action already carried out (a setting changed), outcome DONE at once, in a
        transaction of its own named ``the audit record of <label>`` (default: the action and the
        target). StoreError or StoreDataError when it cannot be recorded."""
        with self.db.transaction(f"the audit record of {label or f'{action} {target}'}") as conn:
            conn.execute(insert(audit_log).values(**done_entry(
                self.db.clock.now(), action, target, actor=actor, reason=reason, details=details)))

    def finish(self, entry_id: int, outcome: str, note: str | None) -> None:
        """Complete entry ``entry_id`` with the action's outcome and a note on how it came about."""
        with self.db.transaction(f"the outcome of audit record {entry_id}") as conn:
            conn.execute(
                update(audit_log).where(audit_log.c.id == entry_id)
                .values(outcome=outcome, outcome_note=note, finished_at=self.db.clock.now())
            )

    def get(self, entry_id: int) -> AuditEntry | None:
        with self.db.read() as conn:
            row = conn.execute(select(audit_log).where(audit_log.c.id == entry_id)).first()
        return None if row is None else _entry(row)

    def entries(self, *, action: str | tuple[str, ...] | None = None, target: str | None = None,
                limit: int = 20) -> list[AuditEntry]:
        """The newest ``limit`` entries (of ``action``, or of any of several, on ``target``), oldest first."""
        query = select(audit_log).order_by(audit_log.c.id.desc()).limit(limit)
        if isinstance(action, tuple):
            query = query.where(audit_log.c.action.in_(action))
        elif action is not None:
            query = query.where(audit_log.c.action == action)
        if target is not None:
            query = query.where(audit_log.c.target == target)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [_entry(row) for row in reversed(rows)]
