"""What the pages show, computed from the runtime's run dictionaries: which commands a state allows,
the trend series of a run's progress, step durations, status classes.

Colours follow ISA-101 habits: normal is grey, colour marks only what is abnormal (ERROR, a held
or stopped run, a run nobody executes, a write in doubt), so the eye goes where it is needed.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from exchange._auth.roles import ANSWER, VERIFY, Roles
from exchange._engine import ALLOWED_IN, COMMANDS, CommandName, EventView, PromptView, RunView, allowed
from exchange._store import ALL_STATUSES, FINAL_STATUSES

FINISHED = FINAL_STATUSES
RETRYABLE = ("ERROR", "CANCELLED")  # the statuses a retry takes (the Retry button)
# How an operator reads them, left to right: the harder the stop, the further right, then RESET.
BUTTON_ORDER: tuple[CommandName, ...] = ("HOLD", "RESUME", "STOP", "ABORT", "RESET")
TREND_SERIES_MAX = 6
_ABNORMAL_STATES = {"HELD", "HOLDING", "STOPPED", "STOPPING", "ABORTED", "ABORTING", "ERROR"}

assert set(BUTTON_ORDER) == set(COMMANDS)


def status_class(status: str) -> str:
    """The CSS class of a run status: ``abnormal`` for ERROR, ``quiet`` for the normal ones."""
    return "abnormal" if status == "ERROR" else "quiet"


def state_class(state: str | None) -> str:
    """The CSS class of an ISA-88 state: ``attention`` for held and stopped states."""
    return "attention" if state and state.upper() in _ABNORMAL_STATES else "quiet"


def command_rules() -> dict[str, list[str]]:
    """Per command, the states that accept it (``["*"]``: any); the page's script enables buttons by it."""
    return {cmd: sorted(ALLOWED_IN[cmd]) for cmd in BUTTON_ORDER}


def enabled_commands(run: RunView) -> dict[str, bool]:
    """Which command buttons are enabled for the run as it is now (none once it finished)."""
    if run["status"] in FINISHED:
        return {cmd: False for cmd in BUTTON_ORDER}
    state = (run.get("state") or "").upper()
    return {cmd: allowed(cmd, state) for cmd in BUTTON_ORDER}


def fork_from(run: dict[str, Any]) -> int:
    """The step the Fork field proposes: the run's last step when it did not succeed (run it again
    in a new run), else the position after it."""
    steps = run.get("steps") or []
    if not steps:
        return 1
    last = steps[-1]
    return int(last["seq"]) + (0 if last["status"] != "SUCCESS" else 1)


def _parsed(when: str | None) -> datetime | None:
    return None if when is None else datetime.fromisoformat(when.replace("Z", "+00:00"))


def duration_text(started: str | None, finished: str | None) -> str:
    """``1.25 s``, ``3 min 4 s``, ``2 h 5 min``; empty when not both known."""
    begin, end = _parsed(started), _parsed(finished)
    if begin is None or end is None:
        return ""
    seconds = max(0.0, (end - begin).total_seconds())
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


def short_time(when: str | None) -> str:
    """``2026-11-24 14:03:07`` (UTC) from the run dictionaries' ISO times."""
    parsed = _parsed(when)
    return "" if parsed is None else parsed.strftime("%Y-%m-%d %H:%M:%S")


def trend(history: list[dict[str, Any]]) -> dict[str, list[list[float]]]:
    """The numbers a workflow reported in ``progress(message, extra)`` over time: per key of
    ``extra`` (a dict), ``[[epoch seconds, value], ...]``; at most :data:`TREND_SERIES_MAX` keys, the
    ones reported most often. Booleans and non-finite numbers are left out."""
    series: dict[str, list[list[float]]] = {}
    for report in history:
        extra = report.get("extra")
        at = _parsed(report.get("at"))
        if not isinstance(extra, dict) or at is None:
            continue
        for key, value in extra.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                continue
            series.setdefault(str(key), []).append([at.timestamp(), float(value)])
    ranked = sorted(series, key=lambda key: -len(series[key]))[:TREND_SERIES_MAX]
    return {key: series[key] for key in sorted(ranked)}


def shown_value(value: Any, max_chars: int = 160) -> str:
    """A JSON value as one short line for a table cell."""
    import json

    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


AUDIT_KINDS = {
    "command_sent": "sent",
    "command": "accepted",
    "command_dropped": "dropped",
    "cancel": "cancel",
    "template": "template",
    "tag_write_in_doubt": "write in doubt",
    "prompt_opened": "prompt",
    "prompt_answered": "answered",
    "prompt_verified": "verified",
    "prompt_rejected": "sent back",
    "prompt_closed": "prompt closed",
    "step_held": "held on a failed step",
    "code_held": "held: its code diverges",
    "retried": "retry",
    "forked": "fork",
}


def _audit_what(kind: str, payload: Any) -> str:
    """The audit table's "what" of an event: the command, what a retry or fork took up, else the payload."""
    if not isinstance(payload, dict):
        return shown_value(payload)
    if payload.get("cmd"):
        return str(payload["cmd"])
    if kind == "retried":
        step = payload.get("step")
        where = f" from step {step['seq']} ({step['name']})" if isinstance(step, dict) else ""
        return f"{payload.get('status')} run executed again{where}"
    if kind == "forked":
        return f"fork of run {str(payload.get('from_run'))[:8]} from step {payload.get('from_step')}"
    if kind.startswith("prompt_"):
        detail = payload.get("values", payload.get("status", payload.get("text", "")))
        return f"{payload.get('key')}: {detail if isinstance(detail, str) else shown_value(detail)}"
    if kind == "code_held":
        return shown_value(payload.get("detail"))
    if kind == "step_held":
        error = payload.get("error") or {}
        return shown_value(f"step {payload.get('seq')} {payload.get('step')}: {error.get('type')}: "
                           f"{error.get('message')}")
    return shown_value(payload)


def audit_rows(events: list[EventView]) -> list[dict[str, Any]]:
    """The run's audit trail: who sent what, when, why, and what became of it (the run's own status
    and state changes and its progress are left out: they are shown elsewhere on the page)."""
    rows = []
    for event in events:
        if event["kind"] not in AUDIT_KINDS:
            continue
        what = _audit_what(event["kind"], event.get("payload"))
        rows.append({"at": short_time(event["at"]), "kind": AUDIT_KINDS.get(event["kind"], event["kind"]),
                     "actor": event.get("actor") or "", "what": what, "reason": event.get("reason") or "",
                     "abnormal": event["kind"] in ("command_dropped", "tag_write_in_doubt", "step_held",
                                                   "code_held")})
    return rows


__all__ = ["ALL_STATUSES", "BUTTON_ORDER", "FINISHED", "RETRYABLE", "audit_rows", "command_rules", "duration_text",
           "enabled_commands", "fork_from", "short_time", "shown_value", "state_class", "status_class", "trend"]


def prompt_rights(prompt: PromptView | None, name: str, role: str, roles: Roles) -> dict[str, bool]:
    """What the signed-in person may do with the run's prompt: ``answer`` (an open prompt, the
    ``answer`` right clearing the prompt's role) and ``verify`` (an answer waiting for verification
    that someone else gave, the ``verify`` right clearing ``verify_role``; see
    :meth:`exchange._roles.Roles.may`). The runtime checks it again when they do."""
    if prompt is None:
        return {"answer": False, "verify": False}
    answer = prompt["status"] == "OPEN" and roles.may(role, ANSWER, prompt["role"])
    verify = (prompt["status"] == "AWAITING_VERIFICATION" and prompt["answered_by"] != name
              and prompt["verify_role"] is not None and roles.may(role, VERIFY, prompt["verify_role"]))
    return {"answer": answer, "verify": verify}


def field_input(field: dict[str, Any]) -> str:
    """The HTML input kind of a prompt field: number, checkbox, select or text."""
    return {"float": "number", "int": "number", "bool": "checkbox", "choice": "select"}.get(field["type"], "text")


# The runs page's list of runs that need someone: what each reason is called there.
ATTENTION_LABELS = {"prompt": "prompt", "held": "held on a fault", "code": "held: code diverges",
                    "equipment": "held by equipment",
                    "units": "waits for units", "in_doubt": "write in doubt", "error": "ERROR"}


def attention_class(reason: str) -> str:
    """The CSS class of an attention reason: ``abnormal`` for a fault, ``attention`` for a person's turn."""
    return "attention" if reason == "prompt" else "abnormal"
