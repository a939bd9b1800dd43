"""Runs that need someone: the operator's list of what waits for a person.

A run needs someone, for one or more reasons, each a row:

``prompt``
    it waits on an operator prompt (open, or an answer waiting for verification);
``held``
    it is held on a failed step (``on_step_error="hold"``) until RESUME or STOP;
``code``
    it is held because its recorded history diverges from the workflow code loaded now (a step
    renamed, inserted or removed under it: :mod:`~exchange._engine.execution.code_hold`); the
    detail says where (``history diverges at step 4: recorded tags.write, the code now calls
    tags.read; ...``): fix the code (``exchange check-replay``) and RESUME, or STOP it;
``equipment``
    a phase it commands (``phase.run``) was held by its equipment, the PLC, until RESUME restarts it;
``units``
    it has waited for units (``units.acquire``) for longer than ``[units] wait_attention_s``: the
    detail names the units, how long it waited and who holds them (``since``: when it asked);
``in_doubt``
    a tag write of it lost its answer: someone should look at the device (unfinished runs, and runs
    finished within ``[attention] recent_hours``);
``error``
    it ended ERROR within ``recent_hours``: retry it, fork it, or let it be.

Rows come most urgent first (the order above), then newest first. ``exchange runs --attention``, the
API's ``GET /attention``, the console's runs page, ``/metrics`` and the webhook read the same list.
"""

from __future__ import annotations

from typing import Any

from exchange._store import REASONS, AttentionRow, AttentionTable, Store
from exchange._timefmt import iso_utc

HOUR_SECONDS = 3600.0
LIMIT_PER_REASON = 1000


def row_view(row: AttentionRow) -> dict[str, Any]:
    return {"run": row.run_id, "workflow": row.workflow, "status": row.status, "state": row.state,
            "reason": row.reason, "since": iso_utc(row.since), "detail": row.detail}


def attention_rows(store: Store, recent_hours: float, limit: int = LIMIT_PER_REASON, *,
                   units_wait_s: float | None = None) -> list[AttentionRow]:
    """Every reason a run needs someone now (see the module docstring), most urgent first; the
    waits for units only with ``units_wait_s`` (``[units] wait_attention_s``)."""
    recent_since = store.clock.now() - recent_hours * HOUR_SECONDS
    rows = AttentionTable(store.db).rows(recent_since=recent_since, limit=limit, units_wait_s=units_wait_s)
    return sorted(rows, key=lambda row: (REASONS.index(row.reason), -row.since))
