"""The ``signature`` of a body (``{"password", "meaning"}``): who signs an action over HTTP, checked
as a sign-in is (see :mod:`exchange._api.routes_signatures`)."""

from __future__ import annotations

from fastapi import HTTPException, Request
from pydantic import Field

from exchange._api.bodies import Body
from exchange._api.identity import accounts_of
from exchange._api.peers import client_of
from exchange._auth.accounts import PASSWORD_MAX_CHARS, Identity
from exchange._engine import SIGNATURE_MEANING_MAX_CHARS, Signing

MEANING_MAX_CHARS = SIGNATURE_MEANING_MAX_CHARS  # the runtime's limit, which the body and the console check first


class SignatureBody(Body):
    """``signature`` of an action's body, and the body of a signature: the signer's password, and
    what the signature means (None: the action's default)."""

    password: str = Field(max_length=PASSWORD_MAX_CHARS)
    meaning: str | None = Field(default=None, max_length=MEANING_MAX_CHARS)


def signer(request: Request, who: Identity, password: str) -> Identity:
    """``who`` once ``password`` is theirs, checked as a sign-in (SignInRefused: 401, or 429);
    403 for an API token."""
    if who.kind != "user":
        raise HTTPException(403, f"{who.actor} is a program (an API token), not a person: an electronic signature "
                                 "is a user's, with their password (sign in to the console, or name the user)")
    return accounts_of(request).authenticate(who.name, password, client=client_of(request))


def signing_of(request: Request, who: Identity, given: SignatureBody | None, action: str) -> Signing | None:
    """The signature ``who`` gives an action: None when the body has none (the runtime refuses the
    action, 403, when ``[signatures] required_for`` lists it); else its password checked."""
    if given is None:
        return None
    from exchange._config_signatures import default_meaning

    me = signer(request, who, given.password)
    meaning = given.meaning if given.meaning is not None else default_meaning(action)
    return Signing(me.name, meaning, name=me.full_name)
