"""Retry and fork of a run: ``POST /api/v1/runs/{id}/retry`` and ``POST /api/v1/runs/{id}/fork``
(the ``rerun`` right: engineers and admins), the runtime's ``retry`` and ``fork`` with the caller as actor."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from exchange._api.bodies import Body
from exchange._api.identity import needs
from exchange._api.routes_runs import runtime_of
from exchange._auth.accounts import Identity
from exchange._auth.roles import RERUN

router = APIRouter(prefix="/api/v1", tags=["runs"])

Rerunner = Annotated[Identity, Depends(needs(RERUN))]


class Retry(Body):
    reason: str | None = None


class Fork(Body):
    from_step: int
    reason: str | None = None


@router.post("/runs/{run_id}/retry", status_code=202)
def retry_run(run_id: str, request: Request, who: Rerunner, body: Retry | None = None) -> JSONResponse:
    """Execute an ERROR or CANCELLED run again from where it stopped, under the same id: it goes
    back to ENQUEUED for any gateway; its recorded steps replay and the failed step runs again with
    fresh attempts. 409 naming the status of a run that is not ERROR or CANCELLED (nothing changed)."""
    whole_id = runtime_of(request).retry(run_id, body.reason if body else None, actor=who.actor)
    return JSONResponse({"id": whole_id, "status": "ENQUEUED"}, status_code=202)


@router.post("/runs/{run_id}/fork", status_code=201)
def fork_run(run_id: str, body: Fork, request: Request, who: Rerunner) -> dict[str, Any]:
    """Start a new run of the run's workflow and parameters whose steps before ``from_step`` are
    copied (replayed, not executed again); the run itself is untouched. 400 for a ``from_step``
    outside 1 to its last recorded step + 1 (the answer names both)."""
    return {"id": runtime_of(request).fork(run_id, body.from_step, body.reason, actor=who.actor)}
