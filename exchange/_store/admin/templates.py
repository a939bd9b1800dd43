"""Parameter templates' rows: versions are appended, never changed; activating one deactivates the
name's others in the same transaction. Each save and activation writes its audit entry
(``exchange_audit``) in that transaction too."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from exchange._store.admin.audit import done_entry
from exchange._store.sql import Database
from exchange._store.tables import audit_log
from exchange._store.tables import param_templates as t
from exchange.errors import StoreDataError

logger = logging.getLogger(__name__)

_SAVE_ATTEMPTS = 20  # each round of a race lets at least one save through
SAVED = "template_save"  # audit actions
ACTIVATED = "template_activate"


@dataclass(frozen=True)
class TemplateRow:
    name: str
    version: int
    workflow: str
    params_json: str
    active: bool
    note: str | None
    created_by: str
    created_at: float


def _row(row: Any) -> TemplateRow:
    return TemplateRow(name=row[0], version=int(row[1]), workflow=row[2], params_json=row[3], active=bool(row[4]),
                       note=row[5], created_by=row[6], created_at=float(row[7]))


class TemplateTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add_version(self, name: str, workflow: str, params_json: str, *, note: str | None, actor: str,
                    activate: bool) -> int:
        """Append the next version of ``name`` (1 for a new name); returns its number. Engineers
        saving one name at once each get their own version: a save that meets another on the
        (name, version) key is tried again with the next number."""
        for attempt in range(_SAVE_ATTEMPTS):
            try:
                return self._add_version(name, workflow, params_json, note=note, actor=actor, activate=activate)
            except StoreDataError as exc:
                if not isinstance(exc.__cause__, IntegrityError) or attempt == _SAVE_ATTEMPTS - 1:
                    raise
                logger.info("template %s: version taken by a concurrent save, trying again", name)
        raise AssertionError("unreachable")

    def _add_version(self, name: str, workflow: str, params_json: str, *, note: str | None, actor: str,
                     activate: bool) -> int:
        with self.db.transaction(f"save template {name}") as conn:
            taken = conn.execute(select(t.c.version).where(t.c.name == name)).scalars().all()
            version = max(taken, default=0) + 1
            if activate:
                conn.execute(update(t).where(t.c.name == name).values(active=0))
            now = self.db.clock.now()
            conn.execute(insert(t).values(name=name, version=version, workflow=workflow, params=params_json,
                                          active=1 if activate else 0, note=note, created_by=actor, created_at=now))
            conn.execute(insert(audit_log).values(**done_entry(
                now, SAVED, name, actor=actor, reason=note,
                details={"version": version, "workflow": workflow, "activated": activate})))
        return version

    def activate(self, name: str, version: int, *, actor: str, reason: str | None = None) -> bool:
        """Make ``version`` the active one of ``name``; False when there is no such version."""
        with self.db.transaction(f"activate template {name} v{version}") as conn:
            found = conn.execute(select(t.c.version).where(t.c.name == name, t.c.version == version)).first()
            if found is None:
                return False
            conn.execute(update(t).where(t.c.name == name).values(active=0))
            conn.execute(update(t).where(t.c.name == name, t.c.version == version).values(active=1))
            conn.execute(insert(audit_log).values(**done_entry(
                self.db.clock.now(), ACTIVATED, name, actor=actor, reason=reason, details={"version": version})))
        return True

    def versions(self, name: str) -> list[TemplateRow]:
        """Every version of ``name``, newest first."""
        with self.db.read() as conn:
            rows = conn.execute(select(t).where(t.c.name == name).order_by(t.c.version.desc())).all()
        return [_row(r) for r in rows]

    def latest(self) -> list[TemplateRow]:
        """Per name: its active version, or its newest when none is active; by name."""
        with self.db.read() as conn:
            rows = conn.execute(select(t).order_by(t.c.name, t.c.active.desc(), t.c.version.desc())).all()
        seen: dict[str, TemplateRow] = {}
        for row in rows:
            seen.setdefault(row[0], _row(row))
        return list(seen.values())

    def active(self, name: str) -> TemplateRow | None:
        with self.db.read() as conn:
            row = conn.execute(select(t).where(t.c.name == name, t.c.active == 1)).first()
        return None if row is None else _row(row)
