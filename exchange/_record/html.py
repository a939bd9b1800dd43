"""Render a batch record (the dict of ``Runtime.record``) as HTML with the package's Jinja2
templates: :func:`render_document` is a whole page with its stylesheet inline (no script, nothing
fetched: it opens offline and prints as it shows), :func:`render_body` the part the console's page
puts inside its own layout, which links :data:`STYLESHEET` instead (the console's Content Security
Policy refuses inline styles).

Values are shown as the JSON has them: a string as it is, anything else as its JSON text (``true``,
``1.02``, ``{"a": 1}``), so what the reviewer reads is what the record holds."""

from __future__ import annotations

import json
import time
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from exchange._record.trend import trends
from exchange._timefmt import iso_utc

STYLESHEET: str = resources.files("exchange._record").joinpath("templates/record.css").read_text(encoding="utf-8")
_TEMPLATES = Environment(loader=PackageLoader("exchange._record", "templates"),
                         autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)


def shown(value: Any) -> str:
    """A value as the JSON has it: a string as it is, None as ``null``, anything else as its JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


def when(value: Any) -> str:
    """An ISO time as the record has it, or a dash for none."""
    return "—" if value is None else str(value)


_TEMPLATES.filters["shown"] = shown
_TEMPLATES.filters["when"] = when


def _context(record: dict[str, Any], checks: list[bool | None] | None = None) -> dict[str, Any]:
    run = record["run"]
    return {"record": record, "run": run, "checks": checks, "printed_at": iso_utc(time.time()),
            "trends": trends(record.get("values"), run.get("started_at"), run.get("finished_at"))}


def render_body(record: dict[str, Any], checks: list[bool | None] | None = None) -> Markup:
    """The record's sections (header, exceptions first, then the rest), without a page around them.
    ``checks``: per signature, whether its hash still matches the record (``Runtime.signature_checks``;
    None: not recomputable, an action's signature or one made before the run finished), shown in a
    column of its own; None: no column."""
    return Markup(_TEMPLATES.get_template("record_body.html").render(**_context(record, checks)))


def render_document(record: dict[str, Any]) -> str:
    """A whole, self-contained HTML page of the record: its stylesheet inline, no script."""
    return _TEMPLATES.get_template("record.html").render(body=render_body(record), css=Markup(STYLESHEET),
                                                         **_context(record))
