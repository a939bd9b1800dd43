"""The hot path's statements of the mailbox (messages sent to runs, consumed by their steps) and of
the notices that tell the gateways' watchers about new mail and changed runs.

PostgreSQL: a sent message notifies :data:`MAIL_CHANNEL` with its run id at its commit, and a new
run or a cancel request notifies :data:`RUNS_CHANGED` there; the mail watchers LISTEN to it on a
connection of their own. SQLite has no notifications: a notice is nothing, and a watcher looks at
the count of commits SQLite keeps per file (``PRAGMA data_version``) instead. The methods here say
which; their callers never ask.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from exchange._store import codec
from exchange._store.records import MESSAGE_CONSUMED
from exchange._store.sql.spelling import statement
from exchange._store.sql.typed_sql import Cursor, Params
from exchange._store.tables import mailbox

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from exchange._store.sql.backends import Backend

# PostgreSQL: the channel a sent message is notified on; the gateways' mail watchers LISTEN to it.
MAIL_CHANNEL = "exchange_mailbox"
# The payload (never a run id) that says "a run was created or asked to cancel" on MAIL_CHANNEL.
RUNS_CHANGED = "*runs"


class MailStatements:
    """Messages and notices, spelled for ``backend``; a message's times are ``now()`` (the store's clock)."""

    def __init__(self, backend: Backend, now: Callable[[], float]) -> None:
        self.now = now
        self.returning = backend.returning  # INSERT ... RETURNING id, else cursor.lastrowid
        self.pending_messages = statement(backend, "pending_messages", (
            f"SELECT id, run_id, topic, payload, actor, reason, sent_at FROM {mailbox.name} "
            f"WHERE run_id = :run_id AND topic = :topic AND consumed_at IS NULL ORDER BY id LIMIT :limit"
        ))
        self.highest_message_id = statement(backend, "highest_message_id", f"SELECT max(id) FROM {mailbox.name}")
        self.runs_with_messages_after = statement(backend, "runs_with_messages_after", (
            f"SELECT DISTINCT run_id FROM {mailbox.name} WHERE id > :after_id AND consumed_at IS NULL"
        ))
        self.insert_message = statement(backend, "insert_message", (
            f"INSERT INTO {mailbox.name} (run_id, topic, payload, actor, reason, sent_at) "
            f"VALUES (:run_id, :topic, :payload, :actor, :reason, :sent_at)"
            + (" RETURNING id" if self.returning else "")
        ))
        self.unconsumed = statement(backend, "unconsumed", (
            f"SELECT count(*) FROM {mailbox.name} WHERE id IN (:ids*) AND consumed_at IS NULL"
        ))
        self.mark_consumed = statement(backend, "mark_consumed", (
            f"UPDATE {mailbox.name} SET consumed_seq = :seq, consumed_at = :at, outcome = '{MESSAGE_CONSUMED}' "
            f"WHERE id IN (:ids*) AND consumed_at IS NULL"
        ))
        self.mark_consumed_noted = statement(backend, "mark_consumed_noted", (
            f"UPDATE {mailbox.name} SET consumed_seq = :seq, consumed_at = :at, outcome = :outcome, "
            f"outcome_note = :note WHERE id = :id AND consumed_at IS NULL"
        ))
        # Notices: a sent message wakes the gateways' mail watchers at its commit (payload: the run
        # id; an empty one wakes no run), and a new run or a cancel request tells them to look at
        # their queues (ChangeGate). None where the store has no notifications.
        self.pushes_notices = backend.notifications
        self.notify_mail = (statement(backend, "notify_mail", f"SELECT pg_notify('{MAIL_CHANNEL}', :payload)")
                            if backend.notifications else None)
        self.notify_runs = (statement(backend, "notify_runs", f"SELECT pg_notify('{MAIL_CHANNEL}', '{RUNS_CHANGED}')")
                            if backend.notifications else None)
        # The mail watcher's own connection: LISTEN (PostgreSQL), or the count of commits by any
        # connection that SQLite keeps per file (a look is due only when it changed).
        self.listen_mail = statement(backend, "listen_mail", f"LISTEN {MAIL_CHANNEL}")
        self.data_version = statement(backend, "data_version", "PRAGMA data_version")

    # ----- messages -----------------------------------------------------------------------------
    def add_message(
        self, cur: Cursor, run_id: str, topic: str, payload: Any, actor: str | None, reason: str | None
    ) -> int:
        """Insert a message to ``run_id``; its id."""
        self.insert_message.run(cur, {"run_id": run_id, "topic": topic, "payload": codec.dumps(payload),
                                      "actor": actor, "reason": reason, "sent_at": self.now()})
        if self.returning:
            return int(cur.fetchone()[0])
        return int(cur.lastrowid)  # type: ignore[attr-defined]  # sqlite3's cursor

    def count_unconsumed(self, cur: Cursor, ids: Sequence[int]) -> int:
        """How many of the messages ``ids`` (not empty) no step has consumed yet."""
        return int(self.unconsumed.run(cur, {"ids": list(ids)}).fetchone()[0])

    def consume(
        self, cur: Cursor, ids: Sequence[int], seq: int, notes: Mapping[int, tuple[str, str | None]] | None = None
    ) -> int:
        """Mark messages consumed by step ``seq``; returns how many were still unconsumed.

        ``notes``: per message id, its outcome and note (``(MESSAGE_DROPPED, why)``); a message
        without one is CONSUMED."""
        if not ids:
            return 0
        notes = notes or {}
        at = self.now()
        plain = [i for i in ids if i not in notes]
        done = 0
        if plain:
            done += self.mark_consumed.run(cur, {"seq": seq, "at": at, "ids": plain}).rowcount
        for message_id in ids:  # a note each (drops are rare: a statement per message is cheap)
            if message_id in notes:
                outcome, note = notes[message_id]
                params: Params = {"seq": seq, "at": at, "outcome": outcome, "note": note, "id": message_id}
                done += self.mark_consumed_noted.run(cur, params).rowcount
        return done

    # ----- notices that commit with a unit (PostgreSQL; else nothing) -----------------------------
    def mail_sent(self, cur: Cursor, run_id: str) -> None:
        """At the unit's commit, the gateways' mail watchers learn that ``run_id`` has mail."""
        if self.notify_mail is not None:
            self.notify_mail.run(cur, {"payload": run_id})

    def runs_changed(self, cur: Cursor) -> None:
        """At the unit's commit, the gateways' watchers learn that a run was created or that a
        partition key was freed: they look at their queues again at once."""
        if self.notify_runs is not None:
            self.notify_runs.run(cur, {})

    # ----- notices that commit with a SQLAlchemy Core transaction (PostgreSQL; else nothing) ----
    def announce_runs_changed(self, conn: Connection) -> None:
        """At ``conn``'s commit, the gateways' watchers learn that a run was created, enqueued or
        asked to cancel, or that a setting changed: they look at their queues again at once."""
        if self.notify_runs is not None:
            self.notify_runs.run_in(conn, {})

    def announce_mail(self, conn: Connection, run_id: str) -> None:
        """At ``conn``'s commit, the gateways' mail watchers learn that ``run_id`` has mail."""
        if self.notify_mail is not None:
            self.notify_mail.run_in(conn, {"payload": run_id})
