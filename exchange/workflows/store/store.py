"""The system store: one database, its tables as small objects, and the few multi-table writes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError

from exchange.errors import StoreError
from exchange.workflows.store import codec
from exchange.workflows.store import records as r
from exchange.workflows.store.database import Database
from exchange.workflows.store.messages import EventLog, Mailbox, RunValues
from exchange.workflows.store.records import StepRecord
from exchange.workflows.store.runs import NewRun, RunTable
from exchange.workflows.store.steps import StepTable


class Store:
    """Open (and migrate) the store at ``url``.

    Composition: ``runs``, ``steps``, ``mailbox``, ``events`` and ``values`` each own one table; the
    methods here are the writes that must span several tables in one transaction.
    """

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.db = Database(url)
        if migrate:
            self.db.migrate()
        self.runs = RunTable(self.db)
        self.steps = StepTable(self.db)
        self.mailbox = Mailbox(self.db)
        self.events = EventLog(self.db)
        self.values = RunValues(self.db)

    @property
    def url(self) -> str:
        return self.db.shown_url

    def create_run(self, new: NewRun, *, owner: str | None = None) -> tuple[str, bool]:
        """Insert a run and its creation event; with a used ``dedup_id``, return the existing run.

        Returns ``(run_id, created)``.
        """
        if new.dedup_id is not None:
            existing = self.runs.by_dedup(new.dedup_id)
            if existing is not None:
                return existing, False
        try:
            with self.db.write() as conn:
                run_id = self.runs.create(new, owner=owner, conn=conn)
                self.events.add(
                    run_id, "status", {"status": r.PENDING if owner else r.ENQUEUED, "workflow": new.workflow},
                    actor=new.created_by, conn=conn,
                )
        except StoreError as exc:
            if new.dedup_id is not None and isinstance(exc.__cause__, IntegrityError):
                # Two starts with one deduplication id raced: the loser returns the winner's run.
                existing = self.runs.by_dedup(new.dedup_id)
                if existing is not None:
                    return existing, False
            raise
        return run_id, True

    def start_execution(self, run_id: str, owner: str) -> r.RunRecord | None:
        """Mark the run RUNNING for ``owner`` (with a status event); None if it is not ours to run."""
        with self.db.write() as conn:
            rec = self.runs.mark_running(run_id, owner, conn)
            if rec is not None:
                self.events.add(
                    run_id, "status", {"status": r.RUNNING, "execution": rec.executions, "owner": owner},
                    actor=owner, conn=conn,
                )
        return rec

    def finish_run(
        self,
        run_id: str,
        status: str,
        *,
        owner: str | None,
        result_json: str | None = None,
        error: tuple[str, str] | None = None,
        traceback_text: str | None = None,
    ) -> bool:
        """Record the final status and its event; False when ``owner`` no longer holds the run."""
        with self.db.write() as conn:
            done = self.runs.finish(
                run_id, status, owner=owner, result_json=result_json,
                error_type=error[0] if error else None, error_message=error[1] if error else None, conn=conn,
            )
            if done:
                payload: dict[str, Any] = {"status": status}
                if error:
                    payload["error"] = {"type": error[0], "message": error[1]}
                if traceback_text:
                    payload["traceback"] = traceback_text
                self.events.add(run_id, "status", payload, actor=owner, conn=conn)
        return done

    def record_step_with_events(
        self,
        run_id: str,
        rec: StepRecord,
        *,
        replace: bool,
        consumed_ids: Sequence[int] = (),
        new_events: Sequence[tuple[str, Any, str | None, str | None]] = (),
        run_fields: dict[str, Any] | None = None,
    ) -> None:
        """Commit a step outcome together with the messages it consumed and its events, atomically."""
        raw = self.db.raw
        with self.db.raw_transaction() as cur:
            raw.record_step(cur, run_id, rec, replace=replace)
            raw.consume(cur, consumed_ids, rec.seq)
            for kind, payload, actor, reason in new_events:
                raw.add_event(cur, run_id, kind, payload, actor, reason, rec.seq)
            if run_fields:
                raw.update_run(cur, run_id, run_fields)

    def send_message(
        self, run_id: str, topic: str, payload: Any, *, actor: str | None, reason: str | None,
        event: tuple[str, Any] | None = None,
    ) -> tuple[str | None, int | None]:
        """Post a message to an unfinished run, optionally logging an event in the same commit.

        Returns ``(status, message_id)``: status None for an unknown run, and message_id None when
        the run is already finished (nothing is written then).
        """
        raw = self.db.raw
        with self.db.raw_transaction() as cur:
            status = raw.status_of(cur, run_id)
            if status is None or status in r.FINAL_STATUSES:
                return status, None
            message_id = raw.add_message(cur, run_id, topic, payload, actor, reason)
            if event is not None:
                raw.add_event(cur, run_id, event[0], event[1], actor, reason, None)
        return status, message_id

    def request_cancel(self, run_id: str, *, actor: str | None, reason: str | None) -> str | None:
        with self.db.write() as conn:
            status = self.runs.request_cancel(run_id, reason, conn)
            if status is not None:
                self.events.add(
                    run_id, "cancel", {"status": status}, actor=actor, reason=reason, conn=conn
                )
        return status

    def write_progress(
        self, run_id: str, message: str, extra: Any, *, history_max: int, step_seq: int | None
    ) -> None:
        """Latest progress on the run row plus one history event (history capped at ``history_max``)."""
        extra_json = None if extra is None else codec.dumps(extra)
        with self.db.write() as conn:
            self.runs.set_fields(
                run_id, conn=conn, progress=message, progress_extra=extra_json, updated_at=time.time()
            )
            self.events.add(
                run_id, "progress", {"message": message, "extra": extra}, step_seq=step_seq, conn=conn
            )
            if history_max > 0:
                self.events.prune(run_id, "progress", history_max, conn)

    def close(self) -> None:
        self.db.dispose()


__all__ = ["Store", "StepRecord", "r"]
