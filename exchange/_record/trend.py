"""The process values of a batch record drawn as trends: one small inline SVG per tag, made here on
the server (no script, no library, nothing fetched: the record opens offline and prints as shown).

A numeric or Boolean tag is a step line (a value holds until the next one kept; the sampler keeps a
value when it changed), from the run's start to its end (or to the newest value of a run in flight),
with its minimum and maximum on the left axis and the first and last times below; a gap (a failed
read) is a grey band where the line stops, and each value kept is a dot while there are few enough
to see. Booleans are drawn as 0 and 1, labelled false and true. Any other value (text, arrays) is
listed as its changes instead.

The SVG uses classes only (the console's Content Security Policy refuses inline styles); the
stylesheet (``record.css``) draws them. A tag with more values than :data:`DOTS_MAX` has no dots, and
one with more than :data:`POINTS_MAX` is drawn from the first, lowest, highest and last value of
each of the chart's pixel columns (what a line that wide can show); the JSON keeps every value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup, escape

WIDTH, HEIGHT = 720, 130
LEFT, RIGHT, TOP, BOTTOM = 70, 10, 8, 22  # room for the axis labels
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
DOTS_MAX = 200
POINTS_MAX = 4 * PLOT_W
CHANGES_SHOWN = 200  # rows of a non-numeric tag's list; the rest are in the JSON


@dataclass
class Trend:
    """What the template shows of one tag."""

    tag: str
    count: int
    gaps: list[list[Any]]
    svg: Markup | None = None  # a chart, for numbers and Booleans
    low: Any = None
    high: Any = None
    changes: list[list[Any]] = field(default_factory=list)  # the values kept, for other types (the first few)


def _seconds(at: str) -> float:
    return datetime.fromisoformat(at).timestamp()


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    return None


def _label(value: float, boolean: bool) -> str:
    if boolean:
        return "true" if value else "false"
    return f"{value:.6g}"


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(sep=" ", timespec="milliseconds").replace("+00:00", " UTC")


def trends(values: Any, started_at: str | None, finished_at: str | None) -> list[Trend]:
    """A :class:`Trend` per tag of the record's ``values`` (``{"tags", "gaps", ...}``), in the
    order the JSON has them; empty for a record without any."""
    if not isinstance(values, dict) or not values.get("tags"):
        return []
    tags: dict[str, list[list[Any]]] = values["tags"]
    newest = max(_seconds(points[-1][0]) for points in tags.values() if points)
    start = _seconds(started_at) if started_at else min(_seconds(p[0][0]) for p in tags.values() if p)
    end = _seconds(finished_at) if finished_at else newest
    found = []
    for tag, points in tags.items():
        trend = Trend(tag, len(points), list((values.get("gaps") or {}).get(tag, [])))
        kinds = {type(value) for _at, value in points if value is not None}
        if all(_number(value) is not None for _at, value in points if value is not None):  # all gaps too
            boolean = kinds == {bool}
            numbers = [(_seconds(at), _number(value)) for at, value in points]
            trend.svg, trend.low, trend.high = _chart(numbers, min(start, numbers[0][0]), max(end, numbers[-1][0]),
                                                      boolean)
        else:
            trend.changes = [[at, value] for at, value in points[:CHANGES_SHOWN]]
        found.append(trend)
    return found


def _chart(points: Sequence[tuple[float, float | None]], start: float, end: float,
           boolean: bool) -> tuple[Markup, str, str]:
    known = [v for _t, v in points if v is not None]
    low, high = (min(known), max(known)) if known else (0.0, 1.0)
    if boolean:
        low, high = 0.0, 1.0
    pad = (high - low) * 0.05 or (abs(high) * 0.05 or 1.0)
    y_low, y_high = low - pad, high + pad
    span = (end - start) or 1.0

    def x(at: float) -> float:
        return LEFT + (at - start) / span * PLOT_W

    def y(value: float) -> float:
        return TOP + (y_high - value) / (y_high - y_low) * PLOT_H

    drawn = _thinned(points, start, span) if len(points) > POINTS_MAX else list(points)
    parts: list[str] = []
    line: list[str] = []
    gaps: list[str] = []
    gap_from: float | None = None
    for index, (at, value) in enumerate(drawn):
        until = drawn[index + 1][0] if index + 1 < len(drawn) else end
        if value is None:
            gap_from = at if gap_from is None else gap_from
            if index + 1 == len(drawn):
                gaps.append(_rect(x(gap_from), x(until)))
            continue
        if gap_from is not None:
            gaps.append(_rect(x(gap_from), x(at)))
            gap_from = None
        command = "M" if not line or drawn[index - 1][1] is None else "V"
        if command == "M":
            line.append(f"M{x(at):.1f},{y(value):.1f}")
        else:
            line.append(f"V{y(value):.1f}")
        line.append(f"H{x(until):.1f}")
    parts.extend(gaps)
    parts.append(f'<rect class="trend-frame" x="{LEFT}" y="{TOP}" width="{PLOT_W}" height="{PLOT_H}"/>')
    if line:
        parts.append(f'<path class="trend-line" d="{" ".join(line)}"/>')
    if len(points) <= DOTS_MAX:
        parts.extend(f'<circle class="trend-dot" cx="{x(at):.1f}" cy="{y(value):.1f}" r="1.8"/>'
                     for at, value in points if value is not None)
    low_text, high_text = (_label(low, boolean), _label(high, boolean)) if known else ("—", "—")
    if known:
        parts.append(_text(LEFT - 4, y(high) + 4, high_text, "end"))
    if known and high != low:
        parts.append(_text(LEFT - 4, y(low) + 4, low_text, "end"))
    parts.append(_text(LEFT, HEIGHT - 6, _utc(start), "start"))
    parts.append(_text(WIDTH - RIGHT, HEIGHT - 6, _utc(end), "end"))
    svg = (f'<svg class="trend" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
           f'xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>")
    return Markup(svg), low_text, high_text


def _rect(x0: float, x1: float) -> str:
    return f'<rect class="trend-gap" x="{x0:.1f}" y="{TOP}" width="{max(x1 - x0, 1.0):.1f}" height="{PLOT_H}"/>'


def _text(x: float, y: float, text: str, anchor: str) -> str:
    return f'<text class="trend-label" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{escape(text)}</text>'


def _thinned(points: Sequence[tuple[float, float | None]], start: float,
             span: float) -> list[tuple[float, float | None]]:
    """The first, lowest, highest and last value of each pixel column (a gap kept where one starts),
    in time order: the line a chart this wide draws of them."""
    columns: dict[int, list[tuple[float, float | None]]] = {}
    for point in points:
        columns.setdefault(int((point[0] - start) / span * PLOT_W), []).append(point)
    kept: list[tuple[float, float | None]] = []
    for column in columns.values():
        chosen = {column[0], column[-1]}
        known = [p for p in column if p[1] is not None]
        if known:
            chosen |= {min(known, key=lambda p: p[1] or 0.0), max(known, key=lambda p: p[1] or 0.0)}
        chosen |= {next((p for p in column if p[1] is None), column[0])}
        kept.extend(sorted(chosen, key=lambda p: p[0]))
    return kept
