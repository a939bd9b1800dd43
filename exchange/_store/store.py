"""The system store: one database, its tables as small objects, and the few multi-table writes."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from exchange._store import codec
from exchange._store import records as r
from exchange._store.admin import AccountTable, AuditLog, TemplateTable
from exchange._store.gateways import ControlTable, NodeTable, PlantStateTable
from exchange._store.records import Fence, NewEvent, RunStatus, StepRecord
from exchange._store.runs import (
    AuditChains,
    EventLog,
    Holder,
    Mailbox,
    NewRun,
    PromptTable,
    Reruns,
    RunLookup,
    RunTable,
    RunValues,
    StepTable,
    StreamTable,
    outcome_label,
)
from exchange._store.sql import Cursor, Database, Deferred, StoreClock, fence_params, is_integrity_error
from exchange.errors import OwnershipLost, StoreDataError, WorkflowError

if TYPE_CHECKING:
    from exchange._store.runs import PhaseNotes, RecordValueTable, SignatureTable, UnitTable

class Store:
    """Open (and migrate) the store at ``url``.

    Composition: ``runs``, ``steps``, ``mailbox``, ``events``, ``values`` and ``nodes`` each own one
    table (``lookup`` answers people's reads across them); the methods here are the writes that must
    span several tables in one transaction. Writes an execution of a run makes take its
    :class:`~exchange._store.records.Fence` and raise :class:`~exchange.errors.OwnershipLost`
    (writing nothing) when it no longer holds the run.
    """

    def __init__(self, url: str, *, migrate: bool = True, create: bool = True, shared: bool = False) -> None:
        """``create`` and ``shared``: see :class:`~exchange._store.sql.database.Database`."""
        self.db = Database(url, create=create, shared=shared)
        try:
            if migrate:
                self.db.migrate()
            self.db.clock.sync()
        except BaseException:
            self.db.dispose()  # a refused or unreachable store keeps no connection open
            raise
        self.runs = RunTable(self.db)
        self.steps = StepTable(self.db)
        self.mailbox = Mailbox(self.db)
        self.events = EventLog(self.db)
        self.values = RunValues(self.db)
        self.nodes = NodeTable(self.db)
        self.lookup = RunLookup(self.db)  # reads for people: id prefixes, filtered listings
        self.accounts = AccountTable(self.db)  # users, API tokens, console sessions
        self.audit = AuditLog(self.db)  # what people do outside runs (tags written by hand)
        self.templates = TemplateTable(self.db)  # parameter templates (recipes)
        self.control = ControlTable(self.db)  # gateway-wide settings: maintenance mode, retention lease
        self.streams = StreamTable(self.db)  # rt.writeStream's values
        self.plant = PlantStateTable(self.db)  # schedules', triggers' and command tags' shared state
        self.prompts = PromptTable(self.db, self.events)  # operator prompts and their answers
        self.reruns = Reruns(self.db, self.events)  # retry and fork of a run
        self.chains = AuditChains(self.db)  # the check of the runs' audit chains (reads only)

    # Built on first use: a gateway's restart and most commands never read them.
    @functools.cached_property
    def signatures(self) -> SignatureTable:
        """Electronic signatures and releases of runs (events of the runs, in their audit chains)."""
        from exchange._store.runs import SignatureTable

        return SignatureTable(self.db, self.events)

    @functools.cached_property
    def phase_notes(self) -> PhaseNotes:
        """The phases runs command now (``phase.run``'s notes on its steps in progress)."""
        from exchange._store.runs import PhaseNotes

        return PhaseNotes(self.db)

    @functools.cached_property
    def units(self) -> UnitTable:
        """Who holds each unit, who waits for it (one holder per unit)."""
        from exchange._store.runs import UnitTable

        return UnitTable(self.db, self.events)

    @functools.cached_property
    def record_values(self) -> RecordValueTable:
        """The process values of the batch record ([record] tags sampled while a run ran)."""
        from exchange._store.runs import RecordValueTable

        return RecordValueTable(self.db)

    @property
    def url(self) -> str:
        return self.db.shown_url

    @property
    def clock(self) -> StoreClock:
        """The store's clock (leases, sleeps, retry times and deadlines use it)."""
        return self.db.clock

    def create_run(self, new: NewRun, *, holder: Holder | None = None) -> tuple[str, bool]:
        """Insert a run and its creation event; with a used ``dedup_id``, return the existing run.

        With ``holder`` the run is created PENDING and held (lease generation 1). Returns
        ``(run_id, created)``.
        """
        run_id, created, _ = self._create(new, holder, None)
        return run_id, created

    def create_and_claim(
        self, new: NewRun, claimant: Holder, queues: Sequence[str] | None
    ) -> tuple[str, bool, list[r.RunRecord]]:
        """As :meth:`create_run` (ENQUEUED), and in the same commit the claim a dispatcher with one
        free worker would make as ``claimant`` (serving ``queues``): the highest-priority, oldest
        claimable run, this one unless others wait before it; the records of the executions
        started, none when nothing was claimable or a candidate has a partition key (the
        dispatcher's own claim takes those). A start in a gateway with a free worker so costs one
        commit instead of two, and no hand-over to the dispatcher's thread."""
        return self._create(new, None, (claimant, queues))

    def _create(
        self, new: NewRun, holder: Holder | None, claim: tuple[Holder, Sequence[str] | None] | None
    ) -> tuple[str, bool, list[r.RunRecord]]:
        if new.dedup_id is not None:
            existing = self.runs.by_dedup(new.dedup_id)
            if existing is not None:
                return existing, False, []
        sql = self.db.sql

        def write(cur: Cursor) -> Deferred[tuple[str, list[r.RunRecord]]]:
            run_id = self.runs.insert(cur, new, holder=holder)
            sql.events.add_event(cur, run_id, "status", {"status": r.PENDING if holder else r.ENQUEUED,
                                                         "workflow": new.workflow}, new.created_by, None, None)
            if claim is None:
                sql.mail.runs_changed(cur)  # the gateways' watchers learn of it at the commit
                return Deferred(lambda: (run_id, []))
            # No notice: a start claims only in a gateway alone on its store, whose dispatcher the
            # start wakes itself when its run is left to claim (another gateway started meanwhile
            # finds such a run at its next look, within a second).
            taken = self.runs.claim_one_on(cur, *claim)
            return Deferred(lambda: (run_id, taken.read()))

        try:
            # A unit of the group commit, among the requests' (see Database.unit): starts from many
            # threads (the API, children, schedules) share commits, and a start from a client is
            # one round trip and one commit.
            run_id, taken = self.db.unit(write, "a new run", lane="request")
        except StoreDataError as exc:
            if not is_integrity_error(exc.__cause__):
                raise
            if new.dedup_id is not None:
                # Two starts with one deduplication id raced: the loser returns the winner's run.
                existing = self.runs.by_dedup(new.dedup_id)
                if existing is not None:
                    return existing, False, []
            if holder is not None and new.partition_key is not None:
                raise WorkflowError(
                    f"partition key {new.partition_key!r} already has an active run; a run started to "
                    f"execute at once cannot wait for it (start it for a gateway instead)"
                ) from None
            raise
        return run_id, True, taken

    def start_execution(self, fence: Fence, lease_seconds: float) -> r.RunRecord | None:
        """Mark the run RUNNING for the fence's execution, renewing its lease, with a status event
        (one group-commit unit); sets the start time and deadline on the first execution. None
        (nothing written) if the fence no longer holds an active run."""
        sql = self.db.sql.runs
        params = {"now": self.db.clock.now(), "lease_seconds": float(lease_seconds), **fence_params(fence)}

        def write(cur: Cursor) -> Deferred[r.RunRecord | None]:
            return sql.start_execution(cur, fence, params)

        # Fenced in its statements (a row only while the fence holds): no lock is taken first.
        return self.db.unit(write, f"run {fence.run_id}: the start of an execution")

    def finish_run(
        self,
        fence: Fence,
        status: RunStatus,
        *,
        result_json: str | None = None,
        error: tuple[str, str] | None = None,
        traceback_text: str | None = None,
        frees_partition: bool = False,
    ) -> bool:
        """Record the final status and its event (one group-commit unit); False (nothing written)
        when the fence no longer holds the run. ``frees_partition``: the run has a partition key, so
        the gateways' watchers are told to look for its next run (PostgreSQL)."""
        sql = self.db.sql
        now = self.db.clock.now()
        payload: dict[str, Any] = {"status": status}
        if error:
            payload["error"] = {"type": error[0], "message": error[1]}
        if traceback_text:
            payload["traceback"] = traceback_text

        finish_params: dict[str, object] = {
            "status": status, "result": result_json, "error_type": error[0] if error else None,
            "error_message": error[1] if error else None, "now": now, **fence_params(fence),
        }

        def write(cur: Cursor) -> Deferred[bool]:
            if frees_partition:  # delivered at commit, and only if the run's end is committed
                sql.mail.runs_changed(cur)
            return sql.runs.finish(cur, fence, finish_params, payload)

        done: bool = self.db.unit(write, f"run {fence.run_id}: the end of the run ({status})")
        return done

    def record_step_with_events(
        self,
        fence: Fence,
        rec: StepRecord,
        *,
        replace: bool,
        consumed_ids: Sequence[int] = (),
        new_events: Sequence[NewEvent] = (),
        run_fields: dict[str, Any] | None = None,
        outcomes: Mapping[int, tuple[str, str | None]] | None = None,
        label: str | None = None,
    ) -> None:
        """Commit a step outcome together with the messages it consumed, its events and run-row
        fields, atomically, for the execution holding ``fence``. ``outcomes``: per consumed message,
        what became of it and why (see :meth:`~exchange._store.sql.mail_statements.MailStatements.consume`;
        default CONSUMED). ``label`` names the write (errors, fault-injection logs); default: the
        step's outcome or start.

        Every consumed message must still be unconsumed: one that is not was received by another
        execution, so this one is stale (OwnershipLost, nothing written) — a command is delivered once.
        """
        sql = self.db.sql

        def write(cur: Cursor) -> None:
            # Checked before anything is written: a refusal must leave a group commit untouched.
            if consumed_ids and sql.mail.count_unconsumed(cur, consumed_ids) != len(consumed_ids):
                raise OwnershipLost(fence.run_id, "a message it received was consumed by another execution")
            sql.steps.record_step(cur, fence.run_id, rec, replace=replace)
            sql.mail.consume(cur, consumed_ids, rec.seq, outcomes)
            for kind, payload, actor, reason in new_events:
                sql.events.add_event(cur, fence.run_id, kind, payload, actor, reason, rec.seq)
            if run_fields:
                sql.runs.update_run(cur, fence.run_id, run_fields)

        self.db.unit(write, label or outcome_label(rec), fence=fence)
        self.db.stats.steps_recorded += 1

    def record_run_change(
        self,
        fence: Fence,
        *,
        seq: int,
        label: str,
        consumed_ids: Sequence[int] = (),
        new_events: Sequence[NewEvent] = (),
        run_fields: dict[str, Any] | None = None,
        outcomes: Mapping[int, tuple[str, str | None]] | None = None,
    ) -> None:
        """:meth:`record_step_with_events` without a step row: the consumed messages (marked as
        consumed at ``seq``), the events (at ``seq``) and run-row fields in one commit, for the
        execution holding ``fence`` (a run held because its code diverged from its history, whose
        recorded row at ``seq`` must stay as it is). OwnershipLost, nothing written, when a consumed
        message is consumed already."""
        sql = self.db.sql

        def write(cur: Cursor) -> None:
            if consumed_ids and sql.mail.count_unconsumed(cur, consumed_ids) != len(consumed_ids):
                raise OwnershipLost(fence.run_id, "a message it received was consumed by another execution")
            sql.mail.consume(cur, consumed_ids, seq, outcomes)
            for kind, payload, actor, reason in new_events:
                sql.events.add_event(cur, fence.run_id, kind, payload, actor, reason, seq)
            if run_fields:
                sql.runs.update_run(cur, fence.run_id, run_fields)

        self.db.unit(write, label, fence=fence)

    def send_message(
        self, run_id: str, topic: str, payload: Any, *, actor: str | None, reason: str | None,
        event: tuple[str, Any] | None = None,
    ) -> tuple[str | None, int | None]:
        """Post a message to an unfinished run, optionally logging an event in the same commit.

        Returns ``(status, message_id)``: status None for an unknown run, and message_id None when
        the run is already finished (nothing is written then).
        """
        sql = self.db.sql

        def write(cur: Cursor) -> tuple[str | None, int | None]:
            status = sql.runs.status_of(cur, run_id)
            if status is None or status in r.FINAL_STATUSES:
                return status, None
            message_id = sql.mail.add_message(cur, run_id, topic, payload, actor, reason)
            if event is not None:
                sql.events.add_event(cur, run_id, event[0], event[1], actor, reason, None)
            sql.mail.mail_sent(cur, run_id)  # the gateways' mail watchers learn of it at the commit
            return status, message_id

        return self.db.unit(write, "a message", lane="request")

    def request_cancel(self, run_id: str, *, actor: str | None, reason: str | None,
                       signature: dict[str, Any] | None = None) -> str | None:
        """Ask the run to cancel, with a ``cancel`` event (carrying the ``signature`` the cancel
        required, if any: :mod:`exchange._store.runs.signatures`); the run's status, or None."""
        with self.db.transaction("a cancel request") as conn:
            status = self.runs.request_cancel(run_id, reason, conn)
            if status is not None:
                payload: dict[str, Any] = {"status": status}
                if signature is not None:
                    payload["signature"] = signature
                self.events.add(run_id, "cancel", payload, actor=actor, reason=reason, conn=conn)
                self._notify_runs_changed(conn)
        return status

    def _notify_runs_changed(self, conn: Connection) -> None:
        """PostgreSQL: at this transaction's commit, the gateways' watchers learn that a run was
        created or asked to cancel (their claims and cancel relays skip their queries otherwise)."""
        self.db.sql.mail.announce_runs_changed(conn)

    def report_state(self, fence: Fence, state: str, *, actor: str | None, label: str | None = None,
                     extra: dict[str, Any] | None = None) -> None:
        """The run's reported ISA-88 state on its row, with a ``state`` event (``{"state": ...}``
        and the keys of ``extra``: who caused it). ``label`` names the write in errors and fault
        logs (default: the state)."""
        sql = self.db.sql
        now = self.db.clock.now()
        payload = {"state": state, **{k: v for k, v in (extra or {}).items() if k != "state"}}

        def write(cur: Cursor) -> None:
            sql.runs.update_run(cur, fence.run_id, {"state": state, "updated_at": now})
            sql.events.add_event(cur, fence.run_id, "state", payload, actor, None, None)

        self.db.unit(write, label or f"the run's state ({state})", fence=fence)

    def write_progress(
        self, fence: Fence, message: str, extra: Any, *, history_max: int, step_seq: int | None,
        label: str = "progress",
    ) -> None:
        """Latest progress on the run row plus one history event (history capped at ``history_max``)."""
        sql = self.db.sql
        extra_json = None if extra is None else codec.dumps(extra)
        now = self.db.clock.now()
        run_id = fence.run_id

        def write(cur: Cursor) -> None:
            sql.runs.update_run(cur, run_id, {"progress": message, "progress_extra": extra_json, "updated_at": now})
            sql.events.add_event(cur, run_id, "progress", {"message": message, "extra": extra}, None, None, step_seq)
            if history_max > 0:
                sql.events.prune(cur, run_id, "progress", history_max)

        self.db.unit(write, label, fence=fence)

    def close(self) -> None:
        self.db.dispose()


__all__ = ["Store", "StepRecord", "Fence", "Holder", "r"]
