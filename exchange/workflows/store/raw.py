"""Hand-written statements for the hot paths (step records, commands), run on a DBAPI cursor.

SQLAlchemy Core builds every other statement. These few run once per step or per command, where its
statement machinery costs more than the statement itself; they are written against the same Table
definitions (names come from :mod:`exchange.workflows.store.schema`) with the driver's placeholder, and
the store suite runs them on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from exchange.workflows.store import codec
from exchange.workflows.store.records import StepRecord
from exchange.workflows.store.schema import events, mailbox, runs, steps

STEP_COLUMNS = (
    "run_id", "seq", "name", "status", "attempts", "output", "error_type", "error_message", "error_blob",
    "skipped_ops", "next_attempt_at", "started_at", "finished_at",
)
_STEP_UPDATED = STEP_COLUMNS[2:]
_RUN_COLUMNS = frozenset(runs.c.keys())


class RawStatements:
    """The statements, spelled once for one driver's placeholder (``?`` or ``%s``)."""

    def __init__(self, placeholder: str, *, returning: bool) -> None:
        p = placeholder
        self.p = p
        self.returning = returning  # PostgreSQL: INSERT ... RETURNING id; SQLite: cursor.lastrowid
        self.insert_step = (
            f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}) VALUES ({', '.join([p] * len(STEP_COLUMNS))})"
        )
        self.update_step = (
            f"UPDATE {steps.name} SET {', '.join(f'{c} = {p}' for c in _STEP_UPDATED)} "
            f"WHERE run_id = {p} AND seq = {p}"
        )
        self.run_status = f"SELECT status FROM {runs.name} WHERE id = {p}"
        self.pending_messages = (
            f"SELECT id, run_id, topic, payload, actor, reason, sent_at FROM {mailbox.name} "
            f"WHERE run_id = {p} AND topic = {p} AND consumed_at IS NULL ORDER BY id LIMIT {p}"
        )
        self.insert_message = (
            f"INSERT INTO {mailbox.name} (run_id, topic, payload, actor, reason, sent_at) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}, {p})" + (" RETURNING id" if returning else "")
        )
        self.insert_event = (
            f"INSERT INTO {events.name} (run_id, kind, at, actor, reason, step_seq, payload) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})"
        )

    def step_params(self, run_id: str, rec: StepRecord) -> tuple[Any, ...]:
        return (run_id, rec.seq, rec.name, rec.status, rec.attempts, rec.output, rec.error_type,
                rec.error_message, rec.error_blob, rec.skipped_ops, rec.next_attempt_at, rec.started_at,
                rec.finished_at)

    def record_step(self, cur: Any, run_id: str, rec: StepRecord, *, replace: bool) -> None:
        params = self.step_params(run_id, rec)
        if replace:
            cur.execute(self.update_step, params[2:] + (run_id, rec.seq))
        else:
            cur.execute(self.insert_step, params)

    def status_of(self, cur: Any, run_id: str) -> str | None:
        cur.execute(self.run_status, (run_id,))
        row = cur.fetchone()
        return None if row is None else str(row[0])

    def add_message(
        self, cur: Any, run_id: str, topic: str, payload: Any, actor: str | None, reason: str | None
    ) -> int:
        cur.execute(self.insert_message, (run_id, topic, codec.dumps(payload), actor, reason, time.time()))
        if self.returning:
            return int(cur.fetchone()[0])
        return int(cur.lastrowid)

    def add_event(
        self, cur: Any, run_id: str, kind: str, payload: Any, actor: str | None, reason: str | None,
        step_seq: int | None,
    ) -> None:
        text = None if payload is None else codec.dumps(payload)
        cur.execute(self.insert_event, (run_id, kind, time.time(), actor, reason, step_seq, text))

    def consume(self, cur: Any, ids: Sequence[int], seq: int) -> None:
        if not ids:
            return
        marks = ", ".join([self.p] * len(ids))
        cur.execute(
            f"UPDATE {mailbox.name} SET consumed_seq = {self.p}, consumed_at = {self.p} "
            f"WHERE id IN ({marks}) AND consumed_at IS NULL",
            (seq, time.time(), *ids),
        )

    def update_run(self, cur: Any, run_id: str, fields: Mapping[str, Any]) -> None:
        unknown = set(fields) - _RUN_COLUMNS
        if unknown:  # column names are spelled into the statement: only the table's own are allowed
            raise ValueError(f"not columns of {runs.name}: {', '.join(sorted(unknown))}")
        names = list(fields)
        cur.execute(
            f"UPDATE {runs.name} SET {', '.join(f'{n} = {self.p}' for n in names)} WHERE id = {self.p}",
            (*[fields[n] for n in names], run_id),
        )
