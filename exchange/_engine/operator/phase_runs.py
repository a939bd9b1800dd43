"""Which run commands each equipment phase now: the notes ``phase.run`` keeps on its STARTED row
(:class:`~exchange._store.Store`'s ``phase_notes``), read in one query, for ``exchange phases``,
``GET /api/v1/phases`` and the console."""

from __future__ import annotations

from exchange._engine.model import PhaseRunView
from exchange._engine.operator.views import note_text
from exchange._store import Store


def phase_runs(store: Store) -> dict[str, PhaseRunView]:
    """``{phase name: the run commanding it}`` for every phase an unfinished run's step in progress
    commands. Two runs on one phase (which the owner tag and the units are there to prevent) show
    the one whose step began last."""
    found: dict[str, PhaseRunView] = {}
    for row in store.phase_notes.active():  # newest step first
        name = row.note["phase"]
        if name in found:
            continue
        note = row.note
        found[name] = {"run": row.run_id, "workflow": row.workflow, "stage": note_text(note, "stage"),
                       "seen_state": note_text(note, "state"), "held_by": note_text(note, "held_by")}
    return found
