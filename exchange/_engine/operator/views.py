"""The run as users see it: the object of ``exchange show RUN --json``, ``getRun`` and ``waitFor``
(its shape: :class:`~exchange._engine.model.view_types.RunView`).

Every key is snake_case, like every other dict Exchange hands to people (``runs --json``,
``workflows --json``, ``recvCommand``); only the API's method and argument names keep the seed's
camelCase."""

from __future__ import annotations

from typing import Any

from exchange._engine.execution import HELD_STATE, code_hold, held_view
from exchange._engine.model import EventView, HeldOnView, PhaseView, PromptView, RunView, StepView
from exchange._engine.operator.unit_views import run_units
from exchange._store import (
    ACTIVE_STATUSES,
    ANSWERED,
    AWAITING_VERIFICATION,
    STEP_STARTED,
    EventRecord,
    PhaseNoteRow,
    PromptRecord,
    RunRecord,
    StepRecord,
    Store,
    codec,
    phase_note,
)
from exchange._timefmt import iso_utc


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return iso_utc(ts)


IN_DOUBT_KIND = "tag_write_in_doubt"  # the event of a tag write whose answer was lost
PROGRESS_KIND = "progress"


def owner_alive(store: Store, rec: RunRecord) -> bool | None:
    """Whether the process holding an active (PENDING, RUNNING) run still renews its lease, by the
    store's clock; None for a run nobody holds (ENQUEUED, finished). False means its gateway died or
    lost the store: nothing executes the run until a gateway takes it over (see
    :mod:`exchange._engine.gateway.lease_keeper`)."""
    if rec.status not in ACTIVE_STATUSES:
        return None
    return rec.owner is not None and rec.lease_expires_at is not None and rec.lease_expires_at >= store.clock.now()


def run_view(
    store: Store,
    rec: RunRecord,
    *,
    steps: bool = True,
    events: bool = True,
    last_steps: int | None = None,
    last_events: int | None = None,
    hide_progress: bool = False,
) -> RunView:
    """A JSON-ready dict of the run (snake_case keys); ``steps`` and ``events`` add the lists (one
    query each, events the newest 1,000).

    ``last_steps``/``last_events``: only the last N of them, with ``steps_total``/``events_total``
    (how many there are) and, for events, ``events_in_doubt`` (every write in doubt, however old, so
    a shortened list never hides one). ``hide_progress``: leave the progress reports out of the
    events (the latest one is ``progress``)."""
    view: RunView = {
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
        "partition_key": rec.partition_key,
        "priority": rec.priority,
        "deduplication_id": rec.dedup_id,
        "timeout_seconds": rec.timeout_seconds,
        "code_version": rec.code_version,
        "owner": rec.owner,
        "owner_node": rec.owner_node,
        "owner_alive": owner_alive(store, rec),
        "lease_expires_at": iso(rec.lease_expires_at),
        "created_by": rec.created_by,
        "cancel_requested": bool(rec.cancel_requested),
        "executions": rec.executions,
        "created_at": iso(rec.created_at),
        "started_at": iso(rec.started_at),
        "finished_at": iso(rec.finished_at),
        "updated_at": iso(rec.updated_at),
        "parent_run_id": rec.parent_run_id,
        "forked_from": rec.forked_from,
    }
    loaded: list[StepRecord] | None = None  # the steps the view shows: all of them, or the last N
    if steps:
        if last_steps is None:
            loaded = list(store.steps.load(rec.id).values())
        else:
            loaded, view["steps_total"] = store.lookup.last_steps(rec.id, last_steps)
    if steps or events:  # the detailed view: its children, the prompt it waits on, the step it is held on
        view["children"] = [{"id": child_id, "workflow": workflow, "status": status}
                            for child_id, workflow, status in store.runs.children(rec.id)]
        waiting = store.prompts.waiting(run_id=rec.id, limit=1) if rec.status in ACTIVE_STATUSES else []
        view["prompt"] = prompt_view(waiting[0]) if waiting else None
        view["held_on"] = held_on(store, rec)
        view["phase"] = active_phase(store, rec, None if last_steps == 0 else loaded)
        view["units"] = run_units(store, rec.id, finished=rec.finished)
    if loaded is not None:
        view["steps"] = [step_view(s) for s in loaded]
    if events:
        hidden = (PROGRESS_KIND,) if hide_progress else ()
        if last_events is None:
            view["events"] = [_event(e) for e in store.events.list(rec.id) if e.kind not in hidden]
        else:
            shown, view["events_total"] = store.lookup.last_events(rec.id, last_events, hidden_kinds=hidden)
            view["events"] = [_event(e) for e in shown]
            view["events_in_doubt"] = [_event(e) for e in store.lookup.events_of_kind(rec.id, IN_DOUBT_KIND)]
    return view


def prompt_view(rec: PromptRecord) -> PromptView:
    """A prompt as people see it (``show --json``'s ``prompt``, ``exchange prompts --json``)."""
    awaiting = rec.status == AWAITING_VERIFICATION
    return {
        "run": rec.run_id,
        "key": rec.key,
        "text": rec.text,
        "fields": rec.fields,
        "role": rec.role,
        "verify_role": rec.verify_role,
        "status": rec.status,
        "seq": rec.seq,
        "opened_at": iso(rec.opened_at),
        "deadline_at": iso(rec.deadline_at),
        "answered_by": rec.answered_by,
        "answered_at": iso(rec.answered_at),
        "values": rec.answer if awaiting or rec.status == ANSWERED else None,
        "reason": rec.answer_reason,
        "verified_by": rec.verified_by,
    }


def held_on(store: Store, rec: RunRecord) -> HeldOnView | None:
    """The step an unfinished run is held on after a failure (``on_step_error="hold"``), or where its
    history diverges from its code (:mod:`~exchange._engine.execution.code_hold`), or None; a query
    only for a run whose state is HELD."""
    if rec.finished or rec.state != HELD_STATE:
        return None
    if code_hold.is_held_on_code(rec):
        return code_hold.last_hold(store, rec).view()
    step = store.lookup.held_steps([rec.id]).get(rec.id)
    return None if step is None else held_view(step)


def active_phase(store: Store, rec: RunRecord, loaded: list[StepRecord] | None) -> PhaseView | None:
    """The equipment phase the run commands now (``phase.run``'s note on its STARTED row), or None.

    Found among the steps the view ``loaded`` (only a STARTED row's note is decoded: a view of a run
    that follows no phase costs what it did). A step in progress is its run's last one unless the run
    runs steps side by side, so the last N steps hold it; a view that loaded no steps (events only,
    or the last 0) asks the store for it, for an unfinished run only."""
    if rec.finished:
        return None
    if loaded is None:
        found = store.phase_notes.of_run(rec.id)
        return None if found is None else phase_view(found.note, found.started_at)
    for step in reversed(loaded):
        if step.status == STEP_STARTED:
            note = phase_note(step.output)
            if note is not None:
                return phase_view(note, step.started_at)
    return None


def phase_view(note: dict[str, Any], step_started_at: float) -> PhaseView:
    """A phase note (``{"phase", "stage", "state", "held_by", "started_at", ...}``) as people see it."""
    started = note.get("started_at")
    since = started if isinstance(started, int | float) and started > 0 else step_started_at
    return {"name": str(note["phase"]), "stage": note_text(note, "stage"), "state": note_text(note, "state"),
            "held_by": note_text(note, "held_by"), "since": iso(float(since)) if since else None}


def note_text(note: dict[str, Any], key: str) -> str | None:
    """A text field of a phase note, or None (absent, or not text: a note is JSON anyone could write)."""
    value = note.get(key)
    return value if isinstance(value, str) else None


def phase_row_view(row: PhaseNoteRow) -> PhaseView:
    """:func:`phase_view` of a row of :meth:`~exchange._store.Store.phase_notes`."""
    return phase_view(row.note, row.started_at)


def step_view(s: StepRecord) -> StepView:
    """A step as people see it (``show --json``'s ``steps``, the batch record's)."""
    return {
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


def _event(e: EventRecord) -> EventView:
    return {
        "id": e.id,
        "kind": e.kind,
        "at": iso(e.at),
        "actor": e.actor,
        "reason": e.reason,
        "step_seq": e.step_seq,
        "payload": codec.loads(e.payload),
    }
