"""The hot path's statements (step records, starts, claims, commands, leases), typed and named.

They run once per step, per start or per command, where SQLAlchemy's statement machinery costs more
than the statement itself: each is a :class:`~exchange._store.sql.typed_sql.Statement` written once here
against the table definitions of :mod:`exchange._store.tables.schema`, with named parameters, spelled for
the store's driver, and run on a :class:`~exchange._store.sql.typed_sql.Cursor` inside a group-commit
unit (:meth:`exchange._store.sql.database.Database.unit`). Every other statement of the store is
SQLAlchemy Core (see docs/architecture.md, "which write path when"); the store suite runs both on
SQLite and PostgreSQL alike.

The statements an execution of a run makes carry its fence (``fence_run``, ``fence_owner``,
``fence_generation``; see :class:`~exchange._store.records.Fence`) in the statement itself, so each
stays one round trip: ``INSERT ... SELECT ... WHERE EXISTS (SELECT 1 FROM runs WHERE <fence> FOR
SHARE)`` writes a row only while the fence holds, and its row count says whether it did. On
PostgreSQL ``FOR SHARE`` makes a takeover of the run (an UPDATE of its row) wait for this
statement's commit, or this statement wait for the takeover's and then find the fence gone; on
SQLite the one writer at a time gives the same order. (Not a ``WITH fence AS (...)`` form: Python's
sqlite3 reports no row count for a statement that starts with WITH.)
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from exchange._store import codec
from exchange._store.records import (
    ACTIVE_STATUSES,
    ENQUEUED,
    FINAL_STATUSES,
    MESSAGE_CONSUMED,
    RUNNING,
    Fence,
    RunRecord,
    StepRecord,
)
from exchange._store.sql.typed_sql import Bound, Cursor, Params, Statement
from exchange._store.tables.schema import control, events, mailbox, owners, runs, steps

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from exchange._store.sql.backends import Backend

STEP_COLUMNS = (
    "run_id", "seq", "name", "status", "attempts", "output", "error_type", "error_message", "error_blob",
    "skipped_ops", "next_attempt_at", "started_at", "finished_at", "side_effect",
)
_STEP_UPDATED = STEP_COLUMNS[2:]
# The columns a new run is inserted with (its lease's expiry apart: NULL, or set by the store's clock).
NEW_RUN_COLUMNS = (
    "id", "workflow", "status", "params", "queue", "partition_key", "priority", "dedup_id",
    "timeout_seconds", "code_version", "owner", "owner_node", "lease_generation", "cancel_requested",
    "created_by", "created_at", "updated_at", "executions", "parent_run_id",
)
EVENT_COLUMNS = ("run_id", "kind", "at", "actor", "reason", "step_seq", "payload")
_RUN_COLUMNS = frozenset(runs.c.keys())
# PostgreSQL: the channel a sent message is notified on; the gateways' mail watchers LISTEN to it.
MAIL_CHANNEL = "exchange_mailbox"
# The payload (never a run id) that says "a run was created or asked to cancel" on MAIL_CHANNEL.
RUNS_CHANGED = "*runs"
FENCE_WHERE = "id = :fence_run AND owner = :fence_owner AND lease_generation = :fence_generation"


def fence_params(fence: Fence) -> dict[str, object]:
    """The parameters a fenced statement names its fence with."""
    return {"fence_run": fence.run_id, "fence_owner": fence.owner, "fence_generation": fence.generation}


def _values(columns: Sequence[str]) -> str:
    return ", ".join(f":{c}" for c in columns)


def _quoted(statuses: Sequence[str]) -> str:
    return ", ".join(f"'{status}'" for status in statuses)


class Statements:
    """The statements, spelled once for the store's driver (``backend.paramstyle``)."""

    def __init__(self, backend: Backend) -> None:
        style = backend.paramstyle
        self.style = style

        def statement(name: str, template: str, *, fenced: bool = False) -> Statement:
            return Statement(name, template, style, fenced=fenced)

        # Timestamps written by these statements: the store's clock once the database sets it.
        self.now: Callable[[], float] = time.time
        self.returning = backend.returning  # INSERT ... RETURNING id, else cursor.lastrowid
        self.writing_with = backend.writing_with
        now = backend.now_sql
        # Where rows lock, a fenced write keeps the run's row from changing owner until its commit;
        # SQLite's single writer gives the same for free.
        share = " FOR SHARE" if backend.row_locks else ""
        fence_exists = f"EXISTS (SELECT 1 FROM {runs.name} WHERE {FENCE_WHERE}{share})"
        # Opening a multi-statement fenced transaction: the run row stays locked until the commit.
        self.lock_fence = statement("lock_fence", f"SELECT 1 FROM {runs.name} WHERE {FENCE_WHERE}" + (
            " FOR NO KEY UPDATE" if backend.row_locks else ""))
        self.run_names = tuple(runs.c.keys())
        # A returned run row's values in RunRecord's field order (the table may hold more columns).
        self._run_record_values = operator.itemgetter(
            *(self.run_names.index(field.name) for field in dataclasses.fields(RunRecord)))
        returning_run = f"RETURNING {', '.join(self.run_names)}"
        actives = _quoted(ACTIVE_STATUSES)

        # ----- the start and the end of an execution (Store.start_execution, Store.finish_run)
        # RUNNING, counted; the first execution sets the start time and the deadline (so does the
        # first after a retry, which clears the deadline: a retried run gets its timeout afresh);
        # the lease runs from the store's clock.
        starting = (
            f"status = '{RUNNING}', updated_at = :now, executions = executions + 1, "
            f"started_at = COALESCE(started_at, :now), "
            f"deadline_at = CASE WHEN deadline_at IS NULL AND timeout_seconds IS NOT NULL "
            f"THEN :now + timeout_seconds ELSE deadline_at END, lease_expires_at = {now} + :lease_seconds"
        )
        start_update = (f"UPDATE {runs.name} SET {starting} WHERE {FENCE_WHERE} AND status IN ({actives}) "
                        f"{returning_run}")
        self.start_update = statement("start_update", start_update)
        finish_run = (
            f"UPDATE {runs.name} SET status = :status, result = :result, error_type = :error_type, "
            f"error_message = :error_message, finished_at = :now, updated_at = :now, lease_expires_at = NULL "
            f"WHERE {FENCE_WHERE} AND status NOT IN ({_quoted(FINAL_STATUSES)})"
        )
        self.finish_run = statement("finish_run", finish_run)
        # PostgreSQL: each with its status event as one statement, so a pipelined batch never waits
        # inside it (data-modifying WITH; SQLite has none: the event follows in a second statement).
        def started_and_logged(started: str) -> str:
            """The rows a data-modifying WITH named ``started`` returned, each with its RUNNING status
            event (the payload RunTable._claim and Store.start_execution write on SQLite)."""
            return (f"logged AS (INSERT INTO {events.name} (run_id, kind, at, actor, payload) "
                    f"SELECT id, 'status', :now, owner, json_build_object('status', status, 'execution', "
                    f"executions, 'owner', owner)::text FROM {started}) "
                    f"SELECT {', '.join(self.run_names)} FROM {started}")

        self.start_execution_logged = statement("start_execution_logged", (
            f"WITH started AS ({start_update}), {started_and_logged('started')}"
        ))
        self.finish_run_logged = statement("finish_run_logged", (
            f"WITH finished AS ({finish_run} RETURNING id, owner) "
            f"INSERT INTO {events.name} (run_id, kind, at, actor, payload) "
            f"SELECT id, 'status', :now, owner, :payload FROM finished"
        ))

        # ----- a claim (RunTable.claim): the maintenance setting, the candidates, then the runs
        # taken and their first execution started in one UPDATE that returns their rows.
        self.control_value = statement("control_value", f"SELECT value FROM {control.name} WHERE key = :key")
        busy_keys = (f"SELECT partition_key FROM {runs.name} WHERE status IN ({actives}) "
                     f"AND partition_key IS NOT NULL")
        claimable = (f"FROM {runs.name} WHERE status = '{ENQUEUED}' "
                     f"AND (partition_key IS NULL OR partition_key NOT IN ({busy_keys}))")
        candidates = (f"SELECT id, partition_key {claimable}{{queues}} "
                      f"ORDER BY priority DESC, created_at, id LIMIT :limit")
        if backend.row_locks:
            candidates += f" FOR UPDATE OF {runs.name} SKIP LOCKED"
        in_queues = " AND queue IN (:queues*)"
        self.claim_candidates = statement("claim_candidates", candidates.format(queues=""))
        self.claim_candidates_in = statement("claim_candidates_in", candidates.format(queues=in_queues))
        self.count_claimable = statement("count_claimable", f"SELECT count(*) {claimable}")
        self.count_claimable_in = statement("count_claimable_in", f"SELECT count(*) {claimable}{in_queues}")
        # A run of a partition key is taken only while no run of its key is queued ahead of it in its
        # queue, in the claim's order: the candidates' scan skips rows another claim has locked (SKIP
        # LOCKED), and a key's next run must not start ahead of its first that way. (Across queues
        # the order is the claim's, as before: a gateway serves the queues it names.) Checked here,
        # for the few runs taken, not in the scan, where it cost a lookup per queued keyed run.
        queued_ahead = (
            f"SELECT 1 FROM {runs.name} ahead WHERE ahead.partition_key = {runs.name}.partition_key "
            f"AND ahead.queue = {runs.name}.queue AND ahead.status = '{ENQUEUED}' "
            f"AND (ahead.priority > {runs.name}.priority "
            f"OR (ahead.priority = {runs.name}.priority AND (ahead.created_at < {runs.name}.created_at "
            f"OR (ahead.created_at = {runs.name}.created_at AND ahead.id < {runs.name}.id))))")
        self.take_enqueued = statement("take_enqueued", (
            f"UPDATE {runs.name} SET owner = :owner, owner_node = :node, lease_generation = lease_generation + 1, "
            f"{starting} WHERE id IN (:ids*) AND status = '{ENQUEUED}' "
            f"AND (partition_key IS NULL OR NOT EXISTS ({queued_ahead})) {returning_run}"
        ))

        # PostgreSQL: a start's claim for one free worker (RunTable.claim_one_on) as one statement, so
        # the start's pipelined unit never waits inside it: what _claim does with limit 1 (the
        # maintenance setting, the first candidate, left when it has a partition key), read after
        # the commit. The maintenance value is JSON written by the store (codec): an object.
        if backend.writing_with:
            first = candidates.replace(":limit", "1")
            draining = (f"EXISTS (SELECT 1 FROM {control.name} WHERE key = :maintenance "
                        f"AND (value::json ->> 'mode') IN (:draining_modes*))")
            claim_one = (
                f"WITH candidate AS ({first}), "
                f"taken AS (UPDATE {runs.name} SET owner = :owner, owner_node = :node, "
                f"lease_generation = lease_generation + 1, {starting} FROM candidate "
                f"WHERE {runs.name}.id = candidate.id AND candidate.partition_key IS NULL "
                f"AND {runs.name}.status = '{ENQUEUED}' AND NOT {draining} "
                f"RETURNING {', '.join(f'{runs.name}.{name}' for name in self.run_names)}), "
                f"{started_and_logged('taken')}"
            )
            self.claim_one_logged: Statement | None = statement("claim_one_logged", claim_one.format(queues=""))
            self.claim_one_logged_in: Statement | None = statement("claim_one_logged_in",
                                                                   claim_one.format(queues=in_queues))
        else:
            self.claim_one_logged = self.claim_one_logged_in = None

        # ----- a new run (Store.create_run): ENQUEUED, or PENDING and held with a lease from this write.
        new_run = (f"INSERT INTO {runs.name} ({', '.join(NEW_RUN_COLUMNS)}, lease_expires_at) "
                   f"VALUES ({_values(NEW_RUN_COLUMNS)}")
        self.insert_run = statement("insert_run", f"{new_run}, NULL)")
        self.insert_held_run = statement("insert_held_run", f"{new_run}, {now} + :lease_seconds)")

        # ----- step records
        self.insert_step = statement(
            "insert_step", f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}) VALUES ({_values(STEP_COLUMNS)})")
        self.insert_step_fenced = statement("insert_step_fenced", (
            f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}) "
            f"SELECT {_values(STEP_COLUMNS)} WHERE {fence_exists}"
        ), fenced=True)
        update_step = (f"UPDATE {steps.name} SET {', '.join(f'{c} = :{c}' for c in _STEP_UPDATED)} "
                       f"WHERE run_id = :run_id AND seq = :seq")
        self.update_step = statement("update_step", update_step)
        self.update_step_fenced = statement("update_step_fenced", f"{update_step} AND {fence_exists}", fenced=True)

        # ----- mailbox and events
        self.run_status = statement("run_status", f"SELECT status FROM {runs.name} WHERE id = :run_id")
        self.pending_messages = statement("pending_messages", (
            f"SELECT id, run_id, topic, payload, actor, reason, sent_at FROM {mailbox.name} "
            f"WHERE run_id = :run_id AND topic = :topic AND consumed_at IS NULL ORDER BY id LIMIT :limit"
        ))
        self.highest_message_id = statement("highest_message_id", f"SELECT max(id) FROM {mailbox.name}")
        self.runs_with_messages_after = statement("runs_with_messages_after", (
            f"SELECT DISTINCT run_id FROM {mailbox.name} WHERE id > :after_id AND consumed_at IS NULL"
        ))
        # PostgreSQL: a sent message wakes the gateways' mail watchers at its commit (payload: the
        # run id; an empty one wakes no run), and a new run or a cancel request tells them to look
        # at their queues (ChangeGate). None where the store has no notifications.
        self.notify_mail = (statement("notify_mail", f"SELECT pg_notify('{MAIL_CHANNEL}', :payload)")
                            if backend.notifications else None)
        self.notify_runs = (statement("notify_runs", f"SELECT pg_notify('{MAIL_CHANNEL}', '{RUNS_CHANGED}')")
                            if backend.notifications else None)
        self.insert_message = statement("insert_message", (
            f"INSERT INTO {mailbox.name} (run_id, topic, payload, actor, reason, sent_at) "
            f"VALUES (:run_id, :topic, :payload, :actor, :reason, :sent_at)"
            + (" RETURNING id" if self.returning else "")
        ))
        self.insert_event = statement("insert_event", (
            f"INSERT INTO {events.name} ({', '.join(EVENT_COLUMNS)}) VALUES ({_values(EVENT_COLUMNS)})"
        ))
        self.insert_event_fenced = statement("insert_event_fenced", (
            f"INSERT INTO {events.name} ({', '.join(EVENT_COLUMNS)}) "
            f"SELECT {_values(EVENT_COLUMNS)} WHERE {fence_exists}"
        ), fenced=True)
        self.unconsumed = statement("unconsumed", (
            f"SELECT count(*) FROM {mailbox.name} WHERE id IN (:ids*) AND consumed_at IS NULL"
        ))
        self.mark_consumed = statement("mark_consumed", (
            f"UPDATE {mailbox.name} SET consumed_seq = :seq, consumed_at = :at, outcome = '{MESSAGE_CONSUMED}' "
            f"WHERE id IN (:ids*) AND consumed_at IS NULL"
        ))
        self.mark_consumed_noted = statement("mark_consumed_noted", (
            f"UPDATE {mailbox.name} SET consumed_seq = :seq, consumed_at = :at, outcome = :outcome, "
            f"outcome_note = :note WHERE id = :id AND consumed_at IS NULL"
        ))
        self.prune_events = statement("prune_events", (
            f"DELETE FROM {events.name} WHERE run_id = :run_id AND kind = :kind AND id <= ("
            f"SELECT id FROM {events.name} WHERE run_id = :run_id AND kind = :kind "
            f"ORDER BY id DESC LIMIT 1 OFFSET :keep)"
        ))

        # ----- lease renewal: the owner's row, then the runs it holds (see RunTable.heartbeat).
        self.renew_owner = statement(
            "renew_owner", f"UPDATE {owners.name} SET lease_expires_at = {now} + :lease_seconds WHERE owner = :owner")
        self.owned_runs = statement("owned_runs", (
            f"SELECT r.id, r.lease_generation FROM {runs.name} r JOIN {owners.name} o ON o.owner = r.owner "
            f"WHERE r.owner = :owner AND r.status IN ({actives})"
        ))
        self.register_owner = statement("register_owner", (
            f"INSERT INTO {owners.name} (owner, lease_expires_at) VALUES (:owner, {now} + :lease_seconds) "
            f"ON CONFLICT (owner) DO UPDATE SET lease_expires_at = excluded.lease_expires_at"
        ))
        skip = " FOR UPDATE SKIP LOCKED" if backend.row_locks else ""
        self.prune_owners = statement("prune_owners", (
            f"DELETE FROM {owners.name} WHERE owner IN (SELECT o.owner FROM {owners.name} o "
            f"WHERE o.lease_expires_at < {now} - :kept_seconds AND NOT EXISTS (SELECT 1 FROM {runs.name} r "
            f"WHERE r.owner = o.owner AND r.status IN ({actives})){skip})"
        ))
        self.store_now = statement("store_now", f"SELECT {now}")
        # The mail watcher's own connection: LISTEN (PostgreSQL), or the count of commits by any
        # connection that SQLite keeps per file (a look is due only when it changed).
        self.listen_mail = statement("listen_mail", f"LISTEN {MAIL_CHANNEL}")
        self.data_version = statement("data_version", "PRAGMA data_version")

    # ----- statements spelled per set of columns ----------------------------------------------
    def run_update(self, columns: tuple[str, ...], *, fenced: bool) -> Statement:
        """UPDATE of the run's own row setting ``columns`` (the table's own only), by ``run_id`` or,
        ``fenced``, by the fence alone."""
        return _run_update(self.style, columns, fenced)

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

    # ----- pieces of units ----------------------------------------------------------------------
    @staticmethod
    def step_params(run_id: str, rec: StepRecord) -> dict[str, object]:
        return {
            "run_id": run_id, "seq": rec.seq, "name": rec.name, "status": rec.status, "attempts": rec.attempts,
            "output": rec.output, "error_type": rec.error_type, "error_message": rec.error_message,
            "error_blob": rec.error_blob, "skipped_ops": rec.skipped_ops, "next_attempt_at": rec.next_attempt_at,
            "started_at": rec.started_at, "finished_at": rec.finished_at,
            "side_effect": 1 if rec.side_effect else None,
        }

    def record_step(self, cur: Cursor, run_id: str, rec: StepRecord, *, replace: bool) -> None:
        """Insert (or, with ``replace``, update) a step row inside a unit that already holds the
        run's fence."""
        (self.update_step if replace else self.insert_step).run(cur, self.step_params(run_id, rec))

    def fenced_step(self, fence: Fence, rec: StepRecord, *, replace: bool) -> Bound:
        """One self-fenced statement recording ``rec`` (insert, or update of a RETRYING row)."""
        statement = self.update_step_fenced if replace else self.insert_step_fenced
        params = self.step_params(fence.run_id, rec)
        params.update(fence_params(fence))  # in place: no third dict to merge the two into
        return statement.bind(params)

    def event_params(
        self, run_id: str, kind: str, payload: Any, actor: str | None, reason: str | None, step_seq: int | None
    ) -> dict[str, object]:
        return {"run_id": run_id, "kind": kind, "at": self.now(), "actor": actor, "reason": reason,
                "step_seq": step_seq, "payload": None if payload is None else codec.dumps(payload)}

    def add_event(
        self, cur: Cursor, run_id: str, kind: str, payload: Any, actor: str | None, reason: str | None,
        step_seq: int | None,
    ) -> None:
        self.insert_event.run(cur, self.event_params(run_id, kind, payload, actor, reason, step_seq))

    def fenced_event(
        self, fence: Fence, kind: str, payload: Any, actor: str | None, reason: str | None, step_seq: int | None,
    ) -> Bound:
        """One self-fenced statement appending an event to the run's audit trail."""
        params = self.event_params(fence.run_id, kind, payload, actor, reason, step_seq)
        return self.insert_event_fenced.bind({**params, **fence_params(fence)})

    def fenced_run_update(self, fence: Fence, fields: Mapping[str, Any]) -> Bound:
        """One self-fenced UPDATE of the run's own row."""
        return self.run_update(tuple(fields), fenced=True).bind({**fields, **fence_params(fence)})

    def update_run(self, cur: Cursor, run_id: str, fields: Mapping[str, Any]) -> None:
        self.run_update(tuple(fields), fenced=False).run(cur, {**fields, "run_id": run_id})

    def started_record(self, row: Sequence[Any] | None) -> RunRecord | None:
        """The record of a row returned by ``start_update`` (None: no row, the fence did not hold)."""
        return None if row is None else RunRecord(*self._run_record_values(row))

    def status_of(self, cur: Cursor, run_id: str) -> str | None:
        row = self.run_status.run(cur, {"run_id": run_id}).fetchone()
        return None if row is None else str(row[0])

    def add_message(
        self, cur: Cursor, run_id: str, topic: str, payload: Any, actor: str | None, reason: str | None
    ) -> int:
        self.insert_message.run(cur, {"run_id": run_id, "topic": topic, "payload": codec.dumps(payload),
                                      "actor": actor, "reason": reason, "sent_at": self.now()})
        if self.returning:
            return int(cur.fetchone()[0])
        return int(cur.lastrowid)  # type: ignore[attr-defined]  # sqlite3's cursor

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


@lru_cache(maxsize=256)
def _run_update(style: Any, columns: tuple[str, ...], fenced: bool) -> Statement:
    unknown = set(columns) - _RUN_COLUMNS
    if unknown:  # column names are spelled into the statement: only the table's own are allowed
        raise ValueError(f"not columns of {runs.name}: {', '.join(sorted(unknown))}")
    where = FENCE_WHERE if fenced else "id = :run_id"
    return Statement(f"update_run({', '.join(columns)})",
                     f"UPDATE {runs.name} SET {', '.join(f'{c} = :{c}' for c in columns)} WHERE {where}",
                     style, fenced=fenced)
