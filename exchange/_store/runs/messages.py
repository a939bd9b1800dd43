"""Mailbox messages, the event log (audit trail) and the run's key/value events."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from exchange._store import codec
from exchange._store.records import MESSAGE_CONSUMED, EventRecord, Fence, MessageFate, MessageRecord
from exchange._store.runs.mail_feed import MailFeed
from exchange._store.sql import Database
from exchange._store.tables import events, mailbox, run_values

_FATE_COLUMNS = (
    mailbox.c.id, mailbox.c.run_id, mailbox.c.topic, mailbox.c.payload, mailbox.c.sent_at,
    mailbox.c.consumed_seq, mailbox.c.consumed_at, mailbox.c.outcome, mailbox.c.outcome_note,
)


def _event(row: Any) -> EventRecord:
    return EventRecord(row.id, row.run_id, row.kind, row.at, row.actor, row.reason, row.step_seq, row.payload)


class Mailbox:
    def __init__(self, db: Database) -> None:
        self.db = db

    def pending(self, run_id: str, topic: str, limit: int) -> list[MessageRecord]:
        """Unconsumed messages of the run's topic, oldest first (a raw read: it is polled often)."""
        rows = self.db.query(self.db.sql.mail.pending_messages,
                             {"run_id": run_id, "topic": topic, "limit": int(limit)})
        return [MessageRecord(*row) for row in rows]

    def delivery_times(self, topic: str, consumed_after: float, limit: int = 10_000) -> list[tuple[float, float]]:
        """``(sent_at, consumed_at)`` of the ``topic`` messages a workflow received after
        ``consumed_after`` (store clock), oldest first, at most ``limit``: command latency for /metrics."""
        with self.db.read() as conn:
            rows = conn.execute(
                select(mailbox.c.sent_at, mailbox.c.consumed_at)
                .where(mailbox.c.consumed_at > consumed_after, mailbox.c.topic == topic,
                       mailbox.c.outcome == MESSAGE_CONSUMED)
                .order_by(mailbox.c.consumed_at)
                .limit(limit)
            ).all()
        return [(float(sent), float(consumed)) for sent, consumed in rows]

    def highest_id(self) -> int:
        """The id of the newest message (0 when there is none): what a watcher compares."""
        rows = self.db.query(self.db.sql.mail.highest_message_id)
        return int(rows[0][0] or 0)

    def runs_with_messages_after(self, message_id: int) -> list[str]:
        """The runs that got unconsumed messages newer than ``message_id``."""
        rows = self.db.query(self.db.sql.mail.runs_with_messages_after, {"after_id": message_id})
        return [str(row[0]) for row in rows]

    def feed(self) -> MailFeed:
        """A new feed of notices of mail and changed runs, with a connection of its own once opened
        (see :mod:`~exchange._store.runs.mail_feed`): one per watcher, which closes it."""
        return MailFeed(self.db)

    def fate(self, message_id: int) -> MessageFate | None:
        """The message and what became of it (None: no such message)."""
        with self.db.read() as conn:
            row = conn.execute(select(*_FATE_COLUMNS).where(mailbox.c.id == message_id)).first()
        return None if row is None else MessageFate(*row)

    def fates_of_run(self, run_id: str, topics: Sequence[str], limit: int) -> list[MessageFate]:
        """The run's messages of ``topics`` with what became of each, oldest first, at most the
        oldest ``limit`` (the batch record's commands)."""
        query = (select(*_FATE_COLUMNS).where(mailbox.c.run_id == run_id, mailbox.c.topic.in_(list(topics)))
                 .order_by(mailbox.c.id).limit(limit))
        with self.db.read() as conn:
            return [MessageFate(*row) for row in conn.execute(query).all()]

    def waiting_before(self, run_id: str, topic: str, message_id: int | None = None) -> list[MessageRecord]:
        """The run's unconsumed messages of ``topic`` older than ``message_id`` (None: all), oldest first."""
        query = (
            select(mailbox.c.id, mailbox.c.run_id, mailbox.c.topic, mailbox.c.payload, mailbox.c.actor,
                   mailbox.c.reason, mailbox.c.sent_at)
            .where(mailbox.c.run_id == run_id, mailbox.c.topic == topic, mailbox.c.consumed_at.is_(None))
            .order_by(mailbox.c.id)
        )
        if message_id is not None:
            query = query.where(mailbox.c.id < message_id)
        with self.db.read() as conn:
            return [MessageRecord(*row) for row in conn.execute(query).all()]


class EventLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(
        self,
        run_id: str,
        kind: str,
        payload: Any = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
        step_seq: int | None = None,
        conn: Connection | None = None,
    ) -> None:
        """Append an event outside any run execution's ownership (a start, a command, a cancel):
        in ``conn``'s transaction, or in its own."""
        statements = self.db.sql.events  # a link of the run's audit chain (sql.event_statements)
        if conn is not None:
            statements.add_event_in(conn, run_id, kind, payload, actor, reason, step_seq)
            return
        with self.db.transaction(f"an event {kind!r}") as c:
            statements.add_event_in(c, run_id, kind, payload, actor, reason, step_seq)

    def add_fenced(
        self,
        fence: Fence,
        kind: str,
        payload: Any = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
        step_seq: int | None = None,
    ) -> None:
        """Append an event for the execution holding ``fence`` (OwnershipLost if it no longer does):
        one self-fenced statement, its own commit."""
        where = "" if step_seq is None else f" (sequence {step_seq})"
        self.db.unit(self.db.sql.events.fenced_event(fence, kind, payload, actor, reason, step_seq),
                     f"run {fence.run_id}: an event {kind!r}{where}")

    def list(self, run_id: str, kinds: Sequence[str] | None = None, limit: int = 1000) -> list[EventRecord]:
        query = select(events).where(events.c.run_id == run_id).order_by(events.c.id.desc()).limit(limit)
        if kinds:
            query = query.where(events.c.kind.in_(list(kinds)))
        with self.db.read() as conn:
            rows = conn.execute(query).all()
        return [_event(row) for row in reversed(rows)]

    def prune(self, run_id: str, kind: str, keep: int, conn: Connection) -> None:
        """Keep only the newest ``keep`` events of ``kind`` for the run."""
        cutoff = conn.execute(
            select(events.c.id)
            .where(events.c.run_id == run_id, events.c.kind == kind)
            .order_by(events.c.id.desc())
            .offset(keep)
            .limit(1)
        ).scalar()
        if cutoff is not None:
            conn.execute(
                delete(events).where(events.c.run_id == run_id, events.c.kind == kind, events.c.id <= cutoff)
            )

    def at_step(self, run_id: str, step_seq: int, kinds: Sequence[str]) -> builtins.list[EventRecord]:
        """The run's events of ``kinds`` written with step ``step_seq``, oldest first."""
        query = (
            select(events)
            .where(events.c.run_id == run_id, events.c.step_seq == step_seq, events.c.kind.in_(list(kinds)))
            .order_by(events.c.id)
        )
        with self.db.read() as conn:
            return [_event(row) for row in conn.execute(query).all()]

    def first_after(self, run_id: str, kind: str, after_id: int) -> EventRecord | None:
        """The run's oldest event of ``kind`` newer than event ``after_id``."""
        query = (
            select(events)
            .where(events.c.run_id == run_id, events.c.kind == kind, events.c.id > after_id)
            .order_by(events.c.id)
            .limit(1)
        )
        with self.db.read() as conn:
            row = conn.execute(query).first()
        return None if row is None else _event(row)

    def count(self, run_id: str, kind: str) -> int:
        with self.db.read() as conn:
            return int(
                conn.execute(
                    select(func.count()).where(events.c.run_id == run_id, events.c.kind == kind)
                ).scalar_one()
            )


VALUE_EVENT = "value"  # the event kind of a value published with setEvent


class RunValues:
    """``setEvent``/``getEvent``: the latest value per (run, key)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def set(self, fence: Fence, key: str, value_json: str) -> None:
        """Publish the value for the execution holding ``fence`` (OwnershipLost if it no longer does)."""
        now = self.db.clock.now()
        run_id = fence.run_id
        with self.db.transaction(f"the value of {key!r}", fence=fence) as conn:
            done = conn.execute(
                update(run_values)
                .where(run_values.c.run_id == run_id, run_values.c.key == key)
                .values(value=value_json, updated_at=now)
            ).rowcount
            if not done:
                conn.execute(insert(run_values).values(run_id=run_id, key=key, value=value_json, updated_at=now))
            # the history of the key (getEventHistory): one event per value set, a link of the chain
            self.db.sql.events.add_event_in(conn, run_id, VALUE_EVENT,
                                            {"key": key, "value": codec.loads(value_json)}, None, None, None)

    def get(self, run_id: str, key: str) -> str | None:
        with self.db.read() as conn:
            return conn.execute(
                select(run_values.c.value).where(run_values.c.run_id == run_id, run_values.c.key == key)
            ).scalar()
