"""The console's signing dialog: the page that asks the signed-in user's password again (and what
the signature means) before anything is signed.

Every electronic signature the console makes goes through it: signing a run's record, releasing
it, verifying a prompt's answer (always signed in the console), and the actions ``[signatures]
required_for`` lists (a command, a cancel, an answer). A form whose action needs a signature and
carries none is answered with this page, holding the form's own fields hidden, so that nothing is
sent before the signer has given their password; the page posts them back to the same address with
:data:`PASSWORD_FIELD` and :data:`MEANING_FIELD`. The password is checked as a sign-in is
(:meth:`~exchange._auth.accounts.Accounts.authenticate`, the same throttle): a wrong one shows the
page again with the refusal (401; 429 while the name waits at this address) and nothing is signed
or done. The signer is always the session's user: the page has no user field.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from exchange._api.console.pages import render
from exchange._api.identity import accounts_of
from exchange._api.peers import client_of
from exchange._api.signing import MEANING_MAX_CHARS
from exchange._auth.accounts import Identity
from exchange._engine import Signing
from exchange.errors import SignInRefused

PASSWORD_FIELD = "signature_password"
MEANING_FIELD = "signature_meaning"
_NOT_CARRIED = frozenset({"csrf_token", PASSWORD_FIELD, MEANING_FIELD})


@dataclass(frozen=True)
class Ask:
    """What the dialog asks for: ``title`` (what is signed, as a heading), ``detail`` (the action
    as it will be done: the command and its reason, the values answered), ``meaning`` (the default
    the field shows; empty: the signer must write one), ``meaning_fixed`` (a release: "released",
    not editable), ``back`` (where Cancel goes: nothing is done)."""

    title: str
    back: str
    meaning: str = ""
    meaning_fixed: bool = False
    detail: tuple[tuple[str, str], ...] = ()


def ask_page(request: Request, me: Identity, form: dict[str, str], ask: Ask, status: int = 200,
             refused: str | None = None) -> HTMLResponse:
    """The dialog, carrying ``form``'s fields (but the CSRF token, which the page puts back, and
    the password, never sent back to the browser)."""
    carried = {name: value for name, value in form.items() if name not in _NOT_CARRIED}
    meaning = ask.meaning if ask.meaning_fixed or MEANING_FIELD not in form else form[MEANING_FIELD]
    return render(request, "sign.html", me, status, ask=ask, carried=carried, meaning=meaning, refused=refused,
                  action_url=request.url.path, meaning_max=MEANING_MAX_CHARS)


async def signature(request: Request, me: Identity, form: dict[str, str], ask: Ask, *,
                    required: bool) -> Signing | HTMLResponse | None:
    """The signature ``form`` gives: None when it has none and none is ``required`` (act
    unsigned); the dialog to answer with when one is required and missing, or its meaning is
    empty, or the password is wrong (nothing is to be done then); else the signing of ``me``,
    the password checked (a sign-in attempt, throttled as one)."""
    password = form.get(PASSWORD_FIELD)
    if password is None:
        return ask_page(request, me, form, ask) if required else None
    meaning = ask.meaning if ask.meaning_fixed else form.get(MEANING_FIELD, ask.meaning).strip()
    if not meaning:
        return ask_page(request, me, form, ask, 400,
                        refused="Meaning: say what your signature means (reviewed, approved, ...); nothing signed")
    if len(meaning) > MEANING_MAX_CHARS:
        return ask_page(request, me, form, ask, 400,
                        refused=f"Meaning: at most {MEANING_MAX_CHARS} characters; nothing signed")
    try:
        signer = await run_in_threadpool(accounts_of(request).authenticate, me.name, password,
                                         client=client_of(request))
    except SignInRefused as exc:
        waits = bool(exc.retry_after_seconds)
        return ask_page(request, me, form, ask, 429 if waits else 401,
                        refused=f"{exc if waits else 'wrong password'}: nothing signed")
    return Signing(signer.name, meaning, name=signer.full_name)


__all__ = ["MEANING_FIELD", "PASSWORD_FIELD", "Ask", "ask_page", "signature"]
