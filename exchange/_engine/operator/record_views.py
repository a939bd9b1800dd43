"""The batch record of one run: what QA reviews before releasing a batch (``exchange record RUN``,
``GET /api/v1/runs/{id}/record``, the console's printable page), all through ``Runtime.record``.

It is read from what the store already keeps: the run's row, its steps, its audit events (commands,
prompts, tag writes, phases, units, holds, retries, forks) and its command messages with what became
of each. Nothing is written. The JSON (format ``exchange-batch-record``, version 1):

- ``run``: id, workflow, code_version, status, state, params, result, error, created_by, the times,
  executions, parent_run_id, forked_from and ``template`` (``{"name", "version", "by", "at"}`` of the
  parameter template the run was started from, or None);
- ``steps``: every recorded step as ``show --json`` gives it;
- ``commands``: each operator command sent (``cmd``, ``actor``, ``reason``, ``at``, ``outcome``:
  CONSUMED, DROPPED or WAITING, ``note``) and each cancel request (``cmd`` CANCEL);
- ``prompts``: each prompt opened (``key``, ``text``, ``status``, ``values``, ``by``, ``answered_at``,
  ``reason``, ``verified_by``, ``verified_at``, ``sent_back`` (answers a verifier sent back, with who
  and why), ``signatures``);
- ``tag_writes``: each write and method call a step made (``outcome``: written, in_doubt, failed;
  ``called``, ``call_in_doubt``, ``call_failed`` for a method), with tag, value, old value, actor;
- ``phases``: each ``phase.run`` call (``phase``, ``state``, ``parameters`` (by the phase's parameter
  names where the config still names the tag), ``reports``, the times, the ``commands`` sent to the
  PLC and the ``states`` it reported);
- ``units``: each grant (``units``, ``since``, ``until``: None while held);
- ``exceptions``: what a reviewer must look at (``kind``, ``at``, ``detail``, ``actor``, ``reason``,
  ``step_seq``), oldest first; the kinds are :data:`EXCEPTION_KINDS`;
- ``values``: the ``[record]`` tags sampled while the run ran, ``{"interval_ms", "tags", "gaps"}``:
  ``tags`` maps each tag to its kept values ``[[at, value], ...]`` oldest first (a value is kept when
  it changed, and at least every ``keep_alive_ms``; ``value`` null where a read failed), ``gaps``
  each tag's failed reads ``[[at, quality], ...]``; ``interval_ms`` the sampling interval (the
  longest used, when a gateway's config changed during the run), None when nothing was sampled;
  ``complete`` False only when the run kept more than :data:`VALUES_MAX` values (the record then
  holds the first of them, by tag and time);
- ``signatures``: every electronic signature of the run, oldest first (``user``, ``name``,
  ``meaning``, ``action``, ``at``, ``record_hash``, ``audit_head``, ``prompt``, ``event_id``; what
  the hash covers: :mod:`~exchange._engine.operator.signatures`); a prompt's entry lists those of
  its answers and verifications in its own ``signatures``;
- ``audit_head``: the head of the run's hash chain;
- ``events_complete``: False only when the run has more than :data:`EVENTS_MAX` events (the record
  then holds the newest of them).

Times are ISO 8601 UTC with milliseconds, as everywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exchange._config_phases import PhaseConfig
from exchange._engine.model import commands
from exchange._engine.operator.signatures import signature_view, signatures_of
from exchange._engine.operator.views import iso, step_view
from exchange._store import (
    HELD_STEP_STATUSES,
    STEP_ERROR,
    EventRecord,
    MessageFate,
    RunRecord,
    StepRecord,
    Store,
    codec,
)

FORMAT, VERSION = "exchange-batch-record", 1
EVENTS_MAX = 1_000_000  # read at most this many of a run's events (the newest)
COMMANDS_MAX = 100_000
VALUES_MAX = 1_000_000  # process values read at most (by tag, then time)

# The kinds of ``exceptions``, in words for the HTML's heading column.
EXCEPTION_KINDS: dict[str, str] = {
    "failure": "a step or the run failed",
    "retry": "a step was attempted again",
    "hold": "held (by an operator, on a failed step, on its code, or a unit request)",
    "write_in_doubt": "a write or method call whose answer was lost",
    "write_failed": "a write or method call the device refused",
    "command": "an operator command (HOLD, RESUME, STOP, ABORT, RESET, cancel)",
    "command_dropped": "an operator command the run did not accept",
    "answer_sent_back": "a prompt's answer sent back by its verifier",
    "answer_refused": "an answer refused for breaking its field (out of range, not a choice...)",
    "prompt_closed": "a prompt that ended unanswered (timed out or closed)",
    "code_change": "the run went on under another code version",
    "code_held": "the code diverged from the run's history",
    "executed_again": "the run was executed again after a restart or takeover",
    "run_retried": "the run was retried after it failed or was cancelled",
    "forked": "the run is a fork of another run",
}
_WRITE_OUTCOMES = {"tag_write": "written", "tag_write_in_doubt": "in_doubt", "tag_write_failed": "failed",
                   "method_call": "called", "method_call_in_doubt": "call_in_doubt",
                   "method_call_failed": "call_failed"}
_PHASE_STEP = "phase.run"


def build_record(store: Store, rec: RunRecord, phases: Mapping[str, PhaseConfig]) -> dict[str, Any]:
    """The batch record of run ``rec`` (see the module's docstring); ``phases``: the config's, to
    name a phase's parameters."""
    events = store.events.list(rec.id, limit=EVENTS_MAX)
    steps = list(store.steps.load(rec.id).values())
    decoded = [(e, codec.loads(e.payload)) for e in events]
    topics = sorted({commands.COMMAND_TOPIC} | {str(p.get("topic")) for e, p in decoded
                                                if e.kind == "command_sent" and isinstance(p, dict) and p.get("topic")})
    messages = store.mailbox.fates_of_run(rec.id, topics, COMMANDS_MAX)
    tag_writes = _tag_writes(decoded)
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": _run(rec, decoded),
        "steps": [step_view(s) for s in steps],
        "commands": _commands(messages, decoded),
        "prompts": _prompts(decoded),
        "tag_writes": tag_writes,
        "phases": _phases(steps, decoded, tag_writes, phases),
        "units": _units(decoded),
        "exceptions": _exceptions(rec, steps, decoded),
        "values": _values(store, rec),
        "signatures": signatures_of(decoded),
        "audit_head": store.chains.head(rec.id),
        "events_complete": len(events) < EVENTS_MAX,
    }


def review_parts(store: Store, rec: RunRecord) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``exceptions`` and ``signatures`` of the record of run ``rec``, as :func:`build_record`
    gives them, read from its events and steps only: a review lists many runs, and needs neither
    their process values nor their commands' fates."""
    decoded = [(e, codec.loads(e.payload)) for e in store.events.list(rec.id, limit=EVENTS_MAX)]
    steps = list(store.steps.load(rec.id).values())
    return _exceptions(rec, steps, decoded), signatures_of(decoded)


Decoded = list[tuple[EventRecord, Any]]


def _dict(payload: Any) -> dict[str, Any]:
    return payload if isinstance(payload, dict) else {}


def _run(rec: RunRecord, decoded: Decoded) -> dict[str, Any]:
    template = next(({"name": p.get("name"), "version": p.get("version"), "by": e.actor, "at": iso(e.at)}
                     for e, p in ((e, _dict(p)) for e, p in decoded) if e.kind == "template"), None)
    return {
        "id": rec.id, "workflow": rec.workflow, "code_version": rec.code_version, "status": rec.status,
        "state": rec.state, "params": codec.loads(rec.params), "result": codec.loads(rec.result),
        "error": None if rec.error_type is None else {"type": rec.error_type, "message": rec.error_message},
        "created_by": rec.created_by, "created_at": iso(rec.created_at), "started_at": iso(rec.started_at),
        "finished_at": iso(rec.finished_at), "updated_at": iso(rec.updated_at), "executions": rec.executions,
        "queue": rec.queue, "partition_key": rec.partition_key, "parent_run_id": rec.parent_run_id,
        "forked_from": rec.forked_from, "template": template,
    }


def _values(store: Store, rec: RunRecord) -> dict[str, Any]:
    tags: dict[str, list[list[Any]]] = {}
    gaps: dict[str, list[list[Any]]] = {}
    interval_ms: int | None = None
    samples = store.record_values.of_run(rec.id, VALUES_MAX)
    for sample in samples:
        at = iso(sample.at)
        tags.setdefault(sample.tag, []).append([at, sample.value])
        if sample.quality is not None:
            gaps.setdefault(sample.tag, []).append([at, sample.quality])
        interval_ms = max(interval_ms or 0, sample.interval_ms)
    return {"interval_ms": interval_ms, "tags": tags, "gaps": gaps, "complete": len(samples) < VALUES_MAX}


def _commands(messages: list[MessageFate], decoded: Decoded) -> list[dict[str, Any]]:
    """Each command message sent to the run with its fate, and each cancel request, oldest first."""
    found: list[tuple[float, dict[str, Any]]] = []
    for fate in messages:
        command = commands.Command.from_payload(fate.id, codec.loads(fate.payload), sent_at=fate.sent_at)
        if fate.consumed_at is None:
            outcome, note = "WAITING", None
        else:
            outcome, note = fate.outcome or "CONSUMED", fate.outcome_note
        found.append((fate.sent_at, {"cmd": command.shown, "actor": command.actor, "reason": command.reason,
                                     "at": iso(fate.sent_at), "outcome": outcome, "note": note,
                                     "received_at": iso(fate.consumed_at), "message_id": fate.id}))
    for event, payload in decoded:
        if event.kind == "cancel":
            found.append((event.at, {"cmd": "CANCEL", "actor": event.actor, "reason": event.reason,
                                     "at": iso(event.at), "outcome": _dict(payload).get("status"), "note": None,
                                     "received_at": None, "message_id": None}))
    return [view for _at, view in sorted(found, key=lambda pair: pair[0])]


def _prompts(decoded: Decoded) -> list[dict[str, Any]]:
    """Each prompt opened, as its events tell it (a key asked twice is two entries)."""
    opened: list[dict[str, Any]] = []
    latest: dict[str, dict[str, Any]] = {}  # key -> its newest entry
    for event, raw in decoded:
        payload = _dict(raw)
        if not event.kind.startswith("prompt_"):
            continue
        key = str(payload.get("key"))
        if event.kind == "prompt_opened":
            opened.append({"key": key, "text": payload.get("text"), "step_seq": event.step_seq,
                           "role": payload.get("role"), "verify_role": payload.get("verify_role"),
                           "opened_at": iso(event.at), "status": "OPEN", "values": None, "by": None,
                           "answered_at": None, "reason": None, "verified_by": None, "verified_at": None,
                           "sent_back": [], "signatures": []})
            latest[key] = opened[-1]
            continue
        entry = latest.get(key)
        if entry is None:  # its opening is older than the events read
            continue
        if isinstance(payload.get("signature"), dict):
            entry["signatures"].append(signature_view(event, payload["signature"], key))
        if event.kind == "prompt_answered":
            entry.update(values=payload.get("values"), by=event.actor, answered_at=iso(event.at),
                         reason=event.reason,
                         status="AWAITING_VERIFICATION" if payload.get("verification") else "ANSWERED")
        elif event.kind == "prompt_verified":
            entry.update(verified_by=event.actor, verified_at=iso(event.at), status="ANSWERED")
        elif event.kind == "prompt_rejected":
            entry["sent_back"].append({"values": entry["values"], "by": entry["by"], "sent_back_by": event.actor,
                                       "at": iso(event.at), "reason": event.reason})
            entry.update(values=None, by=None, answered_at=None, reason=None, status="OPEN")
        elif event.kind == "prompt_closed":
            entry.update(status=payload.get("status"), closed_why=event.reason)
    return opened


def _tag_writes(decoded: Decoded) -> list[dict[str, Any]]:
    writes = []
    for event, raw in decoded:
        outcome = _WRITE_OUTCOMES.get(event.kind)
        if outcome is None:
            continue
        payload = _dict(raw)
        writes.append({
            "at": iso(event.at), "tag": payload.get("tag"), "value": payload.get("value"),
            "old_value": payload.get("old_value"), "outcome": outcome, "quality": payload.get("quality"),
            "method": payload.get("method"), "arguments": payload.get("arguments"),
            "error": payload.get("error"), "resolution": payload.get("resolution"),
            "device": payload.get("device"), "address": payload.get("address"),
            "step_seq": event.step_seq, "step": payload.get("step"), "attempt": payload.get("attempt"),
            "actor": event.actor,
        })
    return writes


def _phases(steps: list[StepRecord], decoded: Decoded, writes: list[dict[str, Any]],
            configured: Mapping[str, PhaseConfig]) -> list[dict[str, Any]]:
    """Each ``phase.run`` call: its outcome, the parameters written before Start, the commands sent
    to the PLC and the states it reported."""
    found = []
    for step in steps:
        if step.name != _PHASE_STEP:
            continue
        output = _dict(codec.loads(step.output))
        name = output.get("phase")
        at_step = [(e, _dict(p)) for e, p in decoded if e.step_seq == step.seq]
        if name is None:  # a call still in progress, or one that failed before recording an outcome
            name = next((p.get("phase") for e, p in at_step if e.kind in ("phase_command", "phase_state")), None)
        config = configured.get(str(name))
        by_tag = {tag: param for param, tag in config.params.items()} if config is not None else {}
        parameters: dict[str, Any] = {}
        for write in writes:
            if write["step_seq"] == step.seq and write["tag"] in by_tag:
                parameters[by_tag[write["tag"]]] = write["value"]
        found.append({
            "seq": step.seq, "phase": name, "status": step.status, "state": output.get("state"),
            "parameters": parameters, "reports": output.get("reports") or {},
            "started_at": output.get("started_at"), "finished_at": output.get("finished_at"),
            "error": None if step.error_type is None else {"type": step.error_type, "message": step.error_message},
            "commands": [{"command": p.get("command"), "cmd": p.get("cmd"), "why": p.get("why"),
                          "actor": p.get("caused_by") or e.actor, "at": iso(e.at)}
                         for e, p in at_step if e.kind == "phase_command"],
            "states": [{"state": p.get("state"), "at": iso(e.at)} for e, p in at_step if e.kind == "phase_state"],
        })
    return found


def _units(decoded: Decoded) -> list[dict[str, Any]]:
    held: list[dict[str, Any]] = []
    by_request: dict[Any, dict[str, Any]] = {}
    for event, raw in decoded:
        payload = _dict(raw)
        if event.kind == "unit_granted":
            entry = {"units": payload.get("units"), "request": payload.get("request"), "step_seq": event.step_seq,
                     "since": iso(event.at), "until": None, "released_why": None}
            held.append(entry)
            by_request[payload.get("request")] = entry
        elif event.kind == "unit_released" and payload.get("request") in by_request:
            by_request[payload.get("request")].update(until=iso(event.at), released_why=event.reason)
    return held


def _exception(kind: str, event: EventRecord | None, detail: str, *, at: float | None = None,
               step_seq: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "at": iso(event.at if event is not None else at), "detail": detail,
            "actor": None if event is None else event.actor, "reason": None if event is None else event.reason,
            "step_seq": step_seq if event is None else event.step_seq}


def _exceptions(rec: RunRecord, steps: list[StepRecord], decoded: Decoded) -> list[dict[str, Any]]:
    """What a reviewer must look at, oldest first: from the events, then the failed steps and the
    run's own error."""
    found: list[dict[str, Any]] = []
    retried = False  # the next execution is the retry's, not a restart's
    for event, raw in decoded:
        payload = _dict(raw)
        item = _event_exception(event, payload)
        if item is None:
            continue
        if item["kind"] == "executed_again" and retried:
            retried = False
            continue
        retried = item["kind"] == "run_retried" or retried
        found.append(item)
    for step in steps:
        if step.status == STEP_ERROR or step.status in HELD_STEP_STATUSES:
            found.append(_exception("failure", None, f"step {step.seq} {step.name} {step.status} after "
                                    f"{step.attempts} attempt(s): {step.error_type}: {step.error_message}",
                                    at=step.finished_at or step.started_at, step_seq=step.seq))
    if rec.error_type is not None:
        found.append(_exception("failure", None, f"the run ended {rec.status}: {rec.error_type}: {rec.error_message}",
                                at=rec.finished_at or rec.updated_at))
    return sorted(found, key=lambda item: item["at"] or "")


def _event_exception(event: EventRecord, payload: dict[str, Any]) -> dict[str, Any] | None:  # noqa: C901
    kind = event.kind
    if kind == "retry":
        return _exception("retry", event, f"step {payload.get('step')} attempt {payload.get('attempt')} failed "
                                          f"({payload.get('error')}); again in {payload.get('delay_seconds')} s")
    if kind == "command":
        where = f" (phase {payload['phase']})" if payload.get("phase") else ""
        return _exception("hold" if payload.get("cmd") == "HOLD" else "command", event,
                          f"{payload.get('cmd')} accepted in state {payload.get('state')}{where}")
    if kind == "command_dropped":
        dropped = _exception("command_dropped", event, f"{payload.get('cmd')} dropped in state "
                                                       f"{payload.get('state')}: {event.reason}")
        dropped["reason"] = None  # the event's reason says why it was dropped; the sender's is in ``commands``
        return dropped
    if kind == "cancel":
        return _exception("command", event, f"cancel requested (the run was {payload.get('status')})")
    if kind == "step_held":
        error = _dict(payload.get("error"))
        return _exception("hold", event, f"held on failed step {payload.get('seq')} {payload.get('step')}: "
                                         f"{error.get('type')}: {error.get('message')}"
                                         + (" (its side effect in doubt)" if payload.get("in_doubt") else ""))
    if kind == "code_held":
        return _exception("code_held", event, str(payload.get("detail")))
    if kind == "unit_request_held":
        return _exception("hold", event, f"the request for {payload.get('wanted')} held by a HOLD")
    if kind in ("tag_write_in_doubt", "method_call_in_doubt"):
        what = payload.get("method") or f"write of {payload.get('value')!r}"
        return _exception("write_in_doubt", event, f"{payload.get('tag')}: {what}: {payload.get('error')} "
                                                   f"({payload.get('resolution')})")
    if kind in ("tag_write_failed", "method_call_failed"):
        what = payload.get("method") or f"write of {payload.get('value')!r}"
        return _exception("write_failed", event, f"{payload.get('tag')}: {what}: {payload.get('error')}")
    if kind == "prompt_rejected":
        return _exception("answer_sent_back", event, f"the answer to {payload.get('key')} was sent back")
    if kind == "answer_refused":
        return _exception("answer_refused", event, f"an answer to {payload.get('key')} was refused: field "
                                                   f"{payload.get('field')}: {payload.get('problem')} "
                                                   f"(given {payload.get('given')})")
    if kind == "prompt_closed":
        return _exception("prompt_closed", event, f"prompt {payload.get('key')} ended {payload.get('status')}")
    if kind == "code_version":
        return _exception("code_change", event, f"recorded under {payload.get('recorded')}, "
                                                f"executed now by {payload.get('now')}")
    if kind == "status" and isinstance(payload.get("execution"), int) and payload["execution"] > 1:
        return _exception("executed_again", event, f"execution {payload['execution']} of the run")
    if kind == "retried":
        step = _dict(payload.get("step"))
        where = f" from step {step.get('seq')} {step.get('name')}" if step else ""
        error = _dict(payload.get("error"))
        was = f" ({error.get('type')}: {error.get('message')})" if error else ""
        return _exception("run_retried", event, f"the {payload.get('status')} run{was} was executed again{where}")
    if kind == "forked":
        return _exception("forked", event, f"a fork of run {payload.get('from_run')} from step "
                                           f"{payload.get('from_step')} ({payload.get('steps_copied')} "
                                           f"step(s) copied)")
    return None
