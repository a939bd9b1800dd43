"""The hot path's statements of run rows: a new run, the start and the end of an execution, a claim,
the run's own fields, and the owners' leases.

PostgreSQL writes a status change and its status event as one statement (a data-modifying WITH),
so a pipelined batch never waits inside it; SQLite has none, and writes the event in a second
statement of the same unit. The methods here say which (:meth:`RunStatements.start_execution`,
:meth:`~RunStatements.finish`, :meth:`~RunStatements.claim_one`); their callers never ask.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from exchange._store import codec
from exchange._store.records import ACTIVE_STATUSES, ENQUEUED, FINAL_STATUSES, RUNNING, Fence, RunRecord
from exchange._store.sql.chain import event_entry, head_moved, json_text
from exchange._store.sql.commits import Deferred
from exchange._store.sql.event_statements import EventStatements
from exchange._store.sql.spelling import (
    FENCE_WHERE,
    NEW_RUN_COLUMNS,
    fence_params,
    quoted,
    statement,
    values_of,
)
from exchange._store.sql.typed_sql import Bound, Cursor, Params, Statement
from exchange._store.tables import control, events, owners, runs

if TYPE_CHECKING:
    from exchange._store.sql.backends import Backend

_RUN_COLUMNS = frozenset(runs.c.keys())


class RunStatements:
    """Run rows and owners' leases, spelled for ``backend``; times are ``now()`` (the store's clock)
    or, for leases, the database's own clock. ``events``: where a status event goes on SQLite."""

    def __init__(self, backend: Backend, now: Callable[[], float], events_sql: EventStatements) -> None:
        self.now = now
        self.style = backend.paramstyle
        self.writing_with = backend.writing_with
        self._events = events_sql
        db_now = backend.now_sql
        self.run_names = tuple(runs.c.keys())
        # A returned run row's values in RunRecord's field order (the table may hold more columns).
        self._run_record_values = operator.itemgetter(
            *(self.run_names.index(field.name) for field in dataclasses.fields(RunRecord)))
        returning_run = f"RETURNING {', '.join(self.run_names)}"
        actives = quoted(ACTIVE_STATUSES)

        # ----- the start and the end of an execution (Store.start_execution, Store.finish_run)
        # RUNNING, counted; the first execution sets the start time and the deadline (so does the
        # first after a retry, which clears the deadline: a retried run gets its timeout afresh);
        # the lease runs from the store's clock.
        starting = (
            f"status = '{RUNNING}', updated_at = :now, executions = executions + 1, "
            f"started_at = COALESCE(started_at, :now), "
            f"deadline_at = CASE WHEN deadline_at IS NULL AND timeout_seconds IS NOT NULL "
            f"THEN :now + timeout_seconds ELSE deadline_at END, lease_expires_at = {db_now} + :lease_seconds"
        )
        start_update = (f"UPDATE {runs.name} SET {starting} WHERE {FENCE_WHERE} AND status IN ({actives}) "
                        f"{returning_run}")
        self.start_update = statement(backend, "start_update", start_update)
        finish_run = (
            f"UPDATE {runs.name} SET status = :status, result = :result, error_type = :error_type, "
            f"error_message = :error_message, finished_at = :now, updated_at = :now, lease_expires_at = NULL "
            f"WHERE {FENCE_WHERE} AND status NOT IN ({quoted(FINAL_STATUSES)})"
        )
        self.finish_run = statement(backend, "finish_run", finish_run)

        # The one-statement start and claim (PostgreSQL) write the RUNNING status event in the
        # same statement, as a link of the run's audit chain (sql.chain): the UPDATE moves the head
        # over the event's entry, spelled in SQL as event_entry spells it. Its parts that are not
        # the run's own are given spelled by Python (:chain_at, :chain_owner: json_text), and the
        # payload is built of them and the execution's number only, so that it is plain ASCII,
        # which to_json escapes as Python's JSON does. The SET sees the row before the UPDATE:
        # the execution's number there is executions + 1.
        def running_payload(execution: str) -> str:
            return (f"'{{\"status\": \"{RUNNING}\", \"execution\": ' || CAST({execution} AS TEXT) || "
                    f"', \"owner\": ' || :chain_owner || '}}'")

        if backend.writing_with:
            run = runs.name
            entry = (f"'[\"event\",' || to_json({run}.id)::text || ',\"status\",' || :chain_at || ',' || "
                     f":chain_owner || ',null,null,' || to_json({running_payload(f'{run}.executions + 1')})::text "
                     f"|| ']|'")
            chain_set = f", {head_moved(backend.sha256_sql, entry, table=run)}"
        else:
            chain_set = ""

        def started_and_logged(started: str) -> str:
            """The rows a data-modifying WITH named ``started`` returned, each with its RUNNING status
            event, a link of its chain (its UPDATE set ``chain_set``)."""
            return (f"logged AS (INSERT INTO {events.name} (run_id, kind, at, actor, payload, chain_seq, chain_prev, "
                    f"chain_hash) SELECT id, 'status', :now, owner, {running_payload('executions')}, audit_seq, "
                    f"audit_prev, audit_head FROM {started}) "
                    f"SELECT {', '.join(self.run_names)} FROM {started}")

        start_chained = (f"UPDATE {runs.name} SET {starting}{chain_set} WHERE {FENCE_WHERE} AND status IN ({actives}) "
                         f"{returning_run}")
        self.start_execution_logged = statement(backend, "start_execution_logged", (
            f"WITH started AS ({start_chained}), {started_and_logged('started')}"
        ))
        # the status event a link of the run's audit chain (sql.chain): the same UPDATE moves the head
        finish_chained = finish_run.replace(" WHERE ", f", {head_moved(backend.sha256_sql, ':chain_entry')} WHERE ", 1)
        self.finish_run_logged = statement(backend, "finish_run_logged", (
            f"WITH finished AS ({finish_chained} RETURNING id, owner, audit_seq, audit_prev, audit_head) "
            f"INSERT INTO {events.name} (run_id, kind, at, actor, payload, chain_seq, chain_prev, chain_hash) "
            f"SELECT id, 'status', :now, owner, :payload, audit_seq, audit_prev, audit_head FROM finished"
        ))

        # ----- a claim (RunTable.claim): the maintenance setting, the candidates, then the runs
        # taken and their first execution started in one UPDATE that returns their rows.
        self.control_value = statement(backend, "control_value", f"SELECT value FROM {control.name} WHERE key = :key")
        busy_keys = (f"SELECT partition_key FROM {runs.name} WHERE status IN ({actives}) "
                     f"AND partition_key IS NOT NULL")
        claimable = (f"FROM {runs.name} WHERE status = '{ENQUEUED}' "
                     f"AND (partition_key IS NULL OR partition_key NOT IN ({busy_keys}))")
        candidates = (f"SELECT id, partition_key {claimable}{{queues}} "
                      f"ORDER BY priority DESC, created_at, id LIMIT :limit")
        if backend.row_locks:
            candidates += f" FOR UPDATE OF {runs.name} SKIP LOCKED"
        in_queues = " AND queue IN (:queues*)"
        self.claim_candidates = statement(backend, "claim_candidates", candidates.format(queues=""))
        self.claim_candidates_in = statement(backend, "claim_candidates_in", candidates.format(queues=in_queues))
        self.count_claimable = statement(backend, "count_claimable", f"SELECT count(*) {claimable}")
        self.count_claimable_in = statement(backend, "count_claimable_in", f"SELECT count(*) {claimable}{in_queues}")
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
        self.take_enqueued = statement(backend, "take_enqueued", (
            f"UPDATE {runs.name} SET owner = :owner, owner_node = :node, lease_generation = lease_generation + 1, "
            f"{starting} WHERE id IN (:ids*) AND status = '{ENQUEUED}' "
            f"AND (partition_key IS NULL OR NOT EXISTS ({queued_ahead})) {returning_run}"
        ))

        # PostgreSQL: a start's claim for one free worker (RunTable.claim_one_on) as one statement, so
        # the start's pipelined unit never waits inside it: what _claim does with limit 1 (the
        # maintenance setting, the first candidate, left when it has a partition key), read after
        # the commit. The maintenance value is JSON written by the store (codec): an object.
        self.claim_one_logged: Statement | None = None
        self.claim_one_logged_in: Statement | None = None
        if backend.writing_with:
            first = candidates.replace(":limit", "1")
            draining = (f"EXISTS (SELECT 1 FROM {control.name} WHERE key = :maintenance "
                        f"AND (value::json ->> 'mode') IN (:draining_modes*))")
            braced_chain_set = chain_set.replace("{", "{{").replace("}", "}}")  # in a template of {queues}
            claim_one = (
                f"WITH candidate AS ({first}), "
                f"taken AS (UPDATE {runs.name} SET owner = :owner, owner_node = :node, "
                f"lease_generation = lease_generation + 1, {starting}{braced_chain_set} FROM candidate "
                f"WHERE {runs.name}.id = candidate.id AND candidate.partition_key IS NULL "
                f"AND {runs.name}.status = '{ENQUEUED}' AND NOT {draining} "
                f"RETURNING {', '.join(f'{runs.name}.{name}' for name in self.run_names)}), "
                + started_and_logged('taken').replace("{", "{{").replace("}", "}}")
            )
            self.claim_one_logged = statement(backend, "claim_one_logged", claim_one.format(queues=""))
            self.claim_one_logged_in = statement(backend, "claim_one_logged_in", claim_one.format(queues=in_queues))

        # ----- a new run (Store.create_run): ENQUEUED, or PENDING and held with a lease from this write.
        new_run = (f"INSERT INTO {runs.name} ({', '.join(NEW_RUN_COLUMNS)}, lease_expires_at) "
                   f"VALUES ({values_of(NEW_RUN_COLUMNS)}")
        self.insert_run = statement(backend, "insert_run", f"{new_run}, NULL)")
        self.insert_held_run = statement(backend, "insert_held_run", f"{new_run}, {db_now} + :lease_seconds)")
        self.run_status = statement(backend, "run_status", f"SELECT status FROM {runs.name} WHERE id = :run_id")

        # ----- lease renewal: the owner's row, then the runs it holds (see RunTable.heartbeat).
        self.renew_owner = statement(
            backend, "renew_owner",
            f"UPDATE {owners.name} SET lease_expires_at = {db_now} + :lease_seconds WHERE owner = :owner")
        self.owned_runs = statement(backend, "owned_runs", (
            f"SELECT r.id, r.lease_generation FROM {runs.name} r JOIN {owners.name} o ON o.owner = r.owner "
            f"WHERE r.owner = :owner AND r.status IN ({actives})"
        ))
        self.register_owner = statement(backend, "register_owner", (
            f"INSERT INTO {owners.name} (owner, lease_expires_at) VALUES (:owner, {db_now} + :lease_seconds) "
            f"ON CONFLICT (owner) DO UPDATE SET lease_expires_at = excluded.lease_expires_at"
        ))
        skip = " FOR UPDATE SKIP LOCKED" if backend.row_locks else ""
        self.prune_owners = statement(backend, "prune_owners", (
            f"DELETE FROM {owners.name} WHERE owner IN (SELECT o.owner FROM {owners.name} o "
            f"WHERE o.lease_expires_at < {db_now} - :kept_seconds AND NOT EXISTS (SELECT 1 FROM {runs.name} r "
            f"WHERE r.owner = o.owner AND r.status IN ({actives})){skip})"
        ))

    # ----- units' pieces that differ by backend ---------------------------------------------------
    def start_execution(self, cur: Cursor, fence: Fence, params: Params) -> Deferred[RunRecord | None]:
        """Mark the run RUNNING for ``fence``'s execution (``params``: ``now``, ``lease_seconds`` and
        the fence's) with its status event; its record once the unit is answered, None when the
        fence did not hold (nothing written then)."""
        if self.writing_with:  # one statement: read once the batch is answered
            self.start_execution_logged.run(cur, {**params, **self.chain_parts(params["now"], fence.owner)})
            return Deferred(lambda: self.started_record(cur.fetchone()))
        rec = self.started_record(self.start_update.run(cur, params).fetchone())
        if rec is not None:  # None: the UPDATE changed nothing, the batch is untouched
            self._events.add_event(cur, fence.run_id, "status",
                                   {"status": RUNNING, "execution": rec.executions, "owner": fence.owner},
                                   fence.owner, None, None)
        return Deferred(lambda: rec)

    def finish(self, cur: Cursor, fence: Fence, params: Params, payload: Mapping[str, Any]) -> Deferred[bool]:
        """Record the run's final status (``params``: those of :attr:`finish_run`) with its status
        event of ``payload``; whether the fence held (False: nothing written)."""
        if self.writing_with:  # one statement: read once the batch is answered
            text = codec.dumps(payload)
            entry = event_entry(fence.run_id, "status", params["now"], fence.owner, None, None, text) + "|"
            self.finish_run_logged.run(cur, {**params, "payload": text, "chain_entry": entry})
            return Deferred(lambda: bool(cur.rowcount))
        if self.finish_run.run(cur, params).rowcount == 0:
            return Deferred(lambda: False)  # the UPDATE changed nothing: the batch is untouched
        self._events.add_event(cur, fence.run_id, "status", payload, fence.owner, None, None)
        return Deferred(lambda: True)

    def claim_one(
        self, cur: Cursor, queues: Sequence[str] | None, params: Params,
        claim_apart: Callable[[], list[RunRecord]],
    ) -> Deferred[list[RunRecord]]:
        """A claim of one run as the last statement of the unit on ``cur`` (``params``: ``owner``,
        ``node``, ``now``, ``lease_seconds``, ``maintenance``, ``draining_modes``); the records to
        read once the unit is answered. Where the backend has no one-statement form (SQLite),
        ``claim_apart()`` runs the claim's statements one after the other, now."""
        one = self.claim_one_logged_in if queues else self.claim_one_logged
        if one is None:
            records = claim_apart()
            return Deferred(lambda: records)
        params = {**params, **self.chain_parts(params["now"], params["owner"])}
        one.run(cur, {**params, "queues": list(queues)} if queues else params)
        return Deferred(lambda: [rec for rec in map(self.started_record, cur.fetchall()) if rec is not None])

    @staticmethod
    def chain_parts(now: object, owner: object) -> dict[str, object]:
        """The parts of a RUNNING status event's chain entry the one-statement start and claim take
        spelled (see ``chain_set`` in ``__init__``): the time (a float) and the owner (a text)."""
        return {"chain_at": json_text(float(cast(float, now))), "chain_owner": json_text(str(owner))}

    # ----- the run's own fields -----------------------------------------------------------------
    def run_update(self, columns: tuple[str, ...], *, fenced: bool) -> Statement:
        """UPDATE of the run's own row setting ``columns`` (the table's own only), by ``run_id`` or,
        ``fenced``, by the fence alone."""
        return _run_update(self.style, columns, fenced)

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


@lru_cache(maxsize=256)
def _run_update(style: Any, columns: tuple[str, ...], fenced: bool) -> Statement:
    unknown = set(columns) - _RUN_COLUMNS
    if unknown:  # column names are spelled into the statement: only the table's own are allowed
        raise ValueError(f"not columns of {runs.name}: {', '.join(sorted(unknown))}")
    where = FENCE_WHERE if fenced else "id = :run_id"
    return Statement(f"update_run({', '.join(columns)})",
                     f"UPDATE {runs.name} SET {', '.join(f'{c} = :{c}' for c in columns)} WHERE {where}",
                     style, fenced=fenced)
