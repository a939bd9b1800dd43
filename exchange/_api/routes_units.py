"""``GET /api/v1/units``: every configured unit (``[units.NAME]``), the run holding it and since
when, and the runs waiting for it in the order they will be granted, as ``exchange units --json``
shows them (the same runtime call, :meth:`~exchange._engine.Runtime.units`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from exchange._api.routes_runs import Viewer, runtime_of

router = APIRouter(prefix="/api/v1", tags=["units"])


@router.get("/units")
async def list_units(request: Request, _who: Viewer) -> list[dict[str, Any]]:
    """The configured units, by name: ``{"unit", "class", "holder", "since", "waiting"}``; a free
    unit has ``holder`` and ``since`` null; ``waiting`` is the run ids in grant order (a run asking
    for a class waits for each unit of it). No units configured: ``[]``."""
    runtime = runtime_of(request)
    if not runtime.config.units.units:
        return []
    return await run_in_threadpool(runtime.units)
