"""The queues page (counts by queue and status), the units page (who holds each unit, who waits:
``Runtime.units``, as ``exchange units``) and the admin page (admins only): maintenance mode,
retention, users and tokens."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from exchange._api.console import present
from exchange._api.console.pages import read_form, reader, redirect, render, require, signed_in
from exchange._api.identity import accounts_of
from exchange._api.routes_maintenance import change_maintenance
from exchange._api.routes_runs import runtime_of
from exchange._auth.roles import ADMIN_RIGHT
from exchange._engine import Maintenance, Retention, queue_counts
from exchange._store import ALL_STATUSES
from exchange.errors import ExchangeError

router = APIRouter(include_in_schema=False)


@router.get("/queues", response_class=HTMLResponse)
def queues_page(request: Request) -> HTMLResponse:
    me = reader(request)
    return render(request, "queues.html", me, queues=queue_counts(runtime_of(request)), statuses=ALL_STATUSES)


@router.get("/units", response_class=HTMLResponse)
def units_page(request: Request) -> HTMLResponse:
    me = reader(request)
    runtime = runtime_of(request)
    units = runtime.units() if runtime.config.units.units else []
    return render(request, "units.html", me, units=units, present=present)


@router.get("/admin", response_class=HTMLResponse)
def admin_page(request: Request) -> HTMLResponse:
    me = signed_in(request)
    require(me, ADMIN_RIGHT, "the admin page")
    accounts = accounts_of(request)
    runtime = runtime_of(request)
    return render(request, "admin.html", me, users=accounts.list_users(), tokens=accounts.list_tokens(),
                  roles=accounts.roles.names(),
                  maintenance=Maintenance(runtime).status(), retention=runtime.config.retention,
                  password_min_chars=accounts.password_min_chars)


@router.post("/admin/maintenance")
async def set_maintenance(request: Request) -> Response:
    """The maintenance buttons: Drain, Cancel queued, Back to normal (with the Reason)."""
    me = signed_in(request)
    require(me, ADMIN_RIGHT, "maintenance")
    form = await read_form(request, me)
    mode = form.get("mode", "")
    if mode not in ("drain", "cancel", "normal"):
        return redirect(request, "/admin", me, problem=f"unknown maintenance mode {mode!r}")
    try:
        status = await run_in_threadpool(change_maintenance, Maintenance(runtime_of(request)), mode, actor=me.actor,
                                         reason=form.get("reason", "").strip() or None,
                                         queue=form.get("queue", "").strip() or None)
    except ExchangeError as exc:
        return redirect(request, "/admin", me, problem=f"maintenance not changed: {exc}")
    cancelled = status.get("cancelled")
    return redirect(request, "/admin", me, notice=f"maintenance: {status['mode']}"
                    + (f", {len(cancelled)} queued run(s) cancelled" if cancelled is not None else ""))


@router.post("/admin/retention")
async def apply_retention(request: Request) -> Response:
    me = signed_in(request)
    require(me, ADMIN_RIGHT, "retention")
    form = await read_form(request, me)
    dry_run = form.get("action") == "dry_run"
    try:
        report = await run_in_threadpool(Retention(runtime_of(request)).apply, dry_run=dry_run)
    except ExchangeError as exc:
        return redirect(request, "/admin", me, problem=f"retention failed: {exc}")
    verb = "would delete" if dry_run else "deleted"
    return redirect(request, "/admin", me, notice=f"retention {verb} {report.by_age} run(s) by age, "
                    f"{report.by_count} beyond the count limit, {report.audit_entries} audit entries")


@router.post("/admin/users")
async def add_user(request: Request) -> Response:
    """Add a user, or give an existing one a new password or another role (the button says which)."""
    me = signed_in(request)
    require(me, ADMIN_RIGHT, "managing users")
    form = await read_form(request, me)
    name = form.get("name", "").strip()
    accounts = accounts_of(request)
    try:
        if form.get("action") == "password":
            await run_in_threadpool(accounts.set_password, name, form.get("password", ""), actor=me.actor)
            return redirect(request, "/admin", me, notice=f"new password set for {name}; their sessions ended")
        if form.get("action") == "role":
            role = form.get("role", "")
            await run_in_threadpool(accounts.set_role, name, role, actor=me.actor)
            return redirect(request, "/admin", me, notice=f"{name} has the role {role} now, in their open sessions too")
        await run_in_threadpool(accounts.add_user, name, form.get("role", ""), form.get("password", ""),
                                actor=me.actor)
    except ExchangeError as exc:
        return redirect(request, "/admin", me, problem=f"{name or 'user'}: {exc}")
    return redirect(request, "/admin", me, notice=f"user {name} added")


@router.post("/admin/users/{name}/remove")
async def remove_user(request: Request, name: str) -> Response:
    me = signed_in(request)
    require(me, ADMIN_RIGHT, "managing users")
    await read_form(request, me)
    if name == me.name:
        return redirect(request, "/admin", me, problem="you cannot remove yourself (another admin can)")
    try:
        await run_in_threadpool(accounts_of(request).remove_user, name, actor=me.actor)
    except ExchangeError as exc:
        return redirect(request, "/admin", me, problem=str(exc))
    return redirect(request, "/admin", me, notice=f"user {name} removed; their sessions ended")
