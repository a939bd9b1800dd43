"""Reads for people: a run by a prefix of its id, filtered listings, the last steps and events.

These answer ``exchange show``, ``runs`` and ``follow``; the engine never needs them. Each is one
query (or a query and a count) that the database answers with its indexes, never a read of every
run into Python.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select

from exchange._store import records as r
from exchange._store.sql import Database
from exchange._store.tables import events, run_columns, runs, steps

# Every character a run id (a lowercase UUID) is made of sorts before this one, in the binary order
# of SQLite and in the collations PostgreSQL databases use (C, glibc and ICU locales: digits before
# letters, a hyphen ignored or before digits). So ``prefix <= id < prefix + "g"`` holds every id that
# starts with the prefix, and the primary key's index answers it; the exact test is applied too.
_AFTER_ID_CHARS = "g"


@dataclass(frozen=True)
class RunFilter:
    """What ``exchange runs`` narrows the listing to; None: any. ``created_since``: store-clock epoch
    seconds."""

    status: str | None = None
    workflow: str | None = None
    state: str | None = None
    code_version: str | None = None
    created_since: float | None = None


@dataclass(frozen=True)
class Candidate:
    """A run whose id starts with a prefix: enough to tell runs apart in an error message."""

    id: str
    workflow: str
    status: r.RunStatus


def _starts_with(prefix: str) -> ColumnElement[bool]:
    column = runs.c.id
    return (column >= prefix) & (column < prefix + _AFTER_ID_CHARS) & (
        func.substr(column, 1, len(prefix)) == prefix
    )


class RunLookup:
    def __init__(self, db: Database) -> None:
        self.db = db

    def with_prefix(self, prefix: str, limit: int) -> builtins.list[Candidate]:
        """Up to ``limit`` runs whose id starts with ``prefix`` (lowercase hex digits and hyphens),
        ordered by id."""
        query = (
            select(runs.c.id, runs.c.workflow, runs.c.status)
            .where(_starts_with(prefix))
            .order_by(runs.c.id)
            .limit(limit)
        )
        with self.db.read() as conn:
            return [Candidate(row.id, row.workflow, row.status) for row in conn.execute(query)]

    def count_with_prefix(self, prefix: str) -> int:
        with self.db.read() as conn:
            return int(conn.execute(select(func.count()).where(_starts_with(prefix))).scalar_one())

    def list(self, where: RunFilter, limit: int) -> builtins.list[r.RunRecord]:
        """Runs matching every filter of ``where``, newest first, at most ``limit``."""
        query = select(*run_columns()).order_by(runs.c.created_at.desc()).limit(limit)
        if where.status:
            query = query.where(runs.c.status == where.status)
        if where.workflow:
            query = query.where(runs.c.workflow == where.workflow)
        if where.state:
            query = query.where(runs.c.state == where.state)
        if where.code_version:
            query = query.where(runs.c.code_version == where.code_version)
        if where.created_since is not None:
            query = query.where(runs.c.created_at >= where.created_since)
        with self.db.read() as conn:
            return [r.RunRecord.from_row(row) for row in conn.execute(query)]

    def count_by_status(self) -> dict[str, int]:
        """How many runs have each status (statuses with no run left out): one grouped count."""
        with self.db.read() as conn:
            rows = conn.execute(select(runs.c.status, func.count()).group_by(runs.c.status)).all()
        return {status: int(count) for status, count in rows}

    def unfinished_or_finished_since(self, finished_since: float, limit: int) -> builtins.list[r.RunRecord]:
        """Runs not finished, and runs finished at or after ``finished_since``, newest first: what an
        HMI shows (the OPC UA server of runs)."""
        query = (select(*run_columns()).where(or_(runs.c.status.in_(list(r.UNFINISHED_STATUSES)),
                                        runs.c.finished_at >= finished_since))
                 .order_by(runs.c.created_at.desc()).limit(limit))
        with self.db.read() as conn:
            return [r.RunRecord.from_row(row) for row in conn.execute(query)]

    def active_run(self, *, partition_key: str | None = None, workflow: str | None = None) -> str | None:
        """Where an HMI's command goes: the newest executing run of a partition key (or of a
        workflow), else its newest queued one; None when it has no unfinished run."""
        with self.db.read() as conn:
            for statuses in (r.ACTIVE_STATUSES, (r.ENQUEUED,)):
                query = select(runs.c.id).where(runs.c.status.in_(list(statuses)))
                if partition_key is not None:
                    query = query.where(runs.c.partition_key == partition_key)
                if workflow is not None:
                    query = query.where(runs.c.workflow == workflow)
                found = conn.execute(query.order_by(runs.c.created_at.desc()).limit(1)).scalar()
                if found is not None:
                    return str(found)
        return None

    def count_by_queue_and_status(self) -> dict[str, dict[str, int]]:
        """Per queue, how many runs have each status: one grouped count."""
        query = select(runs.c.queue, runs.c.status, func.count()).group_by(runs.c.queue, runs.c.status)
        counts: dict[str, dict[str, int]] = {}
        with self.db.read() as conn:
            for queue, status, count in conn.execute(query).all():
                counts.setdefault(queue, {})[status] = int(count)
        return counts

    def last_steps(self, run_id: str, limit: int) -> tuple[builtins.list[r.StepRecord], int]:
        """The run's last ``limit`` steps, oldest first, and how many steps it has."""
        query = select(steps).where(steps.c.run_id == run_id).order_by(steps.c.seq.desc()).limit(limit)
        count = select(func.count()).where(steps.c.run_id == run_id)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
            total = int(conn.execute(count).scalar_one())
        return [r.StepRecord.from_row(row) for row in reversed(rows)], total

    def held_steps(self, run_ids: Sequence[str]) -> dict[str, r.StepRecord]:
        """Per run of ``run_ids``, its step held on a failure (``on_step_error="hold"``), if any:
        one query by the steps' primary key (a held step is its run's last one)."""
        if not run_ids:
            return {}
        query = select(steps).where(steps.c.run_id.in_(list(run_ids)),
                                    steps.c.status.in_(r.HELD_STEP_STATUSES))
        with self.db.read() as conn:
            return {row.run_id: r.StepRecord.from_row(row) for row in conn.execute(query).all()}

    def last_events(
        self, run_id: str, limit: int, *, hidden_kinds: Sequence[str] = ()
    ) -> tuple[builtins.list[r.EventRecord], int]:
        """The run's last ``limit`` events, oldest first, leaving out ``hidden_kinds``, and how many
        such events it has."""
        condition: Any = events.c.run_id == run_id
        if hidden_kinds:
            condition = condition & events.c.kind.not_in(list(hidden_kinds))
        query = select(events).where(condition).order_by(events.c.id.desc()).limit(limit)
        with self.db.read() as conn:
            rows = conn.execute(query).all()
            total = int(conn.execute(select(func.count()).where(condition)).scalar_one())
        return [_event(row) for row in reversed(rows)], total

    def events_of_kind(self, run_id: str, kind: str) -> builtins.list[r.EventRecord]:
        """Every event of ``kind`` the run has, oldest first."""
        query = select(events).where(events.c.run_id == run_id, events.c.kind == kind).order_by(events.c.id)
        with self.db.read() as conn:
            return [_event(row) for row in conn.execute(query).all()]


def _event(row: Any) -> r.EventRecord:
    return r.EventRecord(row.id, row.run_id, row.kind, row.at, row.actor, row.reason, row.step_seq, row.payload)
