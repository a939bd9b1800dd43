"""``GET /api/v1/phases``: each configured equipment phase (``[phases."UNIT/PHASE"]``) with the state
its PLC reports now, its owner and the run commanding it, as ``exchange phases --json`` shows them
(the same runtime calls).

The PLC is read in a worker thread, never on the event loop, and waited for at most
:data:`PLC_READ_TIMEOUT_S`: a device that is down or slow gives its phases' state as unknown
(``state`` null) with the reason in ``state_quality`` (``Bad_NotConnected``, ``Error_TimeoutExpired``,
...) and ``state_error``, not an error answer."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from exchange._api.routes_runs import Viewer, runtime_of
from exchange._engine import Runtime
from exchange.workflows._services import phase_states

router = APIRouter(prefix="/api/v1", tags=["phases"])
log = logging.getLogger(__name__)

PLC_READ_TIMEOUT_S = 3.0  # longer than a device's usual timeout_ms: a slower answer is a device in trouble


def _unknown(runtime: Runtime, quality: str, reason: str) -> list[dict[str, Any]]:
    """Every phase with its state unknown for ``reason``."""
    return [{"phase": p.name, "unit": p.unit, "state": None, "state_number": None, "state_quality": quality,
             "state_error": reason, "owner": None, "owner_quality": None if p.owner is None else quality,
             "owned_by": None} for p in runtime.config.phases.values()]


@router.get("/phases")
async def list_phases(request: Request, _who: Viewer) -> list[dict[str, Any]]:
    """The configured phases, in the config's order: ``{"phase", "unit", "state", "state_number",
    "state_quality", "state_error", "owner", "owner_quality", "owned_by", "run"}``; ``run`` is
    ``{"run", "workflow", "stage", "seen_state", "held_by"}`` of the unfinished run whose
    ``phase.run`` commands it, or null."""
    runtime = runtime_of(request)
    if not runtime.config.phases:
        return []
    commanding = await run_in_threadpool(runtime.phase_runs)
    readings: list[dict[str, Any]]
    try:
        found = await asyncio.wait_for(asyncio.to_thread(phase_states, runtime), PLC_READ_TIMEOUT_S)
        readings = [dict(reading) for reading in found]
    except TimeoutError:
        readings = _unknown(runtime, "Error_TimeoutExpired", f"the PLC did not answer within {PLC_READ_TIMEOUT_S:g} s")
    except Exception as exc:  # a device that cannot be reached at all, a driver that fails: shown, not a 500
        log.warning("phases: the PLC could not be read: %s", exc)
        readings = _unknown(runtime, "Error", str(exc))
    return [{**reading, "run": commanding.get(reading["phase"])} for reading in readings]
