"""Who is calling, and may they: the dependencies every protected route declares.

A request proves who it is with ``Authorization: Bearer TOKEN`` (programs) or the console's session
cookie (people). A request that changes something with the cookie must also carry the session's CSRF
token in ``X-CSRF-Token`` (a form field for the console's forms): another site can make a browser send
the cookie, never read the token.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import HTTPException, Request

from exchange._auth import secrets
from exchange._auth.accounts import Accounts, Identity

SESSION_COOKIE = "exchange_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="exchange"'}


def accounts_of(request: Request) -> Accounts:
    accounts: Accounts = request.app.state.accounts
    return accounts


def caller(request: Request) -> Identity:
    """The identity of the request; 401 without a valid credential, 403 for a cookie request that
    changes something without the session's CSRF token."""
    accounts = accounts_of(request)
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        identity = accounts.token_identity(token.strip()) if scheme.lower() == "bearer" else None
        if identity is None:
            raise HTTPException(401, "the API token is unknown, revoked or malformed", headers=_CHALLENGE)
        return identity
    session = request.cookies.get(SESSION_COOKIE)
    identity = accounts.session_identity(session) if session else None
    if identity is None:
        raise HTTPException(401, "sign in first, or send Authorization: Bearer TOKEN", headers=_CHALLENGE)
    if request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not identity.csrf_token or not secrets.same(sent, identity.csrf_token):
            raise HTTPException(403, f"missing or wrong CSRF token (send the session's token in {CSRF_HEADER})")
    return identity


def require(identity: Identity, right: str, what: str = "this") -> None:
    """403 naming the caller's role, ``right`` and the roles that hold it, unless the caller's role
    holds ``right`` (:data:`exchange._roles.RIGHTS`)."""
    if not identity.may(right):
        raise HTTPException(403, identity.refusal(right, what))


def needs(right: str) -> Callable[[Request], Identity]:
    """A dependency: the caller, when its role holds ``right``; 403 as :func:`require` otherwise."""

    def check(request: Request) -> Identity:
        identity = caller(request)
        require(identity, right)
        return identity

    check.__name__ = f"needs_{right}"
    return check
