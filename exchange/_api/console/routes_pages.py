"""Sign in and out, the runs page and a run's page."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from exchange._api.console import flash, present
from exchange._api.console.pages import read_form, reader, render, safe_back_to, signed_in
from exchange._api.identity import SESSION_COOKIE, accounts_of
from exchange._api.peers import client_of
from exchange._api.routes_runs import runtime_of
from exchange._engine import RunView, progress_history
from exchange.errors import AccessError, AmbiguousRun, SignInRefused, UnknownRun

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)

SINCE_CHOICES = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7), "all": None}
RUNS_SHOWN = 200
ATTENTION_SHOWN = 100  # the runs page's list of the runs that need someone
STEPS_SHOWN = 30  # the newest; ?steps=all shows up to STEPS_ALL
STEPS_ALL = 1000
EVENTS_SHOWN = 100


@router.get("/")
def home(request: Request) -> Response:
    signed_in(request)
    return RedirectResponse("/runs", status_code=303)


def _signin_page(request: Request, status: int = 200, *, back_to: str, user: str = "",
                 refused: str | None = None) -> HTMLResponse:
    """The sign-in form, with the token tied to this browser's sign-in cookie (made when missing)."""
    key = flash.signin_key(request)
    fresh = key is None
    if key is None:
        key = flash.new_signin_key()
    answer = render(request, "signin.html", None, status, back_to=back_to, user=user, refused=refused,
                    signin_token=flash.signin_token(key))
    if fresh:
        flash.set_signin_cookie(request, answer, key)
    return answer


@router.get("/signin", response_class=HTMLResponse)
def sign_in_page(request: Request, next: str = "/runs") -> HTMLResponse:  # noqa: A002 (the query's name)
    return _signin_page(request, back_to=safe_back_to(next))


@router.post("/signin", response_class=HTMLResponse)
async def sign_in(request: Request) -> Response:
    """The sign-in form: a session cookie and back to the page asked for; the form again with the
    reason (401 for a wrong user or password, 429 while this name waits at this address, 403 for a
    form that did not come from this browser's sign-in page: login CSRF)."""
    form = await read_form(request, None)
    user, back_to = form.get("user", "").strip(), safe_back_to(form.get("next"))
    if flash.cross_site(request) or not flash.signin_token_ok(request, form.get("signin_token", "")):
        log.warning("console sign-in form for %r from %s refused: not sent from this browser's sign-in page",
                    user[:100], client_of(request))
        return _signin_page(request, 403, back_to=back_to, user=user,
                            refused="this sign-in form is stale or was sent from another site: sign in here")
    settings = request.app.state.settings
    lifetime_seconds = settings.session_hours * 3600
    try:
        session_id, _identity = await run_in_threadpool(
            accounts_of(request).sign_in, user, form.get("password", ""), lifetime_seconds=lifetime_seconds,
            client=client_of(request))
    except SignInRefused as exc:
        status = 429 if exc.retry_after_seconds else 401
        return _signin_page(request, status, back_to=back_to, user=user, refused=str(exc))
    except AccessError as exc:
        return _signin_page(request, 401, back_to=back_to, user=user, refused=str(exc))
    answer = RedirectResponse(back_to, status_code=303)
    answer.set_cookie(SESSION_COOKIE, session_id, max_age=int(lifetime_seconds), httponly=True, samesite="strict",
                      secure=request.app.state.tls, path="/")
    return answer


@router.post("/signout")
async def sign_out(request: Request) -> Response:
    me = signed_in(request)
    await read_form(request, me)
    accounts_of(request).sign_out(request.cookies[SESSION_COOKIE])
    answer = RedirectResponse("/signin", status_code=303)
    key = flash.signin_key(request) or flash.new_signin_key()
    flash.set_signin_cookie(request, answer, key)
    flash.put(request, answer, None, "notice", "signed out", "/signin", signin=key)
    answer.delete_cookie(SESSION_COOKIE, path="/")
    return answer


def _filters(request: Request) -> dict[str, Any]:
    query = request.query_params
    status = query.get("status", "").upper()
    since = query.get("since", "24h")
    return {"status": status if status in present.ALL_STATUSES else "",
            "workflow": query.get("workflow", "")[:200], "since": since if since in SINCE_CHOICES else "24h"}


@router.get("/runs", response_class=HTMLResponse)
def runs_page(request: Request) -> HTMLResponse:
    """Runs, newest first, filtered by status, workflow and age; kept live by the page's script."""
    me = reader(request)
    runtime = runtime_of(request)
    chosen = _filters(request)
    runs = runtime.list_runs(status=chosen["status"] or None, workflow=chosen["workflow"] or None,
                            since=SINCE_CHOICES[chosen["since"]], limit=RUNS_SHOWN)
    workflows = sorted(d.name for d in runtime.registry.all())
    return render(request, "runs.html", me, runs=runs, chosen=chosen, statuses=present.ALL_STATUSES,
                  attention=runtime.attention(limit=ATTENTION_SHOWN),
                  workflows=workflows, since_choices=list(SINCE_CHOICES), present=present,
                  stream_query=f"status={chosen['status']}&workflow={chosen['workflow']}&since={chosen['since']}")


def _run_or_none(request: Request, run_id: str) -> tuple[RunView | None, str]:
    steps = STEPS_ALL if request.query_params.get("steps") == "all" else STEPS_SHOWN
    try:
        run = runtime_of(request).get_run(run_id, last_steps=steps, last_events=EVENTS_SHOWN, hide_progress=True)
    except (UnknownRun, AmbiguousRun) as exc:
        return None, str(exc)
    return run, ""


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: str) -> HTMLResponse:
    """A run: parameters, result or error, live state and progress, trend, steps, audit trail and
    the command buttons the state allows."""
    me = reader(request)
    run, problem = _run_or_none(request, run_id)
    if run is None:
        return render(request, "error.html", me, 404, message=problem)
    runtime = runtime_of(request)
    history = progress_history(runtime, run["id"])
    signed = {action: runtime.signature_required(action) is not None for action in (*present.BUTTON_ORDER, "cancel")}
    return render(request, "run.html", me, run=run, present=present, enabled=present.enabled_commands(run),
                  signed=signed,
                  prompt_rights=present.prompt_rights(run.get("prompt"), me.actor, me.role, me.roles),
                  audit=present.audit_rows(run["events"]), trend_json=json.dumps(present.trend(history)),
                  rules_json=json.dumps(present.command_rules()), buttons=present.BUTTON_ORDER)


@router.get("/runs/{run_id}/panels", response_class=HTMLResponse)
def run_panels(request: Request, run_id: str) -> HTMLResponse:
    """The run page's steps and audit trail, for its script to refresh them in place."""
    me = reader(request)
    run, problem = _run_or_none(request, run_id)
    if run is None:
        return render(request, "error.html", me, 404, message=problem)
    return render(request, "run_panels.html", me, run=run, present=present, audit=present.audit_rows(run["events"]))
