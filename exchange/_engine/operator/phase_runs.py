"""Which run commands each equipment phase now: the notes ``phase.run`` keeps on its STARTED row
(:class:`~exchange._store.Store`'s ``phase_notes``), read in one query, for ``exchange phases``,
``GET /api/v1/phases`` and the console."""

from __future__ import annotations

from exchange._engine.model import PhaseRunView
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

        def text(key: str, note: dict[str, object] = row.note) -> str | None:
            value = note.get(key)
            return value if isinstance(value, str) else None

        found[name] = {"run": row.run_id, "workflow": row.workflow, "stage": text("stage"),
                       "seen_state": text("state"), "held_by": text("held_by")}
    return found
