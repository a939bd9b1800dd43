"""The one-line notices ("HOLD sent") and problems a console page shows after a form, and the
sign-in form's own CSRF token: both come from the server, never from the address.

A notice travels from the form's answer (a 303) to the page it redirects to in a short-lived
cookie, ``exchange_flash``, signed with HMAC-SHA256 under a key only this browser's session has:
the session's CSRF token when signed in, else the sign-in cookie (``exchange_signin``, random, made
when the sign-in page is first shown). Another site can neither read nor make such a cookie, and a
link with ``?notice=STOP sent`` shows nothing. The notice names its page: that page shows it for
:data:`LIFETIME_SECONDS` (a reload too, as the run page's script does when the run finishes); any
other page clears it.

The sign-in form carries ``signin_token``, derived from the sign-in cookie: a form posted from
another site has no such token for this browser's cookie (and the cookie itself, ``SameSite=Lax``,
is not sent with another site's POST), so it cannot sign the browser in as someone else (login CSRF).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import Response

from exchange._auth.accounts import Identity

COOKIE = "exchange_flash"
SIGNIN_COOKIE = "exchange_signin"
LIFETIME_SECONDS = 60
TEXT_MAX_CHARS = 600
_SIGNIN_KEY_CHARS = 43  # secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Flash:
    kind: str  # "notice" | "problem"
    text: str
    path: str  # the page it is for


def _mac(key: str, purpose: str, data: str) -> str:
    return hmac.new(key.encode(), f"{purpose}\n{data}".encode(), hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "replace"), b.encode("utf-8", "replace"))


def _key(request: Request, identity: Identity | None) -> str | None:
    if identity is not None and identity.csrf_token:
        return "session:" + identity.csrf_token
    signin = signin_key(request)
    return None if signin is None else "signin:" + signin


def put(request: Request, answer: Response, identity: Identity | None, kind: str, text: str, path: str,
        signin: str | None = None) -> None:
    """Leave ``text`` for the page at ``path`` in this browser (``signin``: a sign-in cookie set in
    the same answer, when there is no session any more)."""
    key = _key(request, identity) if signin is None else "signin:" + signin
    if key is None:
        return  # no key this browser holds: nothing that could be shown safely
    data = base64.urlsafe_b64encode(json.dumps([kind, text[:TEXT_MAX_CHARS], path, int(time.time()) + LIFETIME_SECONDS])
                                    .encode()).decode()
    answer.set_cookie(COOKIE, f"{data}.{_mac(key, 'flash', data)}", max_age=LIFETIME_SECONDS, httponly=True,
                      samesite="strict", secure=request.app.state.tls, path="/")


def take(request: Request, identity: Identity | None) -> Flash | None:
    """The notice left in this browser, when its signature holds for it and it is fresh (for this
    page or another: see :attr:`Flash.path`)."""
    raw = request.cookies.get(COOKIE, "")
    key = _key(request, identity)
    data, _, mac = raw.partition(".")
    if not raw or key is None or not _same(mac, _mac(key, "flash", data)):
        return None
    try:
        kind, text, path, expires = json.loads(base64.urlsafe_b64decode(data.encode()))
    except (ValueError, TypeError):
        return None
    if kind not in ("notice", "problem") or not isinstance(text, str) or not isinstance(path, str) \
            or not isinstance(expires, int) or expires < time.time():
        return None
    return Flash(kind, text, path)


def clear(answer: Response) -> None:
    answer.delete_cookie(COOKIE, path="/")


# ----- the sign-in form ------------------------------------------------------------------------------
def signin_key(request: Request) -> str | None:
    value = request.cookies.get(SIGNIN_COOKIE, "")
    return value if len(value) == _SIGNIN_KEY_CHARS and value.replace("-", "").replace("_", "").isalnum() else None


def new_signin_key() -> str:
    return secrets.token_urlsafe(32)


def set_signin_cookie(request: Request, answer: Response, key: str) -> None:
    answer.set_cookie(SIGNIN_COOKIE, key, httponly=True, samesite="lax", secure=request.app.state.tls, path="/")


def signin_token(key: str) -> str:
    """The sign-in form's hidden field for the browser whose sign-in cookie is ``key``."""
    return _mac(key, "signin", "")


def signin_token_ok(request: Request, sent: str) -> bool:
    key = signin_key(request)
    return key is not None and _same(sent, signin_token(key))


def cross_site(request: Request) -> bool:
    """True when the browser says the request comes from another site's page (``Sec-Fetch-Site``;
    absent for programs, and over plain HTTP to a host name some browsers leave it out)."""
    return request.headers.get("sec-fetch-site", "").lower() in ("cross-site", "same-site")
