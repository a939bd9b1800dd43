"""Run rows: creation (with deduplication), claiming with leases, status changes, listing.

Who may execute a run is decided here. A run is held by an *owner* (one gateway process, or one
``exchange run`` process) of a *node*, under a lease whose expiry is the store's clock, and a *lease
generation* that every claim, recovery and takeover increments. Writes an execution makes carry the
owner and generation it was given (its :class:`~exchange._store.records.Fence`), so once a run
changed hands the old execution's writes are refused. Leases are set and compared with the database's
own clock, inside the statements.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select, update

from exchange._store import codec
from exchange._store import records as r
from exchange._store.gateways import DRAINING_MODES, MAINTENANCE, is_draining_value
from exchange._store.records import Fence
from exchange._store.runs.run_queries import RunQueries
from exchange._store.sql import Cursor, Database, Deferred, is_integrity_error
from exchange._store.tables import run_columns, runs

# An owner row out of date for this long, whose owner holds no run, is deleted (a process that
# ended long ago); one still holding runs keeps its row for whoever takes them over.
OWNER_ROW_KEPT_SECONDS = 3600.0


@dataclass(frozen=True)
class NewRun:
    workflow: str
    params_json: str
    code_version: str
    created_by: str
    queue: str = "default"
    partition_key: str | None = None
    priority: int = 0
    dedup_id: str | None = None
    timeout_seconds: float | None = None
    parent_run_id: str | None = None


@dataclass(frozen=True)
class Holder:
    """Who claims runs: an owner id (unique per process) of a node (None: no node, e.g. ``exchange run``)."""

    owner: str
    node: str | None
    lease_seconds: float


class RunTable:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.queries = RunQueries(db.now_sql, row_locks=db.backend.row_locks)  # SQLAlchemy Core, built once

    # ----- creation and reads ---------------------------------------------------------------------
    def insert(self, cur: Cursor, new: NewRun, *, holder: Holder | None) -> str:
        """Insert an ENQUEUED run, or a PENDING one held by ``holder`` (with a lease from this first
        write, so a crash right after it cannot orphan the run), on a group-commit cursor; returns
        its id.

        A used ``dedup_id`` or a busy partition key makes the statement fail with the driver's
        IntegrityError (the caller decides).
        """
        sql = self.db.sql.runs
        now = sql.now()
        run_id = str(uuid.uuid4())
        values: dict[str, object] = {
            "id": run_id, "workflow": new.workflow, "status": r.PENDING if holder else r.ENQUEUED,
            "params": new.params_json, "queue": new.queue, "partition_key": new.partition_key,
            "priority": new.priority, "dedup_id": new.dedup_id, "timeout_seconds": new.timeout_seconds,
            "code_version": new.code_version, "owner": holder.owner if holder else None,
            "owner_node": holder.node if holder else None, "lease_generation": 1 if holder else 0,
            "cancel_requested": 0, "created_by": new.created_by, "created_at": now, "updated_at": now,
            "executions": 0, "parent_run_id": new.parent_run_id,
        }
        if holder is None:
            sql.insert_run.run(cur, values)
        else:
            sql.insert_held_run.run(cur, {**values, "lease_seconds": float(holder.lease_seconds)})
        return run_id

    def children(self, run_id: str) -> builtins.list[tuple[str, str, str]]:
        """``(id, workflow, status)`` of the runs ``run_id`` started as children, oldest first."""
        query = (select(runs.c.id, runs.c.workflow, runs.c.status).where(runs.c.parent_run_id == run_id)
                 .order_by(runs.c.created_at))
        with self.db.read() as conn:
            return [(row[0], row[1], row[2]) for row in conn.execute(query)]

    def by_dedup(self, dedup_id: str) -> str | None:
        with self.db.read() as conn:
            return conn.execute(select(runs.c.id).where(runs.c.dedup_id == dedup_id)).scalar()

    def get(self, run_id: str) -> r.RunRecord | None:
        with self.db.read() as conn:
            row = conn.execute(select(*run_columns()).where(runs.c.id == run_id)).first()
        return r.RunRecord.from_row(row) if row else None

    def list(
        self, status: str | None = None, workflow: str | None = None, limit: int = 100
    ) -> builtins.list[r.RunRecord]:
        query = select(*run_columns()).order_by(runs.c.created_at.desc()).limit(limit)
        if status:
            query = query.where(runs.c.status == status)
        if workflow:
            query = query.where(runs.c.workflow == workflow)
        with self.db.read() as conn:
            return [r.RunRecord.from_row(row) for row in conn.execute(query)]

    # ----- taking runs ----------------------------------------------------------------------------
    def _holding(self, holder: Holder) -> dict[str, Any]:
        return {"new_owner": holder.owner, "new_node": holder.node, "lease_seconds": float(holder.lease_seconds),
                "at": self.db.clock.now()}

    def count_claimable(self, queues: Sequence[str] | None = None) -> int:
        """How many ENQUEUED runs a claim could take now (in ``queues`` if given): a run waiting
        behind an active run of its partition key is not counted. A read."""
        sql = self.db.sql.runs
        rows = self.db.query(sql.count_claimable_in, {"queues": list(queues)}) if queues else (
            self.db.query(sql.count_claimable))
        return int(rows[0][0])

    def claim(
        self, holder: Holder, limit: int, queues: Sequence[str] | None = None
    ) -> builtins.list[r.RunRecord]:
        """Move up to ``limit`` ENQUEUED runs to RUNNING under ``holder``: their first execution starts
        in the claim's transaction (one write, with each run's status event), so the records returned
        are those of started executions (see :meth:`exchange._store.store.Store.start_execution`
        for a run taken any other way).

        Highest ``priority`` first, then oldest. A run whose ``partition_key`` already has an active
        run stays ENQUEUED, and so does one with a run of its key queued ahead of it in its queue
        (so a candidate row skipped as locked never lets its key's next run go first): the subquery
        skips what is visible, and the unique index on active partition keys refuses what another
        gateway claimed concurrently (those runs are left for a later claim). On PostgreSQL the
        candidate rows are locked with SKIP LOCKED so several gateways can claim from one store.
        """
        if limit <= 0:
            return []
        # Most claims: one group-commit unit, sharing its commit with the starts and steps of that
        # moment (on SQLite, no write transaction of its own holding the one writer's lock).
        records = self.db.unit(lambda cur: self._claim(cur, holder, limit, queues), "a claim")
        if records is not None:
            return records
        # Partition keys among the candidates: another gateway may activate a run of one of them
        # concurrently, which the unique index refuses; that needs savepoints, in a transaction here.
        with self.db.transaction("a claim") as conn:
            cur = conn.connection.cursor()
            try:
                keyed = self._claim(cur, holder, limit, queues, savepoint=conn.begin_nested)
            finally:
                cur.close()
        assert keyed is not None
        return keyed

    def claim_one_on(
        self, cur: Cursor, holder: Holder, queues: Sequence[str] | None
    ) -> Deferred[builtins.list[r.RunRecord]]:
        """:meth:`claim` of one run, on a group-commit cursor in the caller's unit (a start that
        takes a run for a free worker: :meth:`exchange._store.store.Store.create_and_claim`); the
        records to read once the unit's statements are answered. Nothing is taken when the first
        candidate has a partition key (the dispatcher's claim takes those). The last statement
        the unit runs on ``cur``: its rows are what is read."""
        sql = self.db.sql.runs
        params = {"owner": holder.owner, "node": holder.node, "now": sql.now(),
                  "lease_seconds": float(holder.lease_seconds), "maintenance": MAINTENANCE,
                  "draining_modes": list(DRAINING_MODES)}
        # Where the store has no one-statement claim: the claim's statements one after the other,
        # as a claim runs them.
        return sql.claim_one(cur, queues, params, lambda: self._claim(cur, holder, 1, queues) or [])

    def _claim(
        self, cur: Cursor, holder: Holder, limit: int, queues: Sequence[str] | None,
        savepoint: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> builtins.list[r.RunRecord] | None:
        """The claim on ``cur``. Without ``savepoint`` (a group-commit cursor) it returns None, having
        written nothing, when a candidate has a partition key; with it, each key's first candidate is
        taken inside a savepoint, so a key another gateway activated meanwhile refuses only its own run."""
        sql = self.db.sql.runs
        row = sql.control_value.run(cur, {"key": MAINTENANCE}).fetchone()
        if row is not None and is_draining_value(codec.loads(row[0])):
            return []  # maintenance: start nothing new (read here, so no claim slips past it)
        scan = limit if savepoint is None else limit * 4  # room for several runs of one key
        if queues:
            sql.claim_candidates_in.run(cur, {"queues": list(queues), "limit": scan})
        else:
            sql.claim_candidates.run(cur, {"limit": scan})
        chosen: list[str] = []
        seen_keys: set[str] = set()
        for run_id, key in cur.fetchall():
            if key is not None:
                if savepoint is None:
                    return None
                if key in seen_keys:
                    continue
                seen_keys.add(key)
            chosen.append(str(run_id))
            if len(chosen) >= limit:
                break
        if not chosen:
            return []
        records = self._take_enqueued(cur, chosen, holder, savepoint if seen_keys else None)
        events = self.db.sql.events
        for rec in records:
            events.add_event(cur, rec.id, "status", {"status": r.RUNNING, "execution": rec.executions,
                                                     "owner": holder.owner}, holder.owner, None, None)
        return records

    def _take_enqueued(
        self, cur: Cursor, ids: builtins.list[str], holder: Holder,
        savepoint: Callable[[], AbstractContextManager[Any]] | None,
    ) -> builtins.list[r.RunRecord]:
        """Take and start ``ids``; the records of those taken. With ``savepoint``, a refusal by the
        unique index on active partition keys (another gateway activated one of them meanwhile)
        leaves the runs of that key: all are tried at once, then one by one."""
        sql = self.db.sql.runs
        holding = {"owner": holder.owner, "node": holder.node, "now": sql.now(),
                   "lease_seconds": float(holder.lease_seconds)}

        def take(chosen: builtins.list[str]) -> builtins.list[r.RunRecord]:
            sql.take_enqueued.run(cur, {**holding, "ids": chosen})
            return [rec for rec in map(sql.started_record, cur.fetchall()) if rec is not None]

        if savepoint is None:  # no partition key among them: the unique index cannot refuse the update
            return take(ids)
        try:
            with savepoint():
                return take(ids)
        except Exception as exc:
            if not is_integrity_error(exc):
                raise
        taken: list[r.RunRecord] = []
        for run_id in ids:  # another gateway activated a run of one of these keys meanwhile
            try:
                with savepoint():
                    taken += take([run_id])
            except Exception as exc:
                if not is_integrity_error(exc):
                    raise
        return taken

    def recover_node(self, holder: Holder, *, expired_only: bool) -> builtins.list[r.RunRecord]:
        """Take the unfinished runs of ``holder``'s node (a restarted node's; whoever held them is gone).

        ``expired_only``: only those whose lease has run out — when it is not certain that the node's
        previous gateway is dead (it may have lost its node lock to a store restart and still be
        executing until its leases run out).
        """
        if expired_only:
            return self._take(self.queries.out_of_date_owners, self.queries.node_runs_expired, {"node": holder.node},
                              holder, "a recovery of the node's runs")
        return self._take(self.queries.node_owners, self.queries.node_runs, {"node": holder.node}, holder,
                          "a recovery of the node's runs")

    def take_over_expired(
        self, holder: Holder, exclude: Collection[str] = (), queues: Sequence[str] | None = None,
        limit_of: Callable[[int], int] | None = None,
    ) -> builtins.list[r.RunRecord]:
        """Take over active runs nobody holds any more (no owner, or a lease that ran out: their
        gateway died or was cut off), except ``exclude`` (the runs ``holder`` still holds); only
        runs of ``queues`` when given (a gateway serving some queues never executes another's runs,
        as it never claims them). ``limit_of``: called with the number found (before the write
        transaction: it may read the store), returns how many of them to take (a gateway's share when
        several are alive); the rest stay for the others.

        A read that locks nothing looks first (and counts, for ``limit_of``); only if it finds a
        candidate is the write transaction opened. A lease that runs out right after the look is found
        by the next call, as it would be if it ran out right after the transaction."""
        probe, query = self.queries.expired_probe, self.queries.expired_runs
        if queues:
            probe = probe.where(runs.c.queue.in_(list(queues)))
            query = query.where(runs.c.queue.in_(list(queues)))
        with self.db.read() as conn:
            if limit_of is None:
                found = 0 if conn.execute(probe).first() is None else 1
            else:
                found = int(conn.execute(select(func.count()).select_from(probe.limit(None).subquery())).scalar_one())
        if not found:
            return []
        limit = None if limit_of is None else limit_of(found)
        if limit is not None and limit <= 0:
            return []  # all left for the others: no write transaction
        return self._take(self.queries.out_of_date_owners, query, {}, holder, "a takeover of expired leases", exclude,
                          limit)

    def _take(
        self, owners_query: Any, query: Any, params: dict[str, Any], holder: Holder, label: str,
        exclude: Collection[str] = (), limit: int | None = None,
    ) -> builtins.list[r.RunRecord]:
        """Take the runs ``query`` finds (``limit`` of them at most, if given). Their owners' rows
        (``owners_query``) are locked first where rows lock: an owner renewing right now holds its
        row, so its runs are skipped, and a renewal that comes after waits for this transaction and
        then no longer finds the runs (see :meth:`heartbeat`)."""
        with self.db.transaction(label) as conn:
            gone_owners = list(conn.execute(owners_query, params).scalars())
            ids = [run_id for run_id in conn.execute(query, {**params, "gone_owners": gone_owners}).scalars()
                   if run_id not in exclude]
            if limit is not None:
                ids = ids[:max(0, limit)]
            if not ids:
                return []
            conn.execute(self.queries.take_active, {**self._holding(holder), "ids": ids})
            rows = conn.execute(self.queries.rows, {"ids": ids}).all()
        return [r.RunRecord.from_row(row) for row in rows]

    # ----- an execution's own writes (fenced) -----------------------------------------------------
    def update_in(self, conn: Connection, run_id: str, **values: Any) -> None:
        """Update the run's row inside a transaction that already holds its fence."""
        conn.execute(update(runs).where(runs.c.id == run_id).values(**values))

    def set_fields(self, fence: Fence, label: str, **values: Any) -> None:
        """Update the run's own row for the fence's execution (one self-fenced statement)."""
        self.db.unit(self.db.sql.runs.fenced_run_update(fence, values), label, fence=fence)

    def register_owner(self, owner: str, lease_seconds: float) -> None:
        """Give ``owner`` (a gateway process) its lease row, before it holds any run: renewing it
        (:meth:`heartbeat`) renews every run it holds."""
        self.db.unit(self.db.sql.runs.register_owner.bind({"owner": owner, "lease_seconds": float(lease_seconds)}),
                     "the owner's lease row")

    def heartbeat(self, owner: str, lease_seconds: float) -> dict[str, int]:
        """Renew the leases of every active run ``owner`` holds: one row, the owner's, is written.
        Returns run id -> lease generation of those renewed (a run that is not among them, or under
        another generation, is no longer held by the execution that thought so).

        The owner's row is updated first, then its runs are read in the same transaction: a takeover
        locks the row before taking runs, so either this renewal waits for it and then does not find
        the runs taken, or the takeover skips them. An owner whose row is gone (deleted while it held
        nothing for an hour) renews nothing this time and gets its row back for the runs it takes next.
        """
        sql = self.db.sql.runs
        lease = {"owner": owner, "lease_seconds": float(lease_seconds)}

        def renew(cur: Cursor) -> dict[str, int]:
            sql.renew_owner.run(cur, lease)
            held = {str(row[0]): int(row[1]) for row in sql.owned_runs.run(cur, {"owner": owner}).fetchall()}
            if not held:  # holding nothing: get the row back if it was gone, and tidy up others
                sql.register_owner.run(cur, lease)
                sql.prune_owners.run(cur, {"kept_seconds": OWNER_ROW_KEPT_SECONDS})
            return held

        # A unit of the group commit: serialized with the batches that hold locks on these rows. An
        # urgent one: a renewal queued behind a busy gateway's writes could come after the leases ran out.
        return self.db.unit(renew, "a lease renewal", lane="urgent")

    # ----- cancellation ---------------------------------------------------------------------------
    def request_cancel(self, run_id: str, reason: str | None, conn: Connection) -> str | None:
        """Flag the run for cancellation; an ENQUEUED run is cancelled at once. Returns its status."""
        row = conn.execute(select(runs.c.status).where(runs.c.id == run_id)).first()
        if row is None:
            return None
        now = self.db.clock.now()
        if row.status == r.ENQUEUED:
            conn.execute(
                update(runs)
                .where(runs.c.id == run_id)
                .values(status=r.CANCELLED, cancel_requested=1, cancel_reason=reason, finished_at=now,
                        updated_at=now, error_type="Cancelled", error_message=reason or "cancelled")
            )
            return r.CANCELLED
        if row.status in r.ACTIVE_STATUSES:
            conn.execute(
                update(runs)
                .where(runs.c.id == run_id)
                .values(cancel_requested=1, cancel_reason=reason, updated_at=now)
            )
        return str(row.status)

    def cancel_requested(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """Of ``run_ids``, those flagged for cancellation, with the reason."""
        if not run_ids:
            return {}
        with self.db.read() as conn:
            rows = conn.execute(
                select(runs.c.id, runs.c.cancel_reason).where(
                    runs.c.id.in_(list(run_ids)), runs.c.cancel_requested == 1
                )
            ).all()
        return {row.id: row.cancel_reason for row in rows}

    def cancel_requested_of(self, owner: str) -> dict[str, str | None]:
        """The active runs ``owner`` holds that are flagged for cancellation, with the reason."""
        with self.db.read() as conn:
            rows = conn.execute(self.queries.cancel_requested_of, {"f_owner": owner}).all()
        return {row.id: row.cancel_reason for row in rows}

    def count_by_status(self) -> dict[str, int]:
        with self.db.read() as conn:
            rows = conn.execute(select(runs.c.status, func.count()).group_by(runs.c.status)).all()
        return {str(status): int(n) for status, n in rows}
