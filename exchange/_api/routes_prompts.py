"""What waits for people: ``/api/v1/attention`` (the runs that need someone), ``/api/v1/prompts``
and ``/api/v1/runs/{id}/prompts/{key}``, as in the CLI (same runtime calls). Who may answer or
verify is the ``answer`` and ``verify`` rights' and the prompt's to say (its ``role`` and
``verify_role``): the runtime holds the caller's role to them (403), and refuses the person who
answered as verifier.

Who acts is a person when two must: a console session is its signed-in user; a body may name a user
with their password (``"user"``, ``"password"``), checked as a sign-in is (401 when wrong, 429 while
that name waits at this address), and that user acts whatever credential carried the request. An
API token alone is a program, not a person: it may answer a prompt that nobody verifies, but it may
not verify, send back, nor answer a prompt that a second person verifies (403): a program holding
two tokens, or a person holding a token and a user, would otherwise be two persons."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from exchange._api.bodies import Body
from exchange._api.identity import accounts_of
from exchange._api.peers import client_of
from exchange._api.routes_runs import Caller, Viewer, runtime_of
from exchange._api.signing import SignatureBody, signing_of
from exchange._auth.accounts import PASSWORD_MAX_CHARS, Identity
from exchange._engine import Signing

router = APIRouter(prefix="/api/v1", tags=["prompts"])


class Signed(Body):
    """A body that may name the user who acts, with their password (both or neither)."""

    user: str | None = Field(default=None, max_length=100)
    password: str | None = Field(default=None, max_length=PASSWORD_MAX_CHARS)


class Answer(Signed):
    values: dict[str, Any] = Field(default_factory=dict)  # field name -> value, checked against the prompt
    reason: str | None = None
    signature: SignatureBody | None = None  # needed when [signatures] required_for lists answer:KEY


class Verification(Signed):
    reason: str | None = None
    reject: bool = False  # send the answer back: the prompt opens again
    signature: SignatureBody | None = None  # needed when [signatures] required_for lists verify


def acting(request: Request, who: Identity, body: Signed) -> Identity:
    """Who acts: the user the body names, when its password is right (SignInRefused: 401, or 429
    while the name waits at this address), else the caller. 400 for one of the two without the
    other."""
    if body.user is None and body.password is None:
        return who
    if body.user is None or body.password is None:
        missing = "password" if body.password is None else "user"
        raise HTTPException(400, f"{missing}: needed with {'user' if missing == 'password' else 'password'} "
                                 "(name the user who acts and give their password, or neither)")
    return accounts_of(request).authenticate(body.user, body.password, client=client_of(request))


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
def answer_prompt(run_id: str, key: str, body: Answer, request: Request, who: Caller) -> JSONResponse:
    """Answer the prompt: 200 with the prompt when the answer is final (the run goes on), 202 when it
    waits for a second person's verification; 400 naming the field a value breaks (the prompt stays
    open); 401 for a wrong ``user``/``password``; 403 for a role without the ``answer`` right
    (before anything is looked up), below the prompt's role, or for an API token on a prompt that is
    verified; 409 when the prompt is not open."""
    me = acting(request, who, body)
    signing = signing_of(request, me, body.signature, f"answer:{key}")
    if signing is None and body.user is not None and runtime_of(request).signature_required(f"answer:{key}"):
        signing = Signing(me.name, "answered", name=me.full_name)  # its password came with it: it signs it
    view = runtime_of(request).answer_prompt(run_id, key, body.values, actor=me.actor, role=me.role,
                                             reason=body.reason, person=me.kind == "user", signing=signing)
    return JSONResponse(view, status_code=200 if view["status"] == "ANSWERED" else 202)


@router.post("/runs/{run_id}/prompts/{key}/verify")
def verify_prompt(run_id: str, key: str, request: Request, who: Caller,
                  body: Verification | None = None) -> dict[str, Any]:
    """Verify the answer that waits for verification (``reject``: send it back; the prompt opens
    again), as a person: a console session's user, or the ``user`` the body names with their
    ``password``. 200 with the prompt; 401 for a wrong ``user``/``password``; 403 for an API token
    alone, the person who answered, a role without the ``verify`` right or below the prompt's
    ``verify_role``; 409 when no
    answer waits for verification. With the verifier's password in the body (``user`` and
    ``password``, or ``signature``) the verification is an electronic signature; ``[signatures]
    required_for`` ``verify`` makes one needed (403 without)."""
    given = body or Verification()
    me = acting(request, who, given)
    signing = signing_of(request, me, given.signature, "verify")
    if signing is None and given.user is not None:  # the verifier's password came with it: a signature
        signing = Signing(me.name, "sent back" if given.reject else "verified", name=me.full_name)
    return dict(runtime_of(request).verify_prompt(run_id, key, actor=me.actor, role=me.role, reason=given.reason,
                                                  reject=given.reject, person=me.kind == "user", signing=signing))
