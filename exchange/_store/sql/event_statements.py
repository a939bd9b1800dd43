"""The hot path's statements of the event log (a run's audit trail): an event appended in a unit
that holds the run's fence, or self-fenced; the progress history pruned to its length."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from exchange._store import codec
from exchange._store.records import Fence
from exchange._store.sql.spelling import EVENT_COLUMNS, fence_exists, fence_params, statement, values_of
from exchange._store.sql.typed_sql import Bound, Cursor
from exchange._store.tables import events

if TYPE_CHECKING:
    from exchange._store.sql.backends import Backend


class EventStatements:
    """Events, spelled for ``backend``; their times are ``now()`` (the store's clock)."""

    def __init__(self, backend: Backend, now: Callable[[], float]) -> None:
        self.now = now
        self.insert_event = statement(backend, "insert_event", (
            f"INSERT INTO {events.name} ({', '.join(EVENT_COLUMNS)}) VALUES ({values_of(EVENT_COLUMNS)})"
        ))
        self.insert_event_fenced = statement(backend, "insert_event_fenced", (
            f"INSERT INTO {events.name} ({', '.join(EVENT_COLUMNS)}) "
            f"SELECT {values_of(EVENT_COLUMNS)} WHERE {fence_exists(backend)}"
        ), fenced=True)
        self.prune_events = statement(backend, "prune_events", (
            f"DELETE FROM {events.name} WHERE run_id = :run_id AND kind = :kind AND id <= ("
            f"SELECT id FROM {events.name} WHERE run_id = :run_id AND kind = :kind "
            f"ORDER BY id DESC LIMIT 1 OFFSET :keep)"
        ))

    def event_params(
        self, run_id: str, kind: str, payload: Any, actor: str | None, reason: str | None, step_seq: int | None
    ) -> dict[str, object]:
        return {"run_id": run_id, "kind": kind, "at": self.now(), "actor": actor, "reason": reason,
                "step_seq": step_seq, "payload": None if payload is None else codec.dumps(payload)}

    def add_event(
        self, cur: Cursor, run_id: str, kind: str, payload: Any, actor: str | None, reason: str | None,
        step_seq: int | None,
    ) -> None:
        """Append an event inside a unit that already holds the run's fence (or needs none)."""
        self.insert_event.run(cur, self.event_params(run_id, kind, payload, actor, reason, step_seq))

    def fenced_event(
        self, fence: Fence, kind: str, payload: Any, actor: str | None, reason: str | None, step_seq: int | None,
    ) -> Bound:
        """One self-fenced statement appending an event to the run's audit trail."""
        params = self.event_params(fence.run_id, kind, payload, actor, reason, step_seq)
        return self.insert_event_fenced.bind({**params, **fence_params(fence)})

    def prune(self, cur: Cursor, run_id: str, kind: str, keep: int) -> None:
        """Delete the run's events of ``kind`` but the newest ``keep``."""
        self.prune_events.run(cur, {"run_id": run_id, "kind": kind, "keep": keep})
