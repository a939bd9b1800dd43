"""The batch record's printable form: one self-contained HTML file (``exchange record RUN --html
FILE``) and the body the console's printable page shows, both from the record's JSON
(``Runtime.record``). It imports nothing of the engine or the store: it renders a dict."""

from __future__ import annotations

from exchange._record.html import STYLESHEET, render_body, render_document

__all__ = ["STYLESHEET", "render_body", "render_document"]
