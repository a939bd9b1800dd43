"""The FastAPI application: routes, error answers, body limit and security headers."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from exchange._api import (
    problems,
    routes_maintenance,
    routes_phases,
    routes_prompts,
    routes_record,
    routes_rerun,
    routes_runs,
    routes_session,
    routes_signatures,
    routes_stream,
    routes_templates,
    routes_units,
)
from exchange._api.console import mount as console
from exchange._api.metrics import Metrics
from exchange._api.middleware import BodyLimit, SecurityHeaders, Utf8Json
from exchange._api.peers import Peers
from exchange._auth.accounts import Accounts
from exchange._config import ApiConfig
from exchange._engine import Runtime

API_VERSION = "1"


def create_app(runtime: Runtime, *, settings: ApiConfig, accounts: Accounts | None = None, tls: bool = False) -> Any:
    """The ASGI application serving ``runtime`` (middleware around the FastAPI app)."""
    app = FastAPI(
        title="Exchange",
        version=API_VERSION,
        description="Durable workflows for plants: runs, operator commands, users. "
                    "Authenticate with `Authorization: Bearer TOKEN` (`exchange tokens create`) "
                    "or the console's session (POST /api/v1/session).",
        docs_url=None,  # the Swagger page loads its script from a CDN: plants are often offline
        redoc_url=None,
    )
    app.state.runtime = runtime
    app.state.accounts = accounts or Accounts(runtime.store.accounts, roles=runtime.roles,
                                              password_min_chars=settings.password_min_chars)
    app.state.peers = Peers(settings.trusted_proxies)
    app.state.settings = settings
    app.state.tls = tls
    metrics = Metrics(runtime)
    problems.install(app)
    app.include_router(routes_session.router)
    app.include_router(routes_runs.router)
    app.include_router(routes_prompts.router)
    app.include_router(routes_phases.router)
    app.include_router(routes_units.router)
    app.include_router(routes_rerun.router)
    app.include_router(routes_record.router)
    app.include_router(routes_signatures.router)
    app.include_router(routes_stream.router)
    app.include_router(routes_templates.router)
    app.include_router(routes_maintenance.router)
    console.install(app)

    @app.get("/healthz", tags=["gateway"])
    def healthz(request: Request) -> dict[str, Any]:
        """No credential needed: ``{"status": "ok"}`` when the gateway can read its store (503 otherwise)."""
        runtime.store.lookup.count_with_prefix("0000")  # one indexed read: the store answers
        return {"status": "ok", "node": runtime.node_id}

    @app.get("/metrics", tags=["gateway"], response_class=Response)
    async def prometheus_metrics() -> Response:
        """Prometheus text format (no credential: counts only, nothing about what a run holds)."""
        return Response(await run_in_threadpool(metrics.render), media_type=CONTENT_TYPE_LATEST)

    return SecurityHeaders(BodyLimit(Utf8Json(app), settings.max_body_bytes), tls=tls)
