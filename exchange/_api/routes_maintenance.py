"""Maintenance mode and retention: ``/api/v1/maintenance`` and ``/api/v1/retention/apply`` (admins
change them; everyone may read the mode)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from exchange._api.bodies import Body
from exchange._api.identity import needs
from exchange._api.routes_runs import Viewer, runtime_of
from exchange._auth.accounts import Identity
from exchange._auth.roles import ADMIN_RIGHT
from exchange._engine import Maintenance, Retention

router = APIRouter(prefix="/api/v1", tags=["maintenance"])

Admin = Annotated[Identity, Depends(needs(ADMIN_RIGHT))]


class SetMaintenance(Body):
    mode: Literal["drain", "cancel", "normal"]
    queue: str | None = Field(default=None, max_length=100)
    reason: str | None = Field(default=None, max_length=500)


class ApplyRetention(Body):
    dry_run: bool = False


def change_maintenance(maintenance: Maintenance, mode: str, *, actor: str, reason: str | None,
                       queue: str | None) -> dict[str, Any]:
    """The one place the API and the console change the mode."""
    if mode == "drain":
        return maintenance.drain(actor=actor, reason=reason)
    if mode == "cancel":
        return maintenance.cancel(actor=actor, reason=reason, queue=queue)
    return maintenance.exit(actor=actor, reason=reason)


@router.get("/maintenance")
def maintenance_status(request: Request, _who: Viewer) -> dict[str, Any]:
    """The mode (normal, drain, cancel), who set it, when and why, and what still runs where."""
    return Maintenance(runtime_of(request)).status()


@router.post("/maintenance")
async def set_maintenance(body: SetMaintenance, request: Request, who: Admin) -> dict[str, Any]:
    """``drain``: no gateway starts anything new; ``cancel``: drain and cancel the queued runs (of
    ``queue``); ``normal``: back to normal. Audited with the caller and the reason."""
    maintenance = Maintenance(runtime_of(request))
    return await run_in_threadpool(change_maintenance, maintenance, body.mode, actor=who.actor, reason=body.reason,
                                   queue=body.queue)


@router.post("/retention/apply")
async def apply_retention(body: ApplyRetention, request: Request, _who: Admin) -> dict[str, Any]:
    """Apply ``[retention]`` now (``dry_run``: count only): ``{by_age, by_count, audit_entries,
    archived, unarchived, seconds, dry_run}``."""
    report = await run_in_threadpool(Retention(runtime_of(request)).apply, dry_run=body.dry_run)
    return report.as_dict()
