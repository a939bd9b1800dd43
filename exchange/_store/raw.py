"""Hand-written statements for the hot paths (step records, commands), run on a DBAPI cursor.

SQLAlchemy Core builds every other statement. These few run once per step or per command, where its
statement machinery costs more than the statement itself; they are written against the same Table
definitions (names come from :mod:`exchange._store.schema`) with the driver's placeholder, and
the store suite runs them on SQLite and PostgreSQL alike.

The statements an execution of a run makes carry its fence (run id, owner, lease generation; see
:class:`~exchange._store.records.Fence`) in the statement itself, so each stays one round trip:
``INSERT ... SELECT ... WHERE EXISTS (SELECT 1 FROM runs WHERE <fence> FOR SHARE)`` writes a row only
while the fence holds, and its row count says whether it did. On PostgreSQL ``FOR SHARE`` makes a
takeover of the run (an UPDATE of its row) wait for this statement's commit, or this statement wait
for the takeover's and then find the fence gone; on SQLite the one writer at a time gives the same
order. (Not a ``WITH fence AS (...)`` form: Python's sqlite3 reports no row count for a statement that
starts with WITH.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
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
from exchange._store.schema import control, events, mailbox, owners, runs, steps

if TYPE_CHECKING:
    from exchange._store.backends import Backend

STEP_COLUMNS = (
    "run_id", "seq", "name", "status", "attempts", "output", "error_type", "error_message", "error_blob",
    "skipped_ops", "next_attempt_at", "started_at", "finished_at", "side_effect",
)
_STEP_UPDATED = STEP_COLUMNS[2:]
# The columns a new run is inserted with (the lease's expiry last: NULL, or set by the store's clock).
NEW_RUN_COLUMNS = (
    "id", "workflow", "status", "params", "queue", "partition_key", "priority", "dedup_id",
    "timeout_seconds", "code_version", "owner", "owner_node", "lease_generation", "cancel_requested",
    "created_by", "created_at", "updated_at", "executions", "parent_run_id", "lease_expires_at",
)
_RUN_COLUMNS = frozenset(runs.c.keys())
# PostgreSQL: the channel a sent message is notified on; the gateways' mail watchers LISTEN to it.
MAIL_CHANNEL = "exchange_mailbox"
# The payload (never a run id) that says "a run was created or asked to cancel" on MAIL_CHANNEL.
RUNS_CHANGED = "*runs"


class RawStatements:
    """The statements, spelled once for one driver's placeholder (``?`` or ``%s``)."""

    def __init__(self, backend: Backend) -> None:
        p = backend.placeholder
        self.p = p
        # Timestamps written by these statements: the store's clock once the database sets it.
        self.now: Callable[[], float] = time.time
        self.returning = backend.returning  # INSERT ... RETURNING id, else cursor.lastrowid
        fence_where = f"id = {p} AND owner = {p} AND lease_generation = {p}"
        # Where rows lock, a fenced write keeps the run's row from changing owner until its commit;
        # SQLite's single writer gives the same for free.
        share = " FOR SHARE" if backend.row_locks else ""
        self._fence_exists = f"EXISTS (SELECT 1 FROM {runs.name} WHERE {fence_where}{share})"
        # Opening a multi-statement fenced transaction: the run row stays locked until the commit.
        self.lock_fence = f"SELECT 1 FROM {runs.name} WHERE {fence_where}" + (
            " FOR NO KEY UPDATE" if backend.row_locks else "")
        now = backend.now_sql
        # The start and the end of an execution (group-commit units, see Store.start_execution). On
        # the right of SET every column is the row's value before the update.
        self.run_names = tuple(runs.c.keys())
        actives = ", ".join(f"'{status}'" for status in ACTIVE_STATUSES)
        # An execution starts (parameters: now, now, now, lease seconds): RUNNING, counted, the first
        # one sets the start time and the deadline (so does the first after a retry, which clears
        # the deadline: a retried run gets its timeout afresh), the lease runs from the store's clock.
        starting = (
            f"status = '{RUNNING}', updated_at = {p}, "
            f"executions = executions + 1, started_at = COALESCE(started_at, {p}), "
            f"deadline_at = CASE WHEN deadline_at IS NULL AND timeout_seconds IS NOT NULL "
            f"THEN {p} + timeout_seconds ELSE deadline_at END, lease_expires_at = {now} + {p}"
        )
        self.start_update = (
            f"UPDATE {runs.name} SET {starting} "
            f"WHERE {fence_where} AND status IN ({actives}) RETURNING {', '.join(self.run_names)}"
        )
        finals = ", ".join(f"'{status}'" for status in FINAL_STATUSES)
        self.finish_run = (
            f"UPDATE {runs.name} SET status = {p}, result = {p}, error_type = {p}, error_message = {p}, "
            f"finished_at = {p}, updated_at = {p}, lease_expires_at = NULL "
            f"WHERE {fence_where} AND status NOT IN ({finals})"
        )
        # PostgreSQL: each with its status event as one statement, so a pipelined batch never waits
        # inside it (data-modifying WITH; SQLite has none: the event follows in a second statement).
        self.writing_with = backend.writing_with
        self.start_execution_logged = (
            f"WITH started AS ({self.start_update}), "
            f"logged AS (INSERT INTO {events.name} (run_id, kind, at, actor, payload) "
            f"SELECT id, 'status', {p}, owner, json_build_object('status', status, 'execution', executions, "
            f"'owner', owner)::text FROM started) "
            f"SELECT {', '.join(self.run_names)} FROM started"
        )
        self.finish_run_logged = (
            f"WITH finished AS ({self.finish_run} RETURNING id, owner) "
            f"INSERT INTO {events.name} (run_id, kind, at, actor, payload) "
            f"SELECT id, 'status', {p}, owner, {p} FROM finished"
        )
        # A claim (RunTable.claim): the maintenance setting, the candidates, then the runs taken and
        # their first execution started in one UPDATE that returns their rows.
        self.control_value = f"SELECT value FROM {control.name} WHERE key = {p}"
        busy_keys = (f"SELECT partition_key FROM {runs.name} WHERE status IN ({actives}) "
                     f"AND partition_key IS NOT NULL")
        claimable = (f"FROM {runs.name} WHERE status = '{ENQUEUED}' "
                     f"AND (partition_key IS NULL OR partition_key NOT IN ({busy_keys})){{queues}}")
        self._claim_candidates = (
            f"SELECT id, partition_key {claimable} ORDER BY priority DESC, created_at LIMIT {p}"
            + (f" FOR UPDATE OF {runs.name} SKIP LOCKED" if backend.row_locks else "")
        )
        self._count_claimable = f"SELECT count(*) {claimable}"
        self._take_enqueued = (
            f"UPDATE {runs.name} SET owner = {p}, owner_node = {p}, lease_generation = lease_generation + 1, "
            f"{starting} WHERE id IN ({{ids}}) AND status = '{ENQUEUED}' RETURNING {', '.join(self.run_names)}"
        )
        # A new run (Store.create_run): ENQUEUED, or PENDING and held with a lease from this write.
        held = ", ".join([p] * (len(NEW_RUN_COLUMNS) - 1))
        self.insert_run = (
            f"INSERT INTO {runs.name} ({', '.join(NEW_RUN_COLUMNS)}) VALUES ({held}, NULL)"
        )
        self.insert_held_run = (
            f"INSERT INTO {runs.name} ({', '.join(NEW_RUN_COLUMNS)}) VALUES ({held}, {now} + {p})"
        )
        self.insert_step = (
            f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}) VALUES ({', '.join([p] * len(STEP_COLUMNS))})"
        )
        self.insert_step_fenced = (
            f"INSERT INTO {steps.name} ({', '.join(STEP_COLUMNS)}) "
            f"SELECT {', '.join([p] * len(STEP_COLUMNS))} WHERE {self._fence_exists}"
        )
        self.update_step = (
            f"UPDATE {steps.name} SET {', '.join(f'{c} = {p}' for c in _STEP_UPDATED)} "
            f"WHERE run_id = {p} AND seq = {p}"
        )
        self.update_step_fenced = f"{self.update_step} AND {self._fence_exists}"
        self.run_status = f"SELECT status FROM {runs.name} WHERE id = {p}"
        self.pending_messages = (
            f"SELECT id, run_id, topic, payload, actor, reason, sent_at FROM {mailbox.name} "
            f"WHERE run_id = {p} AND topic = {p} AND consumed_at IS NULL ORDER BY id LIMIT {p}"
        )
        self.highest_message_id = f"SELECT max(id) FROM {mailbox.name}"
        self.runs_with_messages_after = (
            f"SELECT DISTINCT run_id FROM {mailbox.name} WHERE id > {p} AND consumed_at IS NULL"
        )
        # PostgreSQL: a sent message wakes the gateways' mail watchers at its commit.
        self.notify_mail = f"SELECT pg_notify('{MAIL_CHANNEL}', {p})" if backend.notifications else None
        # PostgreSQL: a new run or a cancel request tells the gateways' watchers to look (ChangeGate).
        self.notify_runs = (
            f"SELECT pg_notify('{MAIL_CHANNEL}', '{RUNS_CHANGED}')" if backend.notifications else None
        )
        self.insert_message = (
            f"INSERT INTO {mailbox.name} (run_id, topic, payload, actor, reason, sent_at) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}, {p})" + (" RETURNING id" if self.returning else "")
        )
        self.insert_event = (
            f"INSERT INTO {events.name} (run_id, kind, at, actor, reason, step_seq, payload) "
            f"VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p})"
        )
        self.insert_event_fenced = (
            f"INSERT INTO {events.name} (run_id, kind, at, actor, reason, step_seq, payload) "
            f"SELECT {p}, {p}, {p}, {p}, {p}, {p}, {p} WHERE {self._fence_exists}"
        )

        # Lease renewal: the owner's row, then the runs it holds (see RunTable.heartbeat).
        self.renew_owner = f"UPDATE {owners.name} SET lease_expires_at = {now} + {p} WHERE owner = {p}"
        self.owned_runs = (
            f"SELECT r.id, r.lease_generation FROM {runs.name} r JOIN {owners.name} o ON o.owner = r.owner "
            f"WHERE r.owner = {p} AND r.status IN ({actives})"
        )
        self.register_owner = (
            f"INSERT INTO {owners.name} (owner, lease_expires_at) VALUES ({p}, {now} + {p}) "
            f"ON CONFLICT (owner) DO UPDATE SET lease_expires_at = excluded.lease_expires_at"
        )
        skip = " FOR UPDATE SKIP LOCKED" if backend.row_locks else ""
        self.prune_owners = (
            f"DELETE FROM {owners.name} WHERE owner IN (SELECT o.owner FROM {owners.name} o "
            f"WHERE o.lease_expires_at < {now} - {p} AND NOT EXISTS (SELECT 1 FROM {runs.name} r "
            f"WHERE r.owner = o.owner AND r.status IN ({actives})){skip})"
        )
        self.prune_events = (
            f"DELETE FROM {events.name} WHERE run_id = {p} AND kind = {p} AND id <= ("
            f"SELECT id FROM {events.name} WHERE run_id = {p} AND kind = {p} ORDER BY id DESC LIMIT 1 OFFSET {p})"
        )

    @staticmethod
    def fence_params(fence: Fence) -> tuple[Any, ...]:
        return (fence.run_id, fence.owner, fence.generation)

    def step_params(self, run_id: str, rec: StepRecord) -> tuple[Any, ...]:
        return (run_id, rec.seq, rec.name, rec.status, rec.attempts, rec.output, rec.error_type,
                rec.error_message, rec.error_blob, rec.skipped_ops, rec.next_attempt_at, rec.started_at,
                rec.finished_at, 1 if rec.side_effect else None)

    def record_step(self, cur: Any, run_id: str, rec: StepRecord, *, replace: bool) -> None:
        """Insert (or, with ``replace``, update) a step row inside a transaction that already holds
        the run's fence (see ``lock_fence``)."""
        params = self.step_params(run_id, rec)
        if replace:
            cur.execute(self.update_step, params[2:] + (run_id, rec.seq))
        else:
            cur.execute(self.insert_step, params)

    def fenced_step(self, fence: Fence, rec: StepRecord, *, replace: bool) -> tuple[str, tuple[Any, ...]]:
        """One self-fenced statement recording ``rec`` (insert, or update of a RETRYING row)."""
        params = self.step_params(fence.run_id, rec)
        if replace:
            return self.update_step_fenced, params[2:] + (fence.run_id, rec.seq) + self.fence_params(fence)
        return self.insert_step_fenced, params + self.fence_params(fence)

    def fenced_event(
        self, fence: Fence, kind: str, payload_json: str | None, actor: str | None, reason: str | None,
        step_seq: int | None,
    ) -> tuple[str, tuple[Any, ...]]:
        """One self-fenced statement appending an event to the run's audit trail."""
        return self.insert_event_fenced, (
            fence.run_id, kind, self.now(), actor, reason, step_seq, payload_json, *self.fence_params(fence)
        )

    def fenced_run_update(self, fence: Fence, fields: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
        """One self-fenced UPDATE of the run's own row."""
        names = self._run_columns(fields)
        return (
            f"UPDATE {runs.name} SET {', '.join(f'{n} = {self.p}' for n in names)} "
            f"WHERE id = {self.p} AND owner = {self.p} AND lease_generation = {self.p}",
            (*[fields[n] for n in names], *self.fence_params(fence)),
        )

    def started_record(self, row: Sequence[Any] | None) -> RunRecord | None:
        """The record of a row returned by ``start_update`` (None: no row, the fence did not hold)."""
        return None if row is None else RunRecord.from_row(SimpleNamespace(**dict(zip(self.run_names, row))))

    def status_of(self, cur: Any, run_id: str) -> str | None:
        cur.execute(self.run_status, (run_id,))
        row = cur.fetchone()
        return None if row is None else str(row[0])

    def add_message(
        self, cur: Any, run_id: str, topic: str, payload: Any, actor: str | None, reason: str | None
    ) -> int:
        cur.execute(self.insert_message, (run_id, topic, codec.dumps(payload), actor, reason, self.now()))
        if self.returning:
            return int(cur.fetchone()[0])
        return int(cur.lastrowid)

    def claim_candidates(self, queue_count: int) -> str:
        """The claim's candidates: ENQUEUED runs whose partition key has no active run, best first,
        limited by the last parameter; in ``queue_count`` queues (the first parameters) if not 0."""
        return self._claim_candidates.format(queues=self._queues(queue_count))

    def count_claimable(self, queue_count: int) -> str:
        """How many runs a claim could take now (the candidates, counted, locking nothing); in
        ``queue_count`` queues (the parameters) if not 0."""
        return self._count_claimable.format(queues=self._queues(queue_count))

    def _queues(self, queue_count: int) -> str:
        return f" AND queue IN ({', '.join([self.p] * queue_count)})" if queue_count else ""

    def take_enqueued(self, count: int) -> str:
        """Take and start ``count`` ENQUEUED runs (parameters: owner, node, now, now, now, lease
        seconds, then the ids); the rows of those taken come back."""
        return self._take_enqueued.format(ids=", ".join([self.p] * count))

    def add_event(
        self, cur: Any, run_id: str, kind: str, payload: Any, actor: str | None, reason: str | None,
        step_seq: int | None,
    ) -> None:
        text = None if payload is None else codec.dumps(payload)
        cur.execute(self.insert_event, (run_id, kind, self.now(), actor, reason, step_seq, text))

    def unconsumed(self, cur: Any, ids: Sequence[int]) -> int:
        """How many of the messages ``ids`` are still unconsumed."""
        marks = ", ".join([self.p] * len(ids))
        cur.execute(f"SELECT count(*) FROM {mailbox.name} WHERE id IN ({marks}) AND consumed_at IS NULL", tuple(ids))
        return int(cur.fetchone()[0])

    def consume(
        self, cur: Any, ids: Sequence[int], seq: int, notes: Mapping[int, tuple[str, str | None]] | None = None
    ) -> int:
        """Mark messages consumed by step ``seq``; returns how many were still unconsumed.

        ``notes``: per message id, its outcome and note (``(MESSAGE_DROPPED, why)``); a message
        without one is CONSUMED."""
        if not ids:
            return 0
        notes = notes or {}
        now = self.now()
        plain = [i for i in ids if i not in notes]
        done = 0
        if plain:
            marks = ", ".join([self.p] * len(plain))
            cur.execute(
                f"UPDATE {mailbox.name} SET consumed_seq = {self.p}, consumed_at = {self.p}, "
                f"outcome = '{MESSAGE_CONSUMED}' WHERE id IN ({marks}) AND consumed_at IS NULL",
                (seq, now, *plain),
            )
            done += int(cur.rowcount)
        for message_id in ids:  # a note each (drops are rare: a statement per message is cheap)
            if message_id in notes:
                outcome, note = notes[message_id]
                cur.execute(
                    f"UPDATE {mailbox.name} SET consumed_seq = {self.p}, consumed_at = {self.p}, "
                    f"outcome = {self.p}, outcome_note = {self.p} WHERE id = {self.p} AND consumed_at IS NULL",
                    (seq, now, outcome, note, message_id),
                )
                done += int(cur.rowcount)
        return done

    @staticmethod
    def _run_columns(fields: Mapping[str, Any]) -> list[str]:
        unknown = set(fields) - _RUN_COLUMNS
        if unknown:  # column names are spelled into the statement: only the table's own are allowed
            raise ValueError(f"not columns of {runs.name}: {', '.join(sorted(unknown))}")
        return list(fields)

    def update_run(self, cur: Any, run_id: str, fields: Mapping[str, Any]) -> None:
        names = self._run_columns(fields)
        cur.execute(
            f"UPDATE {runs.name} SET {', '.join(f'{n} = {self.p}' for n in names)} WHERE id = {self.p}",
            (*[fields[n] for n in names], run_id),
        )
