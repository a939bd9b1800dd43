"""The phases runs command now: the progress notes of unfinished runs' steps in progress.

A step that commands an equipment phase (``phase.run``) keeps on its STARTED row a JSON note of how
far it has got (``RunContext.note_step``): ``{"phase": "R1/Charge", "stage", "state", "held_by",
...}``, committed again at each state change. The store does not know what a phase is: a row counts
here when its note is an object with a text ``phase`` key. Read by ``exchange phases``, ``GET
/api/v1/phases`` and the run's view.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from exchange._store import codec
from exchange._store import records as r
from exchange._store.sql import Database
from exchange._store.tables import runs, steps


@dataclass(frozen=True)
class PhaseNoteRow:
    run_id: str
    workflow: str
    seq: int
    started_at: float  # store clock: when the step's attempt began
    note: dict[str, Any]  # the decoded note; ``note["phase"]`` is a str


def phase_note(output: str | None) -> dict[str, Any] | None:
    """``output`` of a STARTED step decoded, when it is a phase's note (an object with a text
    ``phase``); None otherwise (no note, another step's note, JSON that does not decode)."""
    if output is None:
        return None
    try:
        note = codec.loads(output)
    except ValueError:
        return None
    return note if isinstance(note, dict) and isinstance(note.get("phase"), str) else None


class PhaseNotes:
    def __init__(self, db: Database) -> None:
        self.db = db

    def active(self, limit: int = 1000) -> list[PhaseNoteRow]:
        """The phase notes on the STARTED steps of unfinished runs, at most ``limit`` of them, the
        newest step first (one query)."""
        query = (select(runs.c.id, runs.c.workflow, steps.c.seq, steps.c.started_at, steps.c.output)
                 .join(runs, runs.c.id == steps.c.run_id)
                 .where(steps.c.status == r.STEP_STARTED, steps.c.output.is_not(None),
                        runs.c.status.not_in(r.FINAL_STATUSES))
                 .order_by(steps.c.started_at.desc()).limit(limit))
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        found = []
        for row in rows:
            note = phase_note(row.output)
            if note is not None:
                found.append(PhaseNoteRow(row.id, row.workflow, int(row.seq), float(row.started_at or 0.0), note))
        return found

    def of_run(self, run_id: str) -> PhaseNoteRow | None:
        """The phase note on a STARTED step of the run ``run_id`` (the newest, should it have
        several), or None (one query by the run's steps)."""
        query = (select(runs.c.id, runs.c.workflow, steps.c.seq, steps.c.started_at, steps.c.output)
                 .join(runs, runs.c.id == steps.c.run_id)
                 .where(steps.c.run_id == run_id, steps.c.status == r.STEP_STARTED, steps.c.output.is_not(None))
                 .order_by(steps.c.seq.desc()))
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        for row in rows:
            note = phase_note(row.output)
            if note is not None:
                return PhaseNoteRow(row.id, row.workflow, int(row.seq), float(row.started_at or 0.0), note)
        return None
