"""Electronic signatures of runs: stored as events of the run, so each is a link of its audit chain.

A signature made on its own (``exchange sign``) is an event of kind ``signature``; a release
(``exchange release``) one of kind ``release``; a signature an action required (a verification, a
command, a cancel, an answer: ``[signatures] required_for``) rides in that action's own event, under
its payload's ``signature`` key, written in the action's commit. The signature's fields, the same in
all three places: ``action``, ``meaning``, ``name`` (printed name), ``record_hash``, ``audit_head``;
the event's ``actor`` is the signer's Exchange user name and its ``at`` the time.

:meth:`SignatureTable.add` writes the first two kinds in one transaction that reads the run's row
first (locked where rows lock) and refuses, writing nothing: an unknown run (UnknownRun); a release
of an unfinished run, or of one released already (WorkflowError); and, with ``expect_head``, a run
whose chain head is no longer the one the signed record was read at (it returns False: the caller
reads the record again), so that nothing comes between what was signed and the signature.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import exists, select

from exchange._store import records as r
from exchange._store.records import EventRecord
from exchange._store.runs.messages import EventLog, _event
from exchange._store.sql import Database
from exchange._store.tables import events, run_columns, runs
from exchange.errors import UnknownRun, WorkflowError

SIGNATURE_EVENT = "signature"
RELEASE_EVENT = "release"


class SignatureTable:
    """Signatures and releases of runs (see the module docstring)."""

    def __init__(self, db: Database, events: EventLog) -> None:
        self.db = db
        self.events = events

    def add(self, run_id: str, kind: str, signature: dict[str, Any], *, actor: str,
            expect_head: str | None) -> bool:
        """Store a ``signature`` (kind :data:`SIGNATURE_EVENT` or :data:`RELEASE_EVENT`) of
        ``actor``; False, nothing written, when the run's chain head is no longer ``expect_head``.
        A release needs a finished run not released yet. UnknownRun, WorkflowError."""
        if kind not in (SIGNATURE_EVENT, RELEASE_EVENT):
            raise ValueError(f"not a signature's event kind: {kind!r}")
        with self.db.transaction(f"run {run_id}: a {kind}") as conn:
            row = conn.execute(select(runs.c.status, runs.c.audit_head).where(runs.c.id == run_id)
                               .with_for_update()).first()
            if row is None:
                raise UnknownRun(run_id)
            if kind == RELEASE_EVENT:
                if row.status not in r.FINAL_STATUSES:
                    raise WorkflowError(f"run {run_id} is {row.status}: only a finished run can be released; "
                                        "nothing signed")
                done = self._released(conn, run_id)
                if done is not None:
                    raise WorkflowError(f"run {run_id} was released already, by {done.actor}: a run is released "
                                        "once; nothing signed")
            if row.audit_head != expect_head:
                return False
            self.events.add(run_id, kind, signature, actor=actor, conn=conn)
        return True

    @staticmethod
    def _released(conn: Any, run_id: str) -> EventRecord | None:
        row = conn.execute(select(events).where(events.c.run_id == run_id, events.c.kind == RELEASE_EVENT)
                           .order_by(events.c.id).limit(1)).first()
        return None if row is None else _event(row)

    def released(self, run_id: str) -> EventRecord | None:
        """The run's release event, or None."""
        with self.db.read() as conn:
            return self._released(conn, run_id)

    def finished(self, limit: int, *, pending: bool) -> list[r.RunRecord]:
        """Finished runs: ``pending``, those no one released, the oldest finished first (a queue);
        else every finished run, the newest first."""
        query = select(*run_columns()).where(runs.c.status.in_(sorted(r.FINAL_STATUSES)))
        if pending:
            query = query.where(~exists().where(events.c.run_id == runs.c.id, events.c.kind == RELEASE_EVENT))
        with self.db.read() as conn:
            order = (runs.c.finished_at, runs.c.id) if pending else (runs.c.finished_at.desc(), runs.c.id.desc())
            rows = conn.execute(query.order_by(*order).limit(limit)).all()
        return [r.RunRecord.from_row(row) for row in rows]
