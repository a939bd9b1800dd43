"""Parameter templates (recipes): named, versioned parameter sets of a workflow that operators start
runs from. Saving appends a version (checked against the workflow's signature first); one version
per name is active; older versions are kept, never changed, so a run names exactly what it used."""

from __future__ import annotations

from typing import Any

from exchange._arguments import text as checked_text
from exchange._engine.operator.runtime import Runtime
from exchange._store import ACTIVATED, SAVED, TemplateRow, codec
from exchange.errors import InvalidParams, UnknownTemplate

NAME_MAX_CHARS = 100
NOTE_MAX_CHARS = 2000
TEMPLATE_EVENT = "template"  # the run's audit trail: which template and version it started from


def view(row: TemplateRow) -> dict[str, Any]:
    from exchange._timefmt import iso_utc

    return {"name": row.name, "version": row.version, "workflow": row.workflow, "params": codec.loads(row.params_json),
            "active": row.active, "note": row.note, "created_by": row.created_by,
            "created_at": iso_utc(row.created_at)}


class Templates:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.table = runtime.store.templates

    def save(self, name: str, workflow: str, params: dict[str, Any], *, actor: str, note: str | None = None,
             activate: bool = True) -> int:
        """Append a version of template ``name``; returns its number. UnknownWorkflow, InvalidParams
        (the parameters do not fit the workflow), InvalidArgument (name, note); nothing stored then."""
        name = checked_text("save template", "name", name, max_chars=NAME_MAX_CHARS)
        if note is not None:
            note = checked_text("save template", "note", note, max_chars=NOTE_MAX_CHARS, empty=True)
        definition, _, params_json = self.runtime.checked_params(workflow, params)
        return self.table.add_version(name, definition.name, params_json, note=note, actor=actor,
                                      activate=activate)

    def activate(self, name: str, version: int, *, actor: str, reason: str | None = None) -> None:
        """Make ``version`` the one operators start from; UnknownTemplate when there is no such version."""
        if not self.table.activate(name, version, actor=actor, reason=reason):
            raise UnknownTemplate(f"template {name!r} has no version {version}")

    def history(self, name: str, limit: int = 50) -> list[dict[str, Any]]:
        """Who saved and activated ``name``'s versions, when, and why; oldest first."""
        from exchange._timefmt import iso_utc

        entries = [e for action in (SAVED, ACTIVATED)
                   for e in self.runtime.store.audit.entries(action=action, target=name, limit=limit)]
        entries.sort(key=lambda e: e.id)
        return [{"at": iso_utc(e.at), "actor": e.actor, "action": e.action.removeprefix("template_"),
                 "reason": e.reason, "details": e.details} for e in entries[-limit:]]

    def all(self) -> list[dict[str, Any]]:
        """Per name, the active version (or the newest when none is active)."""
        return [view(row) for row in self.table.latest()]

    def versions(self, name: str) -> list[dict[str, Any]]:
        rows = self.table.versions(name)
        if not rows:
            raise UnknownTemplate(f"no parameter template named {name!r}")
        return [view(row) for row in rows]

    def start(self, name: str, *, actor: str, **options: Any) -> str:
        """Start a run from the active version of ``name`` (the options as ``start`` takes them);
        the run's audit trail names the template and version. UnknownTemplate when none is active;
        InvalidParams naming the template, its version and the parameter when the version no
        longer fits the workflow (saved before its parameters changed): nothing is started then."""
        row = self.table.active(name)
        if row is None:
            raise UnknownTemplate(f"no active parameter template named {name!r}")
        params = codec.loads(row.params_json)
        if not isinstance(params, dict):
            raise InvalidParams(f"template {name!r} v{row.version} holds no parameter object")
        try:
            self.runtime.checked_params(row.workflow, params)
        except InvalidParams as exc:
            raise InvalidParams(f"template {name!r} v{row.version} does not fit its workflow now: {exc}") from None
        run_id = self.runtime.start(row.workflow, params, actor=actor, **options)
        self.runtime.store.events.add(run_id, TEMPLATE_EVENT, {"name": row.name, "version": row.version},
                                      actor=actor)
        return run_id
