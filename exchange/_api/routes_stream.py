"""Server-sent events: ``GET /api/v1/runs/{id}/stream`` (one run's status, state and progress) and
``GET /api/v1/streams/runs`` (a runs listing, below).

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
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from exchange._api.routes_runs import Viewer, runtime_of
from exchange.errors import InvalidParams

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


LIST_POLL_SECONDS = 1.0
LIST_LIMIT = 200
_LIST_SINCE = {"1h": 3600.0, "24h": 86400.0, "7d": 7 * 86400.0, "all": None}
_LIST_FIELDS = ("id", "workflow", "status", "state", "progress", "owner_alive", "created_by", "created_at",
                "updated_at")


@router.get("/streams/runs")
async def stream_runs(request: Request, _who: Viewer, status: str = "", workflow: str = "",
                      since: str = "all") -> StreamingResponse:
    """Server-sent events of a runs listing (the console's runs page): ``event: runs`` whose data is
    the newest runs matching the filters (``status``, ``workflow``, ``since`` one of 1h, 24h, 7d,
    all), sent at once and again each time one of them changes."""
    runtime = runtime_of(request)
    if since not in _LIST_SINCE:
        raise InvalidParams(f"since {since!r} is not one of {', '.join(_LIST_SINCE)}")
    age_seconds = _LIST_SINCE[since]

    def read() -> list[dict[str, Any]]:
        runs = runtime.listRuns(status=status.strip().upper() or None, workflow=workflow or None, limit=LIST_LIMIT,
                                since=None if age_seconds is None else timedelta(seconds=age_seconds))
        return [{key: run.get(key) for key in _LIST_FIELDS} for run in runs]

    first = await run_in_threadpool(read)  # a bad filter answers 400 before the stream starts

    async def events() -> AsyncIterator[str]:
        current = first
        yield f"event: runs\ndata: {json.dumps(current, default=str)}\n\n"
        quiet_since = time.monotonic()
        while True:
            await asyncio.sleep(LIST_POLL_SECONDS)
            if await request.is_disconnected():
                return
            latest = await run_in_threadpool(read)
            if latest != current:
                current = latest
                quiet_since = time.monotonic()
                yield f"event: runs\ndata: {json.dumps(current, default=str)}\n\n"
            elif time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                quiet_since = time.monotonic()
                yield ": still here\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})
