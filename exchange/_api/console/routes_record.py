"""The printable batch record of a run: ``/runs/{id}/record``, the record's own sections (the same
template as ``exchange record --html``) inside the console's layout, whose navigation the print
stylesheet hides, so the browser's "Save as PDF" gives the record alone. Its signatures carry
their check (``Runtime.signature_checks``: the hash still matches the record, or it changed), and
the page offers Sign and Release (the ``sign`` and ``release`` rights: :mod:`.routes_review`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from exchange._api.console import present
from exchange._api.console.pages import render, signed_in
from exchange._api.routes_runs import runtime_of
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
        checks = runtime.signature_checks(found["run"]["id"]) if found["signatures"] else []
    except (UnknownRun, AmbiguousRun) as exc:
        return render(request, "error.html", me, 404, message=str(exc))
    if len(checks) != len(found["signatures"]):  # signed between the two reads: no check rather than a wrong one
        checks = [None] * len(found["signatures"])
    released = next((s for s in found["signatures"] if s["action"] == "release"), None)
    return render(request, "run_record.html", me, run=found["run"], body=render_body(found, checks=checks),
                  released=released, finished=found["run"]["status"] in present.FINISHED)


@router.get("/record.css")
def record_stylesheet() -> Response:
    """The record's stylesheet (the console's Content Security Policy takes no inline style)."""
    return Response(STYLESHEET, media_type="text/css; charset=utf-8")
