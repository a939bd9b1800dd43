"""Human-readable renderings of runs for the terminal."""

from __future__ import annotations

import json
from typing import Any


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def step_line(step: dict[str, Any]) -> str:
    line = f"step {step['seq']:>4} {step['name']:<28} {step['status']:<8} attempts={step['attempts']}"
    if step.get("error"):
        line += f"  {step['error']['type']}: {step['error']['message']}"
    elif step.get("output") is not None:
        line += f"  -> {_short(step['output'])}"
    return line


def render_runs(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "no runs"
    rows = [("ID", "WORKFLOW", "STATUS", "STATE", "CREATED", "PROGRESS")]
    for run in runs:
        progress = run["progress"]["message"] if run.get("progress") else ""
        rows.append((run["id"], run["workflow"], run["status"], run["state"] or "",
                     (run["created_at"] or "")[:19], progress[:40]))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows)


def render_run(view: dict[str, Any]) -> str:
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
    return "\n".join(lines)
