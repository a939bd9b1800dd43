"""The batch record of a run: ``GET /api/v1/runs/{id}/record`` (the read right), the runtime's
``record`` as JSON (the keys: docs/batch-record.md)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from exchange._api.routes_runs import Viewer, runtime_of

router = APIRouter(prefix="/api/v1", tags=["runs"])


@router.get("/runs/{run_id}/record")
def run_record(run_id: str, request: Request, _who: Viewer) -> dict[str, Any]:
    """The run's batch record: the run with its template, steps, commands with their actors, reasons
    and outcomes, prompts with who answered and verified, tag writes, phases, units held and the
    exceptions to review (``run_id``: the id or a unique prefix). 404 for an unknown run."""
    return runtime_of(request).record(run_id)
