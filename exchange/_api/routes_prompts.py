"""What waits for people: ``/api/v1/attention`` (the runs that need someone), ``/api/v1/prompts``
and ``/api/v1/runs/{id}/prompts/{key}``, as in the CLI (same runtime calls). Who may answer or
verify is the prompt's to say (its ``role`` and ``verify_role``): the runtime holds the caller's
role to it (403), and refuses the person who answered as verifier."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from exchange._api.bodies import Body
from exchange._api.routes_runs import Viewer, runtime_of

router = APIRouter(prefix="/api/v1", tags=["prompts"])


class Answer(Body):
    values: dict[str, Any] = Field(default_factory=dict)  # field name -> value, checked against the prompt
    reason: str | None = None


class Verification(Body):
    reason: str | None = None
    reject: bool = False  # send the answer back: the prompt opens again


@router.get("/prompts")
def list_prompts(request: Request, _who: Viewer,
                 run: Annotated[str | None, Query(max_length=100)] = None) -> list[dict[str, Any]]:
    """The prompts that wait for a person (OPEN, or AWAITING_VERIFICATION), oldest first; of one
    run with ``run``."""
    return [dict(view) for view in runtime_of(request).open_prompts(run_id=run)]  # see list_runs


@router.get("/attention")
def list_attention(request: Request, _who: Viewer,
                   limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> list[dict[str, Any]]:
    """The runs that need someone, a row per reason (``prompt``, ``held``, ``in_doubt``,
    ``error``), most urgent first: ``{"run", "workflow", "status", "state", "reason", "since",
    "detail"}``, as ``exchange runs --attention --json`` prints them."""
    return runtime_of(request).attention(limit=limit)


@router.post("/runs/{run_id}/prompts/{key}")
def answer_prompt(run_id: str, key: str, body: Answer, request: Request, who: Viewer) -> JSONResponse:
    """Answer the prompt: 200 with the prompt when the answer is final (the run goes on), 202 when it
    waits for a second person's verification; 400 naming the field a value breaks (the prompt stays
    open); 403 below the prompt's role; 409 when the prompt is not open."""
    view = runtime_of(request).answer_prompt(run_id, key, body.values, actor=who.actor, role=who.role,
                                             reason=body.reason)
    return JSONResponse(view, status_code=200 if view["status"] == "ANSWERED" else 202)


@router.post("/runs/{run_id}/prompts/{key}/verify")
def verify_prompt(run_id: str, key: str, request: Request, who: Viewer,
                  body: Verification | None = None) -> dict[str, Any]:
    """Verify the answer that waits for verification (``reject``: send it back; the prompt opens
    again): 200 with the prompt; 403 for the person who answered or a role below the prompt's
    ``verify_role``; 409 when no answer waits for verification."""
    given = body or Verification()
    return dict(runtime_of(request).verify_prompt(run_id, key, actor=who.actor, role=who.role,
                                                  reason=given.reason, reject=given.reject))
