"""Retry and fork of a run: what each changes in the store, in one transaction.

A **retry** puts an ERROR or CANCELLED run back in the queue under the same id, for any gateway to
claim: status ENQUEUED; result, error, finish time, cancel flag, owner and deadline cleared (the
first execution after it sets a fresh deadline from ``timeout_seconds``); queue, partition key,
priority, parameters, state and progress kept. The run's last step row decides what runs again:

- SUCCESS (the body failed or was cancelled between steps): nothing is reset; every recorded step
  replays, and the run goes on from where its body stopped (a sleep in flight keeps its recorded
  wake-up time, as after a crash).
- ERROR, or RETRYING (cancelled during a backoff): the row becomes RETRYING with ``attempts = 0``
  and no next-attempt time, so the step runs again at once with fresh attempts (its retry policy
  counts from 1). Other ERROR rows stay: they are outcomes the workflow went past.
- ERROR whose last attempt had begun its side effect (``side_effect``), or STARTED (cancelled
  inside a side effect): the row becomes STARTED with ``attempts = 1``: the step runs again as
  *resumed in doubt*, exactly as after a crash (a tag write is resolved by its ``on_doubt`` before
  anything is sent again).
- HELD (a run cancelled while held on a failed step, ``on_step_error="hold"``): as ERROR, and
  HELD_IN_DOUBT as a side effect begun; the run's state goes from HELD to RUNNING, as a RESUME would
  set it.

When a step is reset, the run's quiet tail (idle polls after it) is cleared if it lies at or after
that step: those answers belonged to the path the failure took.

A **fork** creates a new ENQUEUED run (``forked_from`` names its origin) of the same workflow,
parameters, queue, partition key, priority and timeout, created by the actor, with copies of the
origin's step rows whose sequence number is below ``from_step`` (outputs, errors, quiet counts as
recorded). The origin is only read. Messages, events, values, streams and children stay with the
origin. Every step copied must have an outcome (SUCCESS or ERROR): a RETRYING or STARTED row
(a step under way, or in doubt) cannot be cut off into another run.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

from sqlalchemy import Connection, func, insert, literal, select, update

from exchange._store import records as r
from exchange._store.records import StepRecord
from exchange._store.runs.messages import EventLog
from exchange._store.sql import Database
from exchange._store.tables import runs, steps
from exchange.errors import InvalidArgument, UnknownRun, WorkflowError

RETRYABLE_STATUSES = (r.ERROR, r.CANCELLED)
RETRIED_EVENT = "retried"  # in the retried run
FORKED_EVENT = "forked"  # in the new run of a fork


@dataclass(frozen=True)
class RetriedStep:
    """The step a retry runs again: its position, name, the status its row had, and whether it
    runs as resumed in doubt."""

    seq: int
    name: str
    status: str
    in_doubt: bool


@dataclass(frozen=True)
class Retried:
    """What a retry changed: the run's status and error before it, and the step reset (None when
    the last step had succeeded, or the run had no step)."""

    status: r.RunStatus
    error_type: str | None
    error_message: str | None
    step: RetriedStep | None


@dataclass(frozen=True)
class Forked:
    """A fork: the new run's id and how many step rows were copied into it."""

    run_id: str
    steps_copied: int


class Reruns:
    """Retry and fork (see the module docstring); each one write transaction."""

    def __init__(self, db: Database, events: EventLog) -> None:
        self.db = db
        self.events = events

    def retry(self, run_id: str, *, actor: str, reason: str | None) -> Retried:
        """Put ``run_id`` back in the queue (see the module docstring). UnknownRun; WorkflowError
        naming its status when it is not ERROR or CANCELLED (nothing changed)."""
        now = self.db.clock.now()
        with self.db.transaction(f"run {run_id}: a retry") as conn:
            row = conn.execute(
                select(runs.c.status, runs.c.error_type, runs.c.error_message, runs.c.quiet_after_seq)
                .where(runs.c.id == run_id).with_for_update()
            ).first()
            if row is None:
                raise UnknownRun(run_id)
            if row.status not in RETRYABLE_STATUSES:
                raise WorkflowError(f"run {run_id} is {row.status}: only an ERROR or CANCELLED run can be retried; "
                                    f"nothing changed")
            values: dict[str, object] = dict(
                status=r.ENQUEUED, result=None, error_type=None, error_message=None, finished_at=None,
                updated_at=now, cancel_requested=0, cancel_reason=None, owner=None, owner_node=None,
                lease_expires_at=None, deadline_at=None,
            )
            step = self._reset_last_step(conn, run_id, now)
            if step is not None and row.quiet_after_seq is not None and row.quiet_after_seq >= step.seq:
                values.update(quiet_after_seq=None, quiet_ops=None, quiet_wake_at=None)
            conn.execute(update(runs).where(runs.c.id == run_id).values(**values))
            error = None if row.error_type is None else {"type": row.error_type, "message": row.error_message}
            payload = {"status": row.status, "error": error, "step": None if step is None else {
                "seq": step.seq, "name": step.name, "status": step.status, "in_doubt": step.in_doubt}}
            self.events.add(run_id, "status", {"status": r.ENQUEUED, "retry": True}, actor=actor, conn=conn)
            self.events.add(run_id, RETRIED_EVENT, payload, actor=actor, reason=reason, conn=conn)
            self._notify_runs_changed(conn)
        return Retried(row.status, row.error_type, row.error_message, step)

    def _reset_last_step(self, conn: Connection, run_id: str, now: float) -> RetriedStep | None:
        last = conn.execute(
            select(steps).where(steps.c.run_id == run_id).order_by(steps.c.seq.desc()).limit(1)
        ).first()
        if last is None or last.status == r.STEP_SUCCESS:
            return None
        in_doubt = (last.status in (r.STEP_STARTED, r.STEP_HELD_IN_DOUBT)
                    or (last.status == r.STEP_ERROR and bool(last.side_effect)))
        if last.status in r.HELD_STEP_STATUSES:  # cancelled while held on its failure: the retry resumes it
            conn.execute(update(runs).where(runs.c.id == run_id).values(state="RUNNING"))
        fresh = dataclasses.replace(StepRecord.from_row(last), next_attempt_at=None, started_at=now,
                                    finished_at=None, side_effect=False)
        if in_doubt:  # an attempt 1 cut off in its side effect: the stepper runs it as resumed in doubt
            fresh = dataclasses.replace(fresh, status=r.STEP_STARTED, attempts=1, error_type=None,
                                        error_message=None, error_blob=None)
        else:  # a RETRYING row before any attempt: the first attempt starts at once
            fresh = dataclasses.replace(fresh, status=r.STEP_RETRYING, attempts=0)
        # written again as a link of the run's audit chain (sql.step_statements)
        self.db.sql.steps.record_step_in(conn, run_id, fresh, replace=True)
        return RetriedStep(int(last.seq), str(last.name), str(last.status), in_doubt)

    def fork(self, run_id: str, from_step: int, *, actor: str, reason: str | None) -> Forked:
        """A new run of ``run_id``'s workflow and parameters with its steps below ``from_step``
        copied (see the module docstring). UnknownRun; InvalidArgument when ``from_step`` is not
        from 1 to the last recorded sequence number + 1; WorkflowError when a step to copy has no
        outcome yet. Nothing is written on any of these."""
        now = self.db.clock.now()
        with self.db.transaction(f"run {run_id}: a fork from step {from_step}") as conn:
            src = conn.execute(select(runs).where(runs.c.id == run_id)).first()
            if src is None:
                raise UnknownRun(run_id)
            last_seq = int(conn.execute(select(func.coalesce(func.max(steps.c.seq), 0))
                                        .where(steps.c.run_id == run_id)).scalar_one())
            if not 1 <= from_step <= last_seq + 1:
                raise InvalidArgument(
                    f"fork: from_step {from_step} is outside 1..{last_seq + 1}: run {run_id} has {last_seq} "
                    f"recorded step(s), and a fork copies the steps before from_step")
            open_step = conn.execute(
                select(steps.c.seq, steps.c.name, steps.c.status)
                .where(steps.c.run_id == run_id, steps.c.seq < from_step,
                       steps.c.status.not_in([r.STEP_SUCCESS, r.STEP_ERROR]))
                .order_by(steps.c.seq).limit(1)
            ).first()
            if open_step is not None:
                raise WorkflowError(
                    f"fork: step {open_step.seq} ({open_step.name!r}) of run {run_id} has no recorded outcome "
                    f"({open_step.status}: under way or in doubt); fork from step {open_step.seq} or earlier")
            new_id = str(uuid.uuid4())
            conn.execute(insert(runs).values(
                id=new_id, workflow=src.workflow, status=r.ENQUEUED, params=src.params, queue=src.queue,
                partition_key=src.partition_key, priority=src.priority, timeout_seconds=src.timeout_seconds,
                code_version=src.code_version, lease_generation=0, cancel_requested=0, created_by=actor,
                created_at=now, updated_at=now, executions=0, forked_from=run_id,
            ))
            copying = (steps.c.run_id == run_id, steps.c.seq < from_step)
            copied = int(conn.execute(select(func.count()).where(*copying)).scalar_one())
            # the copies are not links of the fork's audit chain (their links are the origin's)
            columns = [c for c in steps.c if c.name != "run_id" and not c.name.startswith("chain_")]
            conn.execute(insert(steps).from_select(
                ["run_id", *(c.name for c in columns)],
                select(literal(new_id, type_=steps.c.run_id.type), *columns).where(*copying),
            ))
            self.events.add(new_id, "status", {"status": r.ENQUEUED, "workflow": src.workflow}, actor=actor,
                            conn=conn)
            self.events.add(new_id, FORKED_EVENT, {"from_run": run_id, "from_step": from_step,
                                                   "steps_copied": copied}, actor=actor, reason=reason, conn=conn)
            self._notify_runs_changed(conn)
        return Forked(new_id, copied)

    def _notify_runs_changed(self, conn: Connection) -> None:
        """PostgreSQL: at the commit, the gateways' watchers learn that a run is enqueued."""
        self.db.sql.mail.announce_runs_changed(conn)
