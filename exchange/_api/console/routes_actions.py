"""The run page's buttons: Hold, Resume, Stop, Abort, Reset (operators) and Cancel (engineers), each with
the Reason field; on a finished run, Retry (ERROR or CANCELLED) and Fork (with the From step field)
for engineers. The answer goes back to the run page (a fork's: the new run's page) with a line
saying what happened. A command or cancel that ``[signatures] required_for`` lists is answered
with the signing dialog first (:mod:`.sign_page`): nothing is sent before the password is given."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from exchange._api.console.pages import form_reason, read_form, redirect, require, signed_in
from exchange._api.console.sign_page import Ask, signature
from exchange._api.routes_runs import runtime_of
from exchange._auth.roles import CANCEL, COMMAND, RERUN
from exchange.errors import ExchangeError

router = APIRouter(include_in_schema=False)


@router.post("/runs/{run_id}/command")
async def send_command(request: Request, run_id: str) -> Response:
    """Post the pressed button's command with the reason; a command the run's state will not
    accept is refused here (strict), so an operator never believes a dropped HOLD was taken."""
    me = signed_in(request)
    require(me, COMMAND, "sending a command")
    form = await read_form(request, me)
    back = f"/runs/{run_id}"
    cmd, reason = form.get("cmd", ""), form_reason(form)
    runtime = runtime_of(request)
    action = cmd.strip().upper()
    meaning = runtime.signature_required(action)
    ask = Ask(title=f"Sign {action} of run {run_id[:8]}", back=back, meaning=meaning or f"ordered {action}",
              detail=(("Command", action), ("Reason", reason or "—")))
    signing = await signature(request, me, form, ask, required=meaning is not None)
    if isinstance(signing, Response):
        return signing
    try:
        await run_in_threadpool(runtime.send_command, run_id, cmd, reason, actor=me.actor, strict=True,
                                signing=signing)
    except ExchangeError as exc:
        return redirect(request, back, me, problem=f"{cmd or 'command'} not sent: {exc}")
    return redirect(request, back, me, notice=f"{cmd.upper()} sent" + (f" ({reason})" if reason else ""))


@router.post("/runs/{run_id}/cancel")
async def cancel_run(request: Request, run_id: str) -> Response:
    me = signed_in(request)
    require(me, CANCEL, "cancelling a run")
    form = await read_form(request, me)
    back = f"/runs/{run_id}"
    reason = form_reason(form)
    runtime = runtime_of(request)
    meaning = runtime.signature_required("cancel")
    ask = Ask(title=f"Sign the cancel of run {run_id[:8]}", back=back, meaning=meaning or "cancelled",
              detail=(("Action", "cancel"), ("Reason", reason or "—")))
    signing = await signature(request, me, form, ask, required=meaning is not None)
    if isinstance(signing, Response):
        return signing
    try:
        status = await run_in_threadpool(runtime.cancel, run_id, reason, actor=me.actor, signing=signing)
    except ExchangeError as exc:
        return redirect(request, back, me, problem=f"not cancelled: {exc}")
    return redirect(request, back, me, notice=f"cancel requested (the run was {status})")


@router.post("/runs/{run_id}/retry")
async def retry_run(request: Request, run_id: str) -> Response:
    me = signed_in(request)
    require(me, RERUN, "retrying a run")
    form = await read_form(request, me)
    back = f"/runs/{run_id}"
    reason = form_reason(form)
    try:
        await run_in_threadpool(runtime_of(request).retry, run_id, reason, actor=me.actor)
    except ExchangeError as exc:
        return redirect(request, back, me, problem=f"not retried: {exc}")
    return redirect(request, back, me, notice="retry queued: the run executes again from its failed step")


@router.post("/runs/{run_id}/fork")
async def fork_run(request: Request, run_id: str) -> Response:
    me = signed_in(request)
    require(me, RERUN, "forking a run")
    form = await read_form(request, me)
    back = f"/runs/{run_id}"
    reason = form_reason(form)
    text = form.get("from_step", "").strip()
    if re.fullmatch(r"[0-9]{1,9}", text) is None:
        return redirect(request, back, me,
                        problem=f"not forked: From step must be a whole number >= 1, got {text[:20]!r}")
    try:
        new_id = await run_in_threadpool(runtime_of(request).fork, run_id, int(text), reason, actor=me.actor)
    except ExchangeError as exc:
        return redirect(request, back, me, problem=f"not forked: {exc}")
    return redirect(request, f"/runs/{new_id}", me, notice=f"forked from step {int(text)} of run {run_id[:8]}")
