"""Parameter templates (recipes): ``/api/v1/templates``. The ``edit_templates`` right (engineers)
saves and activates versions; ``read`` reads them; ``start`` (operators) starts runs from the active
version (``POST /api/v1/runs``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from exchange._api.bodies import Body
from exchange._api.identity import needs
from exchange._api.routes_runs import Viewer, runtime_of
from exchange._auth.accounts import Identity
from exchange._auth.roles import EDIT_TEMPLATES
from exchange._engine import NAME_MAX_CHARS, Templates

router = APIRouter(prefix="/api/v1", tags=["templates"])

Editor = Annotated[Identity, Depends(needs(EDIT_TEMPLATES))]


class SaveTemplate(Body):
    name: str = Field(max_length=NAME_MAX_CHARS)
    workflow: str = Field(max_length=200)
    params: dict[str, Any] = Field(default_factory=dict)
    note: str | None = None
    activate: bool = True


class Activate(Body):
    version: int = Field(ge=1)
    reason: str | None = Field(default=None, max_length=2000)


def templates_of(request: Request) -> Templates:
    return Templates(runtime_of(request))


@router.get("/templates")
def list_templates(request: Request, _who: Viewer) -> list[dict[str, Any]]:
    """Each template's active version (or its newest when none is active)."""
    return templates_of(request).all()


@router.get("/templates/{name}")
def template_versions(name: str, request: Request, _who: Viewer) -> list[dict[str, Any]]:
    """Every version of the template, newest first (404 for an unknown name)."""
    return templates_of(request).versions(name)


@router.get("/templates/{name}/history")
def template_history(name: str, request: Request, _who: Viewer) -> list[dict[str, Any]]:
    """Who saved and activated the template's versions, when and why, oldest first."""
    templates = templates_of(request)
    templates.versions(name)  # 404 for an unknown name
    return templates.history(name)


@router.post("/templates", status_code=201)
def save_template(body: SaveTemplate, request: Request, who: Editor) -> dict[str, Any]:
    """Save a new version (checked against the workflow's parameters first); active unless
    ``activate`` is false."""
    version = templates_of(request).save(body.name, body.workflow, body.params, actor=who.actor, note=body.note,
                                         activate=body.activate)
    return {"name": body.name, "version": version}


@router.post("/templates/{name}/activate")
def activate_template(name: str, body: Activate, request: Request, who: Editor) -> dict[str, Any]:
    """Make ``version`` the one operators start from (the others are kept)."""
    templates_of(request).activate(name, body.version, actor=who.actor, reason=body.reason)
    return {"name": name, "version": body.version}
