"""``GET /api/v1/runs/{id}/stream``: server-sent events of a run's status, state and progress.

Each change of status, state or progress is one ``event: run`` whose data is ``{"id", "status",
"state", "progress", "updated_at"}`` (``progress``: ``{"message", "extra"}`` or null); the stream
ends after the event that shows the run finished. A comment line every ``HEARTBEAT_SECONDS`` keeps
proxies from closing a quiet stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from exchange._api.routes_runs import Viewer, runtime_of

router = APIRouter(prefix="/api/v1", tags=["runs"])

POLL_SECONDS = 0.25  # a change shows within this (one indexed read of one run per stream)
HEARTBEAT_SECONDS = 15.0
FINISHED = ("SUCCESS", "ERROR", "CANCELLED")
_FIELDS = ("id", "status", "state", "progress", "updated_at")
_CHANGES = ("status", "state", "progress")


def _summary(view: dict[str, Any]) -> dict[str, Any]:
    return {key: view.get(key) for key in _FIELDS}


@router.get("/runs/{run_id}/stream")
async def stream_run(run_id: str, request: Request, _who: Viewer) -> StreamingResponse:
    """Server-sent events of the run's changes (404 at once for an unknown run)."""
    runtime = runtime_of(request)

    def read() -> dict[str, Any]:
        return _summary(runtime.getRun(run_id, last_steps=0, last_events=0))

    first = await run_in_threadpool(read)  # UnknownRun answers 404 before the stream starts

    async def events() -> AsyncIterator[str]:
        current = first
        yield f"event: run\ndata: {json.dumps(current, default=str)}\n\n"
        quiet_since = time.monotonic()
        while current["status"] not in FINISHED:
            await asyncio.sleep(POLL_SECONDS)
            if await request.is_disconnected():
                return
            latest = await run_in_threadpool(read)
            if any(latest[key] != current[key] for key in _CHANGES):
                current = latest
                quiet_since = time.monotonic()
                yield f"event: run\ndata: {json.dumps(current, default=str)}\n\n"
            elif time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                quiet_since = time.monotonic()
                yield ": still here\n\n"

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"X-Accel-Buffering": "no"})
