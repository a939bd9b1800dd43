"""The queues page (counts by queue and status) and the admin page (users; admins only)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from exchange._api.console.pages import read_form, redirect, render, require, signed_in
from exchange._api.identity import accounts_of
from exchange._api.routes_runs import runtime_of
from exchange._auth.roles import ADMIN, ROLES
from exchange.errors import ExchangeError
from exchange.workflows._engine.overview import queue_counts
from exchange.workflows._store.records import ALL_STATUSES

router = APIRouter(include_in_schema=False)


@router.get("/queues", response_class=HTMLResponse)
def queues_page(request: Request) -> HTMLResponse:
    me = signed_in(request)
    return render(request, "queues.html", me, queues=queue_counts(runtime_of(request)), statuses=ALL_STATUSES)


@router.get("/admin", response_class=HTMLResponse)
def admin_page(request: Request) -> HTMLResponse:
    me = signed_in(request)
    require(me, ADMIN, "the admin page")
    accounts = accounts_of(request)
    return render(request, "admin.html", me, users=accounts.list_users(), tokens=accounts.list_tokens(), roles=ROLES)


@router.post("/admin/users")
async def add_user(request: Request) -> Response:
    """Add a user, or give an existing one a new password (the form says which)."""
    me = signed_in(request)
    require(me, ADMIN, "managing users")
    form = await read_form(request, me)
    name = form.get("name", "").strip()
    accounts = accounts_of(request)
    try:
        if form.get("action") == "password":
            await run_in_threadpool(accounts.set_password, name, form.get("password", ""), actor=me.actor)
            return redirect("/admin", notice=f"new password set for {name}; their sessions ended")
        await run_in_threadpool(accounts.add_user, name, form.get("role", ""), form.get("password", ""),
                                actor=me.actor)
    except ExchangeError as exc:
        return redirect("/admin", problem=f"{name or 'user'}: {exc}")
    return redirect("/admin", notice=f"user {name} added")


@router.post("/admin/users/{name}/remove")
async def remove_user(request: Request, name: str) -> Response:
    me = signed_in(request)
    require(me, ADMIN, "managing users")
    await read_form(request, me)
    if name == me.name:
        return redirect("/admin", problem="you cannot remove yourself (another admin can)")
    try:
        await run_in_threadpool(accounts_of(request).remove_user, name, actor=me.actor)
    except ExchangeError as exc:
        return redirect("/admin", problem=str(exc))
    return redirect("/admin", notice=f"user {name} removed; their sessions ended")
