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
from typing import Any

__all__ = ["printable", "render_run", "render_runs", "step_line"]

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


def _short(value: Any, width: int = 60) -> str:
    text = printable(json.dumps(value, ensure_ascii=False, default=str))
    return text if len(text) <= width else text[: width - 1] + "…"


def step_line(step: dict[str, Any]) -> str:
    """One line for a step: sequence, name, status, attempts, and its error or output."""
    line = f"step {step['seq']:>4} {step['name']:<28} {step['status']:<8} attempts={step['attempts']}"
    if step.get("error"):
        line += f"  {step['error']['type']}: {step['error']['message']}"
    elif step.get("output") is not None:
        line += f"  -> {_short(step['output'])}"
    return printable(line)


def render_runs(runs: list[dict[str, Any]]) -> str:
    """The ``exchange runs`` table (one line per run)."""
    if not runs:
        return "no runs"
    rows = [("ID", "WORKFLOW", "STATUS", "STATE", "CREATED", "PROGRESS")]
    for run in runs:
        progress = printable(run["progress"]["message"]) if run.get("progress") else ""
        rows.append((printable(run["id"]), printable(run["workflow"]), printable(run["status"]),
                     printable(run["state"] or ""), printable((run["created_at"] or "")[:19]), progress[:40]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows)


def render_run(view: dict[str, Any]) -> str:
    """``exchange show RUN``: the run, its steps and its events, every field made printable."""
    lines = [
        f"run       {view['id']}",
        f"workflow  {view['workflow']}",
        f"status    {view['status']}" + (f"   state {view['state']}" if view.get("state") else ""),
        f"params    {_short(view['params'], 100)}",
    ]
    if view.get("progress"):
        lines.append(f"progress  {view['progress']['message']}")
    if view["status"] == "SUCCESS":
        lines.append(f"result    {_short(view['result'], 100)}")
    if view.get("error"):
        lines.append(f"error     {view['error']['type']}: {view['error']['message']}")
    lines.append(f"created   {view['created_at']} by {view['createdBy']}")
    if view.get("finished_at"):
        lines.append(f"finished  {view['finished_at']}")
    doubts = [e for e in view.get("events") or [] if e["kind"] == "tag_write_in_doubt"]
    for event in doubts:  # flagged above the lists: an operator must not miss one
        payload = event.get("payload") or {}
        lines.append(
            f"IN DOUBT  write of {_short(payload.get('value'), 30)} to {payload.get('tag')} "
            f"(device {payload.get('device')}) at {event['at']}: {payload.get('resolution')}"
        )
    steps = view.get("steps") or []
    if steps:
        lines.append("steps")
        lines.extend("  " + step_line(step) for step in steps)
    events = [e for e in view.get("events") or [] if e["kind"] != "progress"]
    if events:
        lines.append("events")
        for event in events:
            who = f" by {event['actor']}" if event.get("actor") else ""
            why = f" ({event['reason']})" if event.get("reason") else ""
            payload = {k: v for k, v in (event.get("payload") or {}).items() if k != "traceback"}
            lines.append(f"  {event['at']} {event['kind']:<16} {_short(payload, 70)}{who}{why}")
    return "\n".join(printable(line) for line in lines)
