"""The hot path's statements of the event log (a run's audit trail): an event appended in a unit
that holds the run's fence, or self-fenced; the progress history pruned to its length.

An event is a link of its run's audit chain (:mod:`~exchange._store.sql.chain`): two statements,
the run's head moved on (which locks the run's row where rows lock), then the event copying its
link from it. A fenced event carries the fence in both, so that both or neither write. Where a
statement may modify data in its WITH (PostgreSQL), the two are one statement (see
:mod:`~exchange._store.sql.step_statements`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from exchange._store import codec
from exchange._store.records import Fence
from exchange._store.sql.chain import UNCHAINED_EVENT_KINDS, event_entry, head_moved
from exchange._store.sql.commits import Deferred
from exchange._store.sql.spelling import (
    EVENT_COLUMNS,
    FENCE_WHERE,
    fence_exists,
    fence_params,
    fenced_refusal,
    statement,
    values_of,
)
from exchange._store.sql.typed_sql import Cursor, Statement
from exchange._store.tables import events, runs

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
        move_head = f"UPDATE {runs.name} SET {head_moved(backend.sha256_sql, ':chain_entry')} WHERE "
        self.chain_event = statement(backend, "chain_event", move_head + "id = :run_id")
        self.chain_event_fenced = statement(backend, "chain_event_fenced", move_head + FENCE_WHERE)
        insert_linked = (
            f"INSERT INTO {events.name} ({', '.join(EVENT_COLUMNS)}, chain_seq, chain_prev, chain_hash) "
            f"SELECT {values_of(EVENT_COLUMNS)}, audit_seq, audit_prev, audit_head FROM {runs.name} WHERE ")
        # :chain_run (the run's id again): a parameter in the values and in the condition would be
        # given two types by PostgreSQL
        self.insert_linked_event = statement(backend, "insert_linked_event", insert_linked + "id = :chain_run")
        self.insert_linked_event_fenced = statement(backend, "insert_linked_event_fenced",
                                                    insert_linked + FENCE_WHERE)
        # the statements of a chained event, in order; the last one's row count says whether it was written
        self.linked: tuple[Statement, ...] = (self.chain_event, self.insert_linked_event)
        self.linked_fenced: tuple[Statement, ...] = (self.chain_event_fenced, self.insert_linked_event_fenced)
        if backend.writing_with:  # one statement: the UPDATE returns the link the event copies
            with_link = (f"INSERT INTO {events.name} ({', '.join(EVENT_COLUMNS)}, chain_seq, chain_prev, chain_hash) "
                         f"SELECT {values_of(EVENT_COLUMNS)}, audit_seq, audit_prev, audit_head FROM link")
            returning = " RETURNING audit_seq, audit_prev, audit_head"
            self.linked = (statement(backend, "event_linked", (
                f"WITH link AS ({move_head}id = :chain_run{returning}) {with_link}")),)
            self.linked_fenced = (statement(backend, "event_linked_fenced", (
                f"WITH link AS ({move_head}{FENCE_WHERE}{returning}) {with_link}")),)
        self.prune_events = statement(backend, "prune_events", (
            f"DELETE FROM {events.name} WHERE run_id = :run_id AND kind = :kind AND id <= ("
            f"SELECT id FROM {events.name} WHERE run_id = :run_id AND kind = :kind "
            f"ORDER BY id DESC LIMIT 1 OFFSET :keep)"
        ))

    def event_params(
        self, run_id: str, kind: str, payload: Any, actor: str | None, reason: str | None, step_seq: int | None
    ) -> dict[str, object]:
        """The statement's parameters; ``chain_entry`` among them when the event is a link of the
        run's audit chain (the kinds of ``UNCHAINED_EVENT_KINDS`` are not)."""
        at = self.now()
        text = None if payload is None else codec.dumps(payload)
        params: dict[str, object] = {"run_id": run_id, "kind": kind, "at": at, "actor": actor, "reason": reason,
                                     "step_seq": step_seq, "payload": text}
        if kind not in UNCHAINED_EVENT_KINDS:
            params["chain_entry"] = event_entry(run_id, kind, at, actor, reason, step_seq, text) + "|"
            params["chain_run"] = run_id
        return params

    def add_event(
        self, cur: Cursor, run_id: str, kind: str, payload: Any, actor: str | None, reason: str | None,
        step_seq: int | None,
    ) -> None:
        """Append an event inside a unit that already holds the run's fence (or needs none)."""
        params = self.event_params(run_id, kind, payload, actor, reason, step_seq)
        if "chain_entry" not in params:
            self.insert_event.run(cur, params)
            return
        for linked in self.linked:
            linked.run_some(cur, params)

    def add_event_in(self, conn: Connection, run_id: str, kind: str, payload: Any, actor: str | None,
                     reason: str | None, step_seq: int | None) -> None:
        """:meth:`add_event` in a SQLAlchemy transaction (the writes outside the hot path)."""
        params = self.event_params(run_id, kind, payload, actor, reason, step_seq)
        if "chain_entry" not in params:
            self.insert_event.run_in(conn, params)
            return
        for linked in self.linked:
            linked.run_in(conn, {name: params[name] for name in linked.names})

    def fenced_event(
        self, fence: Fence, kind: str, payload: Any, actor: str | None, reason: str | None, step_seq: int | None,
    ) -> Callable[[Cursor], Deferred[None]]:
        """A unit appending an event to the run's audit trail that carries its fence itself (give
        it to ``Database.unit`` without ``fence=``): OwnershipLost, nothing written, when it no
        longer holds the run."""
        params = {**self.event_params(fence.run_id, kind, payload, actor, reason, step_seq), **fence_params(fence)}
        chained = "chain_entry" in params

        def write(cur: Cursor) -> Deferred[None]:
            if chained:
                for linked in self.linked_fenced:
                    linked.run_some(cur, params)  # the last one's row count says whether the fence held
            else:
                self.insert_event_fenced.run(cur, params)
            return fenced_refusal(fence, cur)

        return write

    def prune(self, cur: Cursor, run_id: str, kind: str, keep: int) -> None:
        """Delete the run's events of ``kind`` but the newest ``keep``."""
        self.prune_events.run(cur, {"run_id": run_id, "kind": kind, "keep": keep})
