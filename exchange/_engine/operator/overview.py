"""Reads for people watching the plant (the console, the API): a run's progress history and the
queues' counts. One query each; nothing here changes anything."""

from __future__ import annotations

from typing import Any

from exchange._engine.operator.run_lookup import resolve_run_id
from exchange._engine.operator.runtime import Runtime
from exchange._engine.operator.views import PROGRESS_KIND
from exchange._store import codec
from exchange._store import records as r
from exchange._timefmt import iso_utc


def progress_history(runtime: Runtime, run_id: str) -> list[dict[str, Any]]:
    """The run's recorded progress reports, oldest first: ``{"at", "message", "extra"}`` (the
    newest ``engine.progress_history_max`` of them). UnknownRun, AmbiguousRun for the id."""
    whole_id = resolve_run_id(runtime.store, run_id)
    runtime.get_run(whole_id, steps=False, events=False)  # UnknownRun for an id nobody has
    history = []
    for event in runtime.store.lookup.events_of_kind(whole_id, PROGRESS_KIND):
        payload = codec.loads(event.payload)
        payload = payload if isinstance(payload, dict) else {}
        history.append({"at": iso_utc(event.at), "message": payload.get("message"), "extra": payload.get("extra")})
    return history


def queue_counts(runtime: Runtime) -> list[dict[str, Any]]:
    """Per queue (by name): its runs by status, and how many are waiting (ENQUEUED) or unfinished."""
    return [
        {"queue": queue, "counts": counts, "waiting": counts.get(r.ENQUEUED, 0),
         "unfinished": sum(counts.get(status, 0) for status in r.UNFINISHED_STATUSES), "total": sum(counts.values())}
        for queue, counts in sorted(runtime.store.lookup.count_by_queue_and_status().items())
    ]
