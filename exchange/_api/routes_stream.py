"""Server-sent events: ``GET /api/v1/runs/{id}/stream`` (one run's status, state and progress) and
``GET /api/v1/streams/runs`` (a runs listing, below).

Each change of status, state, progress or prompt is one ``event: run`` whose data is ``{"id",
"status", "state", "progress", "updated_at", "prompt", "phase"}`` (``progress``: ``{"message", "extra"}``
or null; ``prompt``: ``{"key", "status"}`` of the prompt the run waits on, or null; ``phase``: the
equipment phase it commands, ``{"name", "stage", "state", "held_by", "since"}`` as the run last saw
the PLC, or null); the stream
ends after the event that shows the run finished. A comment line every ``HEARTBEAT_SECONDS`` keeps
proxies from closing a quiet stream. Streams of one run (or of one listing) share one store read per
interval (:mod:`exchange._api.fanout`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from exchange._api.fanout import HEARTBEAT, Fanout
from exchange._api.routes_runs import Viewer, runtime_of
from exchange._engine import RunView
from exchange.errors import InvalidParams

router = APIRouter(prefix="/api/v1", tags=["runs"])

POLL_SECONDS = 0.25  # a change shows within this (one indexed read per watched run, shared by its streams)
HEARTBEAT_SECONDS = 15.0
FINISHED = ("SUCCESS", "ERROR", "CANCELLED")
_FIELDS = ("id", "status", "state", "progress", "updated_at")
_CHANGES = ("status", "state", "progress", "prompt", "phase")


def _summary(view: RunView) -> dict[str, Any]:
    return {key: view.get(key) for key in _FIELDS}


def fanout_of(request: Request) -> Fanout:
    fanout: Fanout | None = getattr(request.app.state, "fanout", None)
    if fanout is None:
        fanout = request.app.state.fanout = Fanout(POLL_SECONDS, HEARTBEAT_SECONDS)
    return fanout


def _sse(name: str, values: AsyncIterator[Any]) -> AsyncIterator[str]:
    async def lines() -> AsyncIterator[str]:
        async for value in values:
            if value is HEARTBEAT:
                yield ": still here\n\n"
            else:
                yield f"event: {name}\ndata: {json.dumps(value, default=str)}\n\n"

    return lines()


async def _started(values: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """``values`` with its first value already read, so that its errors (UnknownRun, a bad
    filter) become an error answer instead of a stream that breaks."""
    first = await values.__anext__()

    async def chained() -> AsyncIterator[Any]:
        yield first
        async for value in values:
            yield value

    return chained()


@router.get("/runs/{run_id}/stream")
async def stream_run(run_id: str, request: Request, _who: Viewer) -> StreamingResponse:
    """Server-sent events of the run's changes (404 at once for an unknown run)."""
    runtime = runtime_of(request)
    whole_id = (await run_in_threadpool(runtime.get_run, run_id, steps=False, events=False))["id"]

    def read() -> dict[str, Any]:
        summary = _summary(runtime.get_run(whole_id, steps=False, events=False))
        waiting = runtime.open_prompts(run_id=whole_id, limit=1) if summary["status"] not in FINISHED else []
        summary["prompt"] = {"key": waiting[0]["key"], "status": waiting[0]["status"]} if waiting else None
        summary["phase"] = runtime.run_phase(whole_id) if summary["status"] not in FINISHED else None
        return summary

    values = await _started(fanout_of(request).watch(
        ("run", whole_id), read, lambda view: view["status"] in FINISHED,
        lambda old, new: any(old[key] != new[key] for key in _CHANGES)))
    return StreamingResponse(_sse("run", values), media_type="text/event-stream",
                             headers={"X-Accel-Buffering": "no"})


LIST_POLL_SECONDS = 1.0
LIST_LIMIT = 200
ATTENTION_SHOWN = 100
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
        runs = runtime.list_runs(status=status.strip().upper() or None, workflow=workflow or None, limit=LIST_LIMIT,
                                since=None if age_seconds is None else timedelta(seconds=age_seconds))
        return [{key: run.get(key) for key in _LIST_FIELDS} for run in runs]

    key = ("runs", status.strip().upper(), workflow, since)
    values = await _started(fanout_of(request).watch(key, read, lambda _runs: False,
                                                     interval_seconds=LIST_POLL_SECONDS))
    return StreamingResponse(_sse("runs", values), media_type="text/event-stream",
                             headers={"X-Accel-Buffering": "no"})


@router.get("/streams/attention")
async def stream_attention(request: Request, _who: Viewer) -> StreamingResponse:
    """Server-sent events of the runs that need someone (the console's runs page): ``event:
    attention`` whose data is the list ``GET /api/v1/attention`` answers, sent at once and again on
    every change."""
    runtime = runtime_of(request)

    def read() -> list[dict[str, Any]]:
        return runtime.attention(limit=ATTENTION_SHOWN)

    values = await _started(fanout_of(request).watch(("attention",), read, lambda _rows: False,
                                                     interval_seconds=LIST_POLL_SECONDS))
    return StreamingResponse(_sse("attention", values), media_type="text/event-stream",
                             headers={"X-Accel-Buffering": "no"})
