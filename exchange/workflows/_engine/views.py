"""The run as users see it: the object of ``exchange show RUN --json``, ``getRun`` and ``waitFor``."""

from __future__ import annotations

from typing import Any

from exchange._timefmt import iso_utc
from exchange.workflows._store import codec
from exchange.workflows._store.records import RunRecord
from exchange.workflows._store.store import Store


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return iso_utc(ts)


def run_view(store: Store, rec: RunRecord, *, steps: bool = True, events: bool = True) -> dict[str, Any]:
    """A JSON-ready dict of the run; ``steps`` and ``events`` add the lists (one query each)."""
    view: dict[str, Any] = {
        "id": rec.id,
        "workflow": rec.workflow,
        "status": rec.status,
        "state": rec.state,
        "progress": None
        if rec.progress is None
        else {"message": rec.progress, "extra": codec.loads(rec.progress_extra)},
        "params": codec.loads(rec.params),
        "result": codec.loads(rec.result),
        "error": None if rec.error_type is None else {"type": rec.error_type, "message": rec.error_message},
        "queue": rec.queue,
        "partitionKey": rec.partition_key,
        "priority": rec.priority,
        "deduplicationId": rec.dedup_id,
        "timeoutSeconds": rec.timeout_seconds,
        "codeVersion": rec.code_version,
        "owner": rec.owner,
        "createdBy": rec.created_by,
        "cancelRequested": bool(rec.cancel_requested),
        "executions": rec.executions,
        "created_at": iso(rec.created_at),
        "started_at": iso(rec.started_at),
        "finished_at": iso(rec.finished_at),
        "updated_at": iso(rec.updated_at),
    }
    if steps:
        view["steps"] = [
            {
                "seq": s.seq,
                "name": s.name,
                "status": s.status,
                "attempts": s.attempts,
                "output": codec.loads(s.output),
                "error": None if s.error_type is None else {"type": s.error_type, "message": s.error_message},
                "next_attempt_at": iso(s.next_attempt_at),
                "started_at": iso(s.started_at),
                "finished_at": iso(s.finished_at),
            }
            for s in store.steps.load(rec.id).values()
        ]
    if events:
        view["events"] = [
            {
                "id": e.id,
                "kind": e.kind,
                "at": iso(e.at),
                "actor": e.actor,
                "reason": e.reason,
                "step_seq": e.step_seq,
                "payload": codec.loads(e.payload),
            }
            for e in store.events.list(rec.id)
        ]
    return view
