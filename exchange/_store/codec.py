"""JSON text as the store keeps it: compact, UTF-8, no NaN, keys as given."""

from __future__ import annotations

import json
from typing import Any


class NotJSON(ValueError):
    """The value cannot be written as JSON; the message says which part."""


def dumps(value: Any) -> str:
    """Serialise ``value`` or raise :class:`NotJSON` naming the offending type (or a character that
    UTF-8 cannot encode, such as a lone surrogate from undecodable bytes)."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise NotJSON(str(exc)) from exc
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotJSON(
            f"the text holds {text[exc.start:exc.end]!r} at position {exc.start}, which UTF-8 cannot "
            f"encode (a lone surrogate, e.g. from bytes decoded with surrogateescape)"
        ) from None
    return text


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
