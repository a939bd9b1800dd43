"""Electronic signatures over HTTP: ``POST /api/v1/runs/{id}/signatures`` (the ``sign`` right),
``POST /api/v1/runs/{id}/release`` (the ``release`` right), ``GET /api/v1/runs/{id}/signatures`` and
``GET /api/v1/review`` (the ``read`` right), and :func:`signing_of`, the ``signature`` an action's
body carries when ``[signatures] required_for`` lists the action (a command, a cancel, an answer, a
verification).

The signer is the signed-in user (a console session), or the user a prompt's body names with their
password: never an API token, which is a program (403). The signer's password is in the body at
each signing and checked as a sign-in is: a wrong one signs nothing and answers 401 (the same for
an unknown user), and counts in the sign-in throttle (429 while the name waits at this address).
An action that needs a signature without one is refused with 403, naming what is missing, before
anything is done.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from exchange._api.bodies import Body
from exchange._api.identity import needs
from exchange._api.routes_runs import Viewer, runtime_of
from exchange._api.signing import SignatureBody, signer
from exchange._auth.accounts import PASSWORD_MAX_CHARS, Identity
from exchange._auth.roles import RELEASE, SIGN
from exchange._engine import Signing

router = APIRouter(prefix="/api/v1", tags=["signatures"])

Signer = Annotated[Identity, Depends(needs(SIGN))]
Releaser = Annotated[Identity, Depends(needs(RELEASE))]


class Release(Body):
    password: str = Field(max_length=PASSWORD_MAX_CHARS)


@router.post("/runs/{run_id}/signatures", status_code=201)
def sign_run(run_id: str, body: SignatureBody, request: Request, who: Signer) -> dict[str, Any]:
    """Sign the run's record as the signed-in user, with their ``password`` and a ``meaning``
    (required): 201 with the signature (``user``, ``name``, ``meaning``, ``at``, ``record_hash``,
    ``audit_head``). 401 for a wrong password (throttled: 429), 403 without the ``sign`` right or
    for an API token, 400 without a meaning, 404 for an unknown run."""
    if body.meaning is None:
        raise HTTPException(400, "meaning: needed: say what the signature means (reviewed, approved, ...)")
    me = signer(request, who, body.password)
    return runtime_of(request).sign(run_id, Signing(me.name, body.meaning, name=me.full_name), role=me.role)


@router.post("/runs/{run_id}/release", status_code=201)
def release_run(run_id: str, body: Release, request: Request, who: Releaser) -> dict[str, Any]:
    """Release the finished run: a signature meaning "released" of the signed-in user, with their
    ``password``. 201 with the signature; 401 for a wrong password (429 throttled), 403 without the
    ``release`` right or for an API token, 409 for a run not finished or released already."""
    me = signer(request, who, body.password)
    return runtime_of(request).release(run_id, Signing(me.name, name=me.full_name), role=me.role)


@router.get("/runs/{run_id}/signatures")
def run_signatures(run_id: str, request: Request, _who: Viewer) -> list[dict[str, Any]]:
    """The run's signatures, oldest first, as its record lists them."""
    return runtime_of(request).signatures(run_id)


@router.get("/review")
def review(request: Request, _who: Viewer, pending: bool = True,
           limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> JSONResponse:
    """Finished runs for review: ``pending`` (the default) those not released yet, oldest first,
    else every finished run, newest first; each with ``exceptions`` (a count), ``exception_kinds``,
    ``signatures`` (a count) and ``released``, as ``exchange review --json``."""
    return JSONResponse(runtime_of(request).review(pending=pending, limit=limit))
