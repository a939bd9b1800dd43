"""JSON text as the store keeps it: compact, UTF-8, no NaN, keys as given."""

from __future__ import annotations

import json
from typing import Any


class NotJSON(ValueError):
    """The value cannot be written as JSON; the message says which part."""


# One encoder for every call: json.dumps with options builds a new one each time (a step's output,
# a start's parameters and every event are encoded on the hot path).
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# And its C core, made once: JSONEncoder.encode makes one per call. Without the circular-reference
# markers, which one encoder shared by threads could not keep; a value that holds itself ends in
# RecursionError instead, as one nested too deeply does (see dumps).
_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE: Any = None if _make_c_encoder is None else _make_c_encoder(
    None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
)
# Values that JSON gives back equal and of the same type (bool is not an int here: type() is exact).
_SAME_AFTER_JSON = frozenset({int, float, str, bool, type(None)})


def dumps(value: Any) -> str:
    """Serialise ``value`` or raise :class:`NotJSON` naming the offending type (or a character that
    UTF-8 cannot encode, such as a lone surrogate from undecodable bytes)."""
    try:
        text = "".join(_C_ENCODE(value, 0)) if _C_ENCODE is not None else _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise NotJSON(str(exc)) from exc
    except RecursionError:
        raise NotJSON("the value holds itself, or is nested too deeply to write") from None
    if text.isascii():
        return text
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


def as_read_back(value: Any, text: str) -> Any:
    """What ``loads(text)`` gives for ``text = dumps(value)``: ``value`` itself when JSON keeps it
    as it is (a number, a string, a bool, None), without decoding the text again."""
    return value if type(value) in _SAME_AFTER_JSON else loads(text)
