"""The printable batch record of a run: ``/runs/{id}/record``, the record's own sections (the same
template as ``exchange record --html``) inside the console's layout, whose navigation the print
stylesheet hides, so the browser's "Save as PDF" gives the record alone. Its signatures carry
their check (``Runtime.signature_checks``: the hash still matches the record, or it changed), and
the page offers Sign and Release (the ``sign`` and ``release`` rights: :mod:`.routes_review`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from exchange._api.console import present
from exchange._api.console.pages import render, signed_in
from exchange._api.routes_runs import runtime_of
from exchange._engine import Runtime
from exchange._record import STYLESHEET, render_body
from exchange.errors import AmbiguousRun, UnknownRun

router = APIRouter(include_in_schema=False)


@router.get("/runs/{run_id}/record", response_class=HTMLResponse)
def record_page(request: Request, run_id: str) -> HTMLResponse:
    """The run's batch record, exceptions first, ready to print."""
    me = signed_in(request)
    runtime = runtime_of(request)
    try:
        found = runtime.record(run_id)
        checks = _checks(runtime, found)
    except (UnknownRun, AmbiguousRun) as exc:
        return render(request, "error.html", me, 404, message=str(exc))
    released = next((s for s in found["signatures"] if s["action"] == "release"), None)
    return render(request, "run_record.html", me, run=found["run"], body=render_body(found, checks=checks),
                  released=released, present=present, finished=found["run"]["status"] in present.FINISHED)


def _checks(runtime: Runtime, found: dict[str, Any]) -> list[bool | None]:
    """Per signature of the record: whether its hash still matches (``Runtime.signature_checks``),
    None where that says nothing: an action's signature, one made before the run finished (the
    run went on after it: its record was bound to change), or one made between the two reads."""
    signatures = found["signatures"]
    checks = runtime.signature_checks(found["run"]["id"]) if signatures else []
    if len(checks) != len(signatures):
        return [None] * len(signatures)
    finished = found["run"].get("finished_at")
    end = None if finished is None else datetime.fromisoformat(finished)
    return [check if end is not None and datetime.fromisoformat(signature["at"]) >= end else None
            for check, signature in zip(checks, signatures, strict=True)]


@router.get("/record.css")
def record_stylesheet() -> Response:
    """The record's stylesheet (the console's Content Security Policy takes no inline style)."""
    return Response(STYLESHEET, media_type="text/css; charset=utf-8")
