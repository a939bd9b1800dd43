"""QA's side of the console: the review page (``/review``: finished runs not released yet, with their
exceptions counted by kind, and every finished run with who released it), and the signing of a
run's record (``/runs/{id}/sign``, the ``sign`` right) and its release (``/runs/{id}/release``, the
``release`` right), each through the signing dialog (:mod:`.sign_page`), which asks the user's
password again. The answer goes back to the record page with a line saying what was signed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from exchange._api.console import present
from exchange._api.console.pages import read_form, reader, redirect, render, require, signed_in
from exchange._api.console.sign_page import Ask, ask_page, signature
from exchange._api.routes_runs import runtime_of
from exchange._auth.accounts import Identity
from exchange._auth.roles import RELEASE, SIGN
from exchange.errors import ExchangeError

router = APIRouter(include_in_schema=False)

REVIEW_SHOWN = 200
RELEASED_MEANING = "released"


@router.get("/review", response_class=HTMLResponse)
def review_page(request: Request) -> HTMLResponse:
    """Finished runs not released yet, the oldest finished first (``?show=all``: every finished
    run, the newest first, with its release), each with its exceptions by kind."""
    me = reader(request)
    every = request.query_params.get("show") == "all"
    rows = runtime_of(request).review(pending=not every, limit=REVIEW_SHOWN)
    return render(request, "review.html", me, rows=rows, every=every, present=present, shown_max=REVIEW_SHOWN)


def _sign_ask(run_id: str) -> Ask:
    return Ask(title=f"Sign the batch record of run {run_id[:8]}", back=f"/runs/{run_id}/record",
               detail=(("Run", run_id),))


def _release_ask(run_id: str) -> Ask:
    return Ask(title=f"Release run {run_id[:8]}", back=f"/runs/{run_id}/record", meaning=RELEASED_MEANING,
               meaning_fixed=True, detail=(("Run", run_id),))


def _signer(request: Request, right: str, what: str) -> Identity:
    me = signed_in(request)
    require(me, right, what)
    return me


@router.get("/runs/{run_id}/sign", response_class=HTMLResponse)
def sign_dialog(request: Request, run_id: str) -> HTMLResponse:
    me = _signer(request, SIGN, "signing a run's record")
    return ask_page(request, me, {}, _sign_ask(run_id))


@router.post("/runs/{run_id}/sign")
async def sign_record(request: Request, run_id: str) -> Response:
    """Sign the record with the meaning typed, once the password is the signer's (see :mod:`.sign_page`)."""
    return await _sign_then(request, run_id, SIGN, "signing a run's record", _sign_ask(run_id), "sign",
                            lambda done: f"signed the record: {done['meaning']}")


@router.get("/runs/{run_id}/release", response_class=HTMLResponse)
def release_dialog(request: Request, run_id: str) -> HTMLResponse:
    me = _signer(request, RELEASE, "releasing a run")
    return ask_page(request, me, {}, _release_ask(run_id))


@router.post("/runs/{run_id}/release")
async def release_run(request: Request, run_id: str) -> Response:
    """Release the finished run (a signature meaning "released"), once the password is the signer's."""
    return await _sign_then(request, run_id, RELEASE, "releasing a run", _release_ask(run_id), "release",
                            lambda _done: f"released run {run_id[:8]}")


async def _sign_then(request: Request, run_id: str, right: str, what: str, ask: Ask,
                     method: Literal["sign", "release"], notice: Callable[[dict[str, Any]], str]) -> Response:
    """The signing page's answer: the page again until the password is the signer's, then the
    runtime's ``method`` (``sign`` or ``release``) and back to the record, saying what was done."""
    me = _signer(request, right, what)
    form = await read_form(request, me)
    given = await signature(request, me, form, ask, required=True)
    if isinstance(given, Response) or given is None:
        return given or ask_page(request, me, form, ask)
    back = f"/runs/{run_id}/record"
    try:
        done = await run_in_threadpool(getattr(runtime_of(request), method), run_id, given, role=me.role)
    except ExchangeError as exc:
        return redirect(request, back, me, problem=f"not {'signed' if method == 'sign' else 'released'}: {exc}")
    return redirect(request, back, me, notice=notice(done))
