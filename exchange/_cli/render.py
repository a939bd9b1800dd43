"""Human-readable renderings of runs for the terminal.

Everything printed here comes from the store and may hold what any caller put there (a reason, a
parameter, an error text, a progress message). :func:`printable` neutralises what a terminal would
act on — control characters (an escape sequence could recolour, retitle or rewrite the screen),
line and paragraph separators, bidirectional overrides, lone surrogates — by showing it as a
``\\x1b``/``\\u202e`` escape. JSON output (``--json``) is not rendered here and stays exact JSON.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from exchange._engine import RunView, StepView

__all__ = ["clip", "printable", "render_run", "render_runs", "step_line"]

# C0 and C1 controls, DEL, zero-width and bidirectional marks, line/paragraph separators, BOM,
# lone surrogates (undecodable bytes)
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: Any) -> str:
    """``str(value)`` with every character a terminal would act on shown as an escape (``\\x1b``);
    one line, safe to print."""
    return _UNSAFE.sub(_escape, value if isinstance(value, str) else str(value))


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: whole, or cut at the last blank that keeps at least
    half of it (a word is not cut in two) and ended with ``…``."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    blank = cut.rfind(" ")
    if blank >= width // 2:
        cut = cut[:blank]
    return cut.rstrip(" ,;:") + "…"


def _short(value: Any, width: int = 60) -> str:
    text = printable(json.dumps(value, ensure_ascii=False, default=str))
    return text if len(text) <= width else text[: width - 1] + "…"


def step_line(step: StepView) -> str:
    """One line for a step: sequence, name, status, attempts, and its error or output."""
    line = f"step {step['seq']:>4} {step['name']:<28} {step['status']:<8} attempts={step['attempts']}"
    error = step["error"]
    if error:
        line += f"  {error['type']}: {error['message']}"
    elif step["output"] is not None:
        line += f"  -> {_short(step['output'])}"
    return printable(line)


STALE_NOTE = ("(stale): the gateway holding the run stopped renewing its lease (it died or lost the store); "
              "nothing executes the run until a gateway takes it over")


def _expired_ago(lease_expires_at: str | None) -> str:
    if not lease_expires_at:
        return ""
    seconds = time.time() - datetime.fromisoformat(lease_expires_at).timestamp()
    return f" {seconds:.0f} s ago" if seconds >= 0 else ""


def render_runs(runs: list[RunView]) -> str:
    """The ``exchange runs`` table (one line per run); a run whose owner's lease expired shows
    ``(stale)`` after its status, explained under the table."""
    if not runs:
        return "no runs"
    rows = [("ID", "WORKFLOW", "STATUS", "STATE", "CREATED", "PROGRESS")]
    for run in runs:
        progress = printable(run["progress"]["message"]) if run["progress"] else ""
        status = run["status"] + (" (stale)" if run.get("owner_alive") is False else "")
        rows.append((printable(run["id"]), printable(run["workflow"]), printable(status),
                     printable(run["state"] or ""), printable((run["created_at"] or "")[:19]), clip(progress, 40)))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    if any(run.get("owner_alive") is False for run in runs):
        lines.append(STALE_NOTE)
    return "\n".join(lines)


def _left_out(what: str, shown: int, total: int | None, option: str) -> str:
    if total is None or total <= shown:
        return what
    return f"{what} (last {shown} of {total}; {option} N or {option} all for more)"


def render_run(view: RunView) -> str:
    """``exchange show RUN``: the run, its steps and its events, every field made printable."""
    lines = [
        f"run       {view['id']}",
        f"workflow  {view['workflow']}",
        f"status    {view['status']}" + (f"   state {view['state']}" if view.get("state") else ""),
        f"params    {_short(view['params'], 100)}",
    ]
    if view["progress"]:
        lines.append(f"progress  {view['progress']['message']}")
    if view["status"] == "SUCCESS":
        lines.append(f"result    {_short(view['result'], 100)}")
    if view["error"]:
        lines.append(f"error     {view['error']['type']}: {view['error']['message']}")
    prompt = view.get("prompt")
    if prompt:
        waits = ("waits for verification of the answer by " + str(prompt["answered_by"])
                 if prompt["status"] == "AWAITING_VERIFICATION" else f"waits for an answer ({prompt['role']})")
        # The text's first line on the run's line (``exchange prompts`` prints all of it).
        first, *more = prompt["text"].splitlines() or [""]
        text = clip(printable(first) + (" …" if more else ""), 80)
        lines.append(f"prompt    {printable(prompt['key'])}: {text}  {waits}"
                     f"  (exchange answer {view['id'][:8]} {prompt['key']} -v NAME=VALUE ...)")
    lines.append(f"created   {view['created_at']} by {view['created_by']}")
    if view.get("parent_run_id"):
        lines.append(f"parent    {view['parent_run_id']}")
    if view.get("forked_from"):
        lines.append(f"forked    from run {view['forked_from']} (exchange fork)")
    for child in view.get("children") or []:
        lines.append(f"child     {child['id']} {printable(child['workflow'])} {child['status']}")
    if view.get("finished_at"):
        lines.append(f"finished  {view['finished_at']}")
    if view.get("owner_alive") is not None:
        lines.append(f"owner     {view['owner']}")
    if view.get("owner_alive") is False:
        lines.append(f"STALE     the lease of {view['owner']} expired{_expired_ago(view.get('lease_expires_at'))}: "
                     f"its gateway died or lost the store; nothing executes this run until a gateway takes it over")
    held = view.get("held_on")
    if held and held.get("cause") == "code":
        lines.append(f"HELD ON   its code since {held['since']}: {held['error']['message']} (RESUME replays it "
                     f"again with the code loaded then, STOP ends it)")
    elif held:
        doubt = "; a tag write is in doubt" if held.get("in_doubt") else ""
        lines.append(f"HELD ON   step {held['seq']} {held['step']} since {held['since']}: {held['error']['type']}: "
                     f"{held['error']['message']}{doubt} (RESUME runs it again, STOP raises the error)")
    phase = view.get("phase")
    if phase:
        holder = f", held by {phase['held_by']}" if phase.get("held_by") else ""
        lines.append(f"phase     {printable(phase['name'])} {phase.get('state') or '-'} as last seen "
                     f"({phase.get('stage')}{holder}) since {phase.get('since')}")
    units = view.get("units") or {"held": [], "waiting_for": []}
    if units["held"] or units["waiting_for"]:
        said = [f"holds {', '.join(units['held'])}"] if units["held"] else []
        said += [f"waits for {', '.join(units['waiting_for'])}"] if units["waiting_for"] else []
        lines.append(f"units     {'; '.join(said)}")
    doubts = view["events_in_doubt"] if "events_in_doubt" in view else [
        e for e in view.get("events") or [] if e["kind"] == "tag_write_in_doubt"
    ]
    for event in doubts:  # flagged above the lists: an operator must not miss one
        payload = event.get("payload") or {}
        lines.append(
            f"IN DOUBT  write of {_short(payload.get('value'), 30)} to {payload.get('tag')} "
            f"(device {payload.get('device')}) at {event['at']}: {payload.get('resolution')}"
        )
    steps = view.get("steps") or []
    if steps:
        lines.append(_left_out("steps", len(steps), view.get("steps_total"), "--steps"))
        lines.extend("  " + step_line(step) for step in steps)
    elif view.get("steps_total"):
        lines.append(f"steps     {view['steps_total']}, not shown (--steps N)")
    events = [e for e in view.get("events") or [] if e["kind"] != "progress"]
    if not events and view.get("events_total"):
        lines.append(f"events    {view['events_total']}, not shown (--events N)")
    if events:
        lines.append(_left_out("events", len(events), view.get("events_total"), "--events"))
        for event in events:
            who = f" by {event['actor']}" if event.get("actor") else ""
            why = f" ({event['reason']})" if event.get("reason") else ""
            payload = {k: v for k, v in (event.get("payload") or {}).items() if k != "traceback"}
            lines.append(f"  {event['at']} {event['kind']:<16} {_short(payload, 70)}{who}{why}")
    return "\n".join(printable(line) for line in lines)


DETAIL_MAX_CHARS = 100  # `runs --attention`: the DETAIL column; `show RUN` has the whole text


def render_attention(rows: list[dict[str, Any]]) -> str:
    """The runs that need someone, one line per reason, most urgent first; a DETAIL longer than
    :data:`DETAIL_MAX_CHARS` is cut at a word and ends with ``…``."""
    if not rows:
        return "no run needs anyone"
    lines = [f"{'REASON':<9} {'RUN':<10} {'WORKFLOW':<24} {'STATUS':<9} {'SINCE':<20} DETAIL"]
    for row in rows:
        lines.append(f"{row['reason']:<9} {row['run'][:8]:<10} {printable(row['workflow'])[:24]:<24} "
                     f"{row['status']:<9} {row['since'][:19]:<20} {clip(printable(row['detail']), DETAIL_MAX_CHARS)}")
    return "\n".join(lines)
