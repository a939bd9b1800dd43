"""JSON text as the store keeps it: compact, UTF-8, no NaN, keys as given."""

from __future__ import annotations

import json
from typing import Any


class NotJSON(ValueError):
    """The value cannot be written as JSON; the message says which part."""


def dumps(value: Any) -> str:
    """Serialise ``value`` or raise :class:`NotJSON` naming the offending type."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise NotJSON(str(exc)) from exc


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
