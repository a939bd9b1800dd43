"""``exchange_plant_state``: what schedules, triggers and command tags did, shared by every gateway.

Changes are compare-and-set on the edge count (triggers) or the last tick (schedules), so of several
gateways seeing the same edge or tick, exactly one moves the state on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from exchange._store import codec
from exchange._store.sql import Database
from exchange._store.tables import plant_state as t
from exchange.errors import StoreDataError


@dataclass(frozen=True)
class PlantState:
    kind: str
    name: str
    last_value: Any
    edges: int
    last_tick: float | None
    paused: bool


class PlantStateTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, kind: str, name: str) -> PlantState | None:
        with self.db.read() as conn:
            row = conn.execute(select(t).where(t.c.kind == kind, t.c.name == name)).first()
        if row is None:
            return None
        return PlantState(row.kind, row.name, codec.loads(row.last_value), int(row.edges), row.last_tick,
                          bool(row.paused))

    def all(self, kind: str) -> dict[str, PlantState]:
        with self.db.read() as conn:
            rows = conn.execute(select(t).where(t.c.kind == kind)).all()
        return {row.name: PlantState(row.kind, row.name, codec.loads(row.last_value), int(row.edges), row.last_tick,
                                     bool(row.paused)) for row in rows}

    def create(self, kind: str, name: str, *, last_value: Any = None, last_tick: float | None = None) -> bool:
        """The first state of ``name``; False when another gateway created it first."""
        try:
            with self.db.transaction(f"the state of {kind} {name}") as conn:
                conn.execute(insert(t).values(kind=kind, name=name, last_value=codec.dumps(last_value), edges=0,
                                              last_tick=last_tick, paused=0, updated_at=self.db.clock.now()))
        except StoreDataError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                return False
            raise
        return True

    def move(self, kind: str, name: str, *, edges_were: int, last_value: Any, edges: int) -> bool:
        """Set the last value (and edge count) if the edge count is still ``edges_were``."""
        with self.db.transaction(f"the state of {kind} {name}") as conn:
            done = conn.execute(update(t).where(t.c.kind == kind, t.c.name == name, t.c.edges == edges_were)
                                .values(last_value=codec.dumps(last_value), edges=edges,
                                        updated_at=self.db.clock.now())).rowcount
        return bool(done)

    def tick(self, name: str, *, tick_was: float | None, tick: float) -> bool:
        """Advance a schedule's last tick if it is still ``tick_was``."""
        where = t.c.last_tick.is_(None) if tick_was is None else t.c.last_tick == tick_was
        with self.db.transaction(f"the tick of schedule {name}") as conn:
            done = conn.execute(update(t).where(t.c.kind == "schedule", t.c.name == name, where)
                                .values(last_tick=tick, updated_at=self.db.clock.now())).rowcount
        return bool(done)

    def set_paused(self, name: str, paused: bool) -> bool:
        with self.db.transaction(f"pausing schedule {name}") as conn:
            done = conn.execute(update(t).where(t.c.kind == "schedule", t.c.name == name)
                                .values(paused=1 if paused else 0, updated_at=self.db.clock.now())).rowcount
        return bool(done)
