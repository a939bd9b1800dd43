"""Sign in, who am I, sign out: ``/api/v1/session``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from pydantic import Field

from exchange._api.bodies import Body
from exchange._api.identity import SESSION_COOKIE, accounts_of, caller
from exchange._api.peers import client_of
from exchange._auth.accounts import PASSWORD_MAX_CHARS, Identity
from exchange._auth.roles import RIGHTS

router = APIRouter(prefix="/api/v1", tags=["session"])


class SignIn(Body):
    user: str = Field(max_length=100)
    password: str = Field(max_length=PASSWORD_MAX_CHARS)


@router.post("/session")
def sign_in(body: SignIn, request: Request, response: Response) -> dict[str, Any]:
    """Sign in with a user name and password: sets the session cookie and returns the CSRF token
    that requests changing something must send in ``X-CSRF-Token``. 401 for a wrong user or
    password (the same answer for both), 429 while this user name waits at this address after
    failures; 403 when a browser says another site's page sent it (login CSRF; another site's form
    cannot send JSON either, which the body must be)."""
    if request.headers.get("sec-fetch-site", "").lower() in ("cross-site", "same-site"):
        raise HTTPException(403, "sign-in from another site's page is refused")
    settings = request.app.state.settings
    lifetime_seconds = settings.session_hours * 3600
    session_id, identity = accounts_of(request).sign_in(
        body.user, body.password, lifetime_seconds=lifetime_seconds, client=client_of(request)
    )
    response.set_cookie(SESSION_COOKIE, session_id, max_age=int(lifetime_seconds), httponly=True,
                        samesite="strict", secure=request.app.state.tls, path="/")
    return {"user": identity.name, "role": identity.role, "csrf_token": identity.csrf_token,
            "expires_in_seconds": int(lifetime_seconds)}


@router.get("/session")
def who_am_i(identity: Annotated[Identity, Depends(caller)]) -> dict[str, Any]:
    """The caller: name, role and its rights (in :data:`exchange._roles.RIGHTS` order), and whether
    it is a user or an API token."""
    return {"user": identity.name, "role": identity.role, "rights": [r for r in RIGHTS if identity.may(r)],
            "kind": identity.kind, "actor": identity.actor}


@router.delete("/session", status_code=204)
def sign_out(request: Request, identity: Annotated[Identity, Depends(caller)]) -> Response:
    """End the console session (its cookie stops working at once, on every gateway)."""
    session = request.cookies.get(SESSION_COOKIE)
    if session:
        accounts_of(request).sign_out(session)
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


__all__ = ["router"]
