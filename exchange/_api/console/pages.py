"""The console's plumbing: templates, who is signed in, the forms and their CSRF field.

Pages take the session cookie only (an API token is for programs). A page asked for without a
valid session redirects to the sign-in page, which comes back to it afterwards. Every form that
changes something carries the session's CSRF token in a hidden ``csrf_token`` field; forms are
``application/x-www-form-urlencoded`` and parsed here (nothing else is accepted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from exchange._api.console import flash
from exchange._api.identity import SESSION_COOKIE, accounts_of
from exchange._auth import secrets
from exchange._auth.accounts import Identity
from exchange._auth.roles import READ, RIGHTS

STATIC_DIR = Path(__file__).parent / "static"
PARTIALS = frozenset({"run_panels.html"})  # parts of a page its script fetches: they show no notice
FORM_FIELDS_MAX = 200
_TEMPLATES = Environment(loader=PackageLoader("exchange._api.console", "templates"),
                         autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)


class SignInNeeded(Exception):
    """No valid console session: the answer is a redirect to the sign-in page."""

    def __init__(self, back_to: str) -> None:
        super().__init__(back_to)
        self.back_to = back_to


class PageRefused(Exception):
    """The page or action is not for this user (403), or the form is not acceptable (400, 415)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def signed_in(request: Request) -> Identity:
    """The user of the console session; SignInNeeded without one (an expired or ended session too)."""
    session = request.cookies.get(SESSION_COOKIE)
    identity = accounts_of(request).session_identity(session) if session else None
    if identity is None:
        back_to = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise SignInNeeded(back_to)
    return identity


def require(identity: Identity, right: str, what: str) -> None:
    """PageRefused (403) naming the user's role, ``right`` and the roles that hold it, unless the
    user's role holds ``right``."""
    if not identity.may(right):
        raise PageRefused(403, identity.refusal(right, what))


def reader(request: Request) -> Identity:
    """The signed-in user of a page that shows runs, queues, units or templates: the ``read`` right."""
    me = signed_in(request)
    require(me, READ, "this page")
    return me


REASON_MAX_CHARS = 500  # an operator's reason typed into a console form, as stored


def form_reason(form: dict[str, str]) -> str | None:
    """The form's ``reason`` field: blanks around it removed, cut at :data:`REASON_MAX_CHARS`, None
    when empty."""
    return form.get("reason", "").strip()[:REASON_MAX_CHARS] or None


async def read_form(request: Request, identity: Identity | None) -> dict[str, str]:
    """The submitted form's fields (the first value of each); with ``identity``, the CSRF field
    must hold its session's token. PageRefused (415, 400, 403) otherwise."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if body and content_type != "application/x-www-form-urlencoded":
        raise PageRefused(415, f"a console form is sent as application/x-www-form-urlencoded, not {content_type!r}")
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False,
                          max_num_fields=FORM_FIELDS_MAX)
    except (UnicodeDecodeError, ValueError) as exc:
        raise PageRefused(400, f"the form cannot be read: {exc}") from None
    form = {key: values[0] for key, values in parsed.items()}
    if identity is not None:
        sent = form.get("csrf_token", "")
        if not identity.csrf_token or not secrets.same(sent, identity.csrf_token):
            raise PageRefused(403, "the form's CSRF token is missing or stale: reload the page and try again")
    return form


def safe_back_to(target: str | None, default: str = "/runs") -> str:
    """A local path to return to after sign-in (never another site: ``//host`` or a scheme)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target


def redirect(request: Request, path: str, me: Identity | None, *, notice: str | None = None,
             problem: str | None = None) -> RedirectResponse:
    """303 to ``path``, with a one-line notice or problem the next page shows (:mod:`.flash`),
    signed for ``me``'s session (None: for the browser's sign-in cookie)."""
    answer = RedirectResponse(path, status_code=303)
    text = notice or problem
    if text:
        flash.put(request, answer, me, "notice" if notice else "problem", text, urlsplit(path).path)
    return answer


def render(request: Request, template: str, identity: Identity | None, status: int = 200,
           **context: Any) -> HTMLResponse:
    """The page ``template`` for ``identity`` (None on the sign-in page), with the notice or problem
    the server left for this browser, if any (never one from the query string)."""
    left = flash.take(request, identity) if template not in PARTIALS else None
    shown = left if left is not None and left.path == request.url.path else None
    page = _TEMPLATES.get_template(template).render(
        request=request, me=identity, csrf_token=identity.csrf_token if identity else "",
        can={right: identity is not None and identity.may(right) for right in RIGHTS},  # what to show
        has_units=identity is not None and bool(request.app.state.runtime.config.units.units),
        notice=shown.text if shown is not None and shown.kind == "notice" else None,
        problem=shown.text if shown is not None and shown.kind == "problem" else None,
        quote=quote, **context)
    answer = HTMLResponse(page, status_code=status)
    if template not in PARTIALS and flash.COOKIE in request.cookies and shown is None:
        flash.clear(answer)  # another page's notice, or one not to be shown: gone

    return answer


__all__ = ["PageRefused", "SignInNeeded", "STATIC_DIR", "read_form", "redirect", "render", "require",
           "safe_back_to", "signed_in"]
