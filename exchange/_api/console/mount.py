"""Put the console on the API's application: its routes, its static files and its two answers
(sign in first; not for you)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from exchange._api.console import (
    routes_actions,
    routes_admin,
    routes_pages,
    routes_prompts,
    routes_record,
    routes_review,
    routes_start,
)
from exchange._api.console.pages import STATIC_DIR, PageRefused, SignInNeeded, render
from exchange._api.identity import SESSION_COOKIE, accounts_of


def install(app: FastAPI) -> None:
    """Serve the console at ``/`` (pages), ``/static`` (its CSS and script) on ``app``."""
    for module in (routes_pages, routes_actions, routes_prompts, routes_record, routes_review, routes_start,
                   routes_admin):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.exception_handler(SignInNeeded)
    async def sign_in_first(_request: Request, exc: SignInNeeded) -> Response:
        return RedirectResponse(f"/signin?next={quote(exc.back_to, safe='')}", status_code=303)

    @app.exception_handler(PageRefused)
    async def refused(request: Request, exc: PageRefused) -> Response:
        session = request.cookies.get(SESSION_COOKIE)
        me: Any = accounts_of(request).session_identity(session) if session else None
        return render(request, "error.html", me, exc.status, message=exc.message)
