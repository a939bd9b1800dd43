"""Checks for the arguments of steps and runtime calls, made before any side effect.

Every check raises :class:`exchange.errors.InvalidArgument` (a FatalError: never retried) whose
message names the call, the parameter, what it must be and what it got, e.g.
``tags.write_confirm: timeout_ms must be a finite number >= 0, got 'abc'``. Booleans are never
numbers here (``True`` is not a timeout), and NaN and the infinities are refused wherever a number
is asked for, so a timeout can neither vanish nor hang.

The functions return the value in the form the caller uses (a float, an int), so a call site reads
``timeout_s = arguments.number("tags.write_confirm", "timeout_ms", timeout_ms, minimum=0) / 1000``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from exchange.errors import InvalidArgument

__all__ = [
    "JSON_MAX_DEPTH",
    "checked_json",
    "integer",
    "json_problem",
    "number",
    "optional_number",
    "positive_number",
    "shown",
    "text",
    "unencodable",
]

_SHOWN_MAX_CHARS = 80
JSON_MAX_DEPTH = 100  # nesting of a JSON value handed in (parameters, messages, progress extras)
_INT_MAX_BITS = 13_000  # ~3,900 digits: Python refuses to write longer ints as text


def shown(value: Any) -> str:
    """``repr(value)`` cut to a length an error message can carry (a 20 MB value stays short)."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails must not hide the real error
        text = f"<{type(value).__name__}>"
    if len(text) > _SHOWN_MAX_CHARS:
        text = text[: _SHOWN_MAX_CHARS - 15] + f"... ({len(text)} chars)"
    return text


def _bounds(minimum: float | None, maximum: float | None) -> str:
    parts = []
    if minimum is not None:
        parts.append(f">= {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    return (" " + " and ".join(parts)) if parts else ""


def number(
    call: str, name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    """``value`` as a finite float within ``[minimum, maximum]``; InvalidArgument otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(
            f"{call}: {name} must be a finite number{_bounds(minimum, maximum)}, got {shown(value)}"
        )
    try:
        result = float(value)
    except OverflowError:  # an int beyond a float's range
        result = math.inf
    if not math.isfinite(result) or (minimum is not None and result < minimum) or (
        maximum is not None and result > maximum
    ):
        raise InvalidArgument(
            f"{call}: {name} must be a finite number{_bounds(minimum, maximum)}, got {shown(value)}"
        )
    return result


def optional_number(
    call: str, name: str, value: Any, *, minimum: float | None = None, maximum: float | None = None
) -> float | None:
    """None stays None; anything else as :func:`number`."""
    return None if value is None else number(call, name, value, minimum=minimum, maximum=maximum)


def integer(call: str, name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an int within ``[minimum, maximum]`` (an integral float like 5.0 is accepted)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum) or (
        maximum is not None and value > maximum
    ):
        raise InvalidArgument(f"{call}: {name} must be a whole number{_bounds(minimum, maximum)}, got {shown(value)}")
    return value


def unencodable(text: str) -> str | None:
    """Why ``text`` cannot be stored as UTF-8 (a lone surrogate from undecodable bytes), else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"holds {text[exc.start:exc.end]!r} at position {exc.start}, which is not text "
                f"(undecodable bytes?)")
    return None


def text(
    call: str,
    name: str,
    value: Any,
    *,
    max_chars: int | None = None,
    empty: bool = False,
    error: type[Exception] = InvalidArgument,
) -> str:
    """``value`` if it is a str the store can hold: non-empty unless ``empty``, at most ``max_chars``
    characters, no NUL byte, encodable as UTF-8. Otherwise ``error`` (InvalidArgument by default)
    naming ``call`` and ``name``; the value is shown cut short."""
    if not isinstance(value, str) or (not empty and not value.strip()):
        what = "a string" if empty else "a non-empty string"
        raise error(f"{call}: {name} must be {what}, got {shown(value)}")
    if max_chars is not None and len(value) > max_chars:
        raise error(f"{call}: {name} is {len(value)} characters long; the limit is {max_chars}")
    if "\x00" in value:
        raise error(f"{call}: {name} holds a NUL byte at position {value.index(chr(0))}: {shown(value)}")
    problem = unencodable(value)
    if problem is not None:
        raise error(f"{call}: {name} {problem}")
    return value


def positive_number(call: str, name: str, value: Any) -> float:
    """``value`` as a finite float > 0; InvalidArgument naming ``call`` and ``name`` otherwise (a
    bool, a string, NaN, an infinity, zero or a negative number)."""
    try:
        result = number(call, name, value, minimum=0)
    except InvalidArgument:
        result = 0.0
    if result <= 0:
        raise InvalidArgument(f"{call}: {name} must be a finite number > 0, got {shown(value)}")
    return result


def json_problem(value: Any, where: str, depth: int = 0) -> str | None:
    """Why ``value`` cannot be stored as JSON, naming the place (``where`` and the path inside it),
    or None when it can: not a JSON type, NaN or an infinity, text with undecodable bytes, a key
    that is not a string or number, an int too long to write, nesting deeper than
    :data:`JSON_MAX_DEPTH`."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        if value.bit_length() > _INT_MAX_BITS:
            return f"{where} is not JSON: an integer of {value.bit_length()} bits is too long to write"
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is not JSON: {value!r} is not a finite number"
    if isinstance(value, str):
        problem = unencodable(value)
        return None if problem is None else f"{where} is not JSON: the text {problem}"
    if depth >= JSON_MAX_DEPTH:
        return f"{where} is not JSON here: it nests deeper than {JSON_MAX_DEPTH} levels"
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problem = json_problem(item, f"{where}[{index}]", depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                key_problem = unencodable(key)
                if key_problem is not None:
                    return f"{where} is not JSON: the key {key!r} {key_problem}"
            elif (key is not None and not isinstance(key, (int, float))) or (
                isinstance(key, float) and not math.isfinite(key)
            ):  # json writes None, bool and number keys as their text; nothing else
                return f"{where} is not JSON: the key {shown(key)} is not a string"
            problem = json_problem(item, f"{where}[{key!r}]", depth + 1)
            if problem is not None:
                return problem
        return None
    return f"{where} is not JSON: {shown(value)} is a {type(value).__name__}"


def checked_json(
    call: str,
    name: str,
    value: Any,
    *,
    encode: Callable[[Any], str],
    max_bytes: int,
    setting: str,
    error: type[Exception] = InvalidArgument,
) -> str:
    """``encode(value)`` (the JSON text as the caller stores it, e.g. ``exchange._store.codec.dumps``)
    if ``value`` is JSON (see :func:`json_problem`) and the text is at most ``max_bytes`` (UTF-8)
    long; otherwise ``error`` naming ``call``, ``name`` (and the place inside it) and the limit's
    ``setting`` (``engine.<setting>``). ``encode`` may raise ValueError or RecursionError for what
    it cannot write; that is refused the same way."""
    problem = json_problem(value, name)
    if problem is not None:
        raise error(f"{call}: {problem}")
    try:
        encoded = encode(value)
    except (ValueError, RecursionError) as exc:  # pragma: no cover - json_problem found nothing
        raise error(f"{call}: {name} is not JSON: {exc}") from None
    size = len(encoded.encode("utf-8"))
    if size > max_bytes:
        raise error(f"{call}: {name} is {size} bytes as JSON; the limit is {max_bytes} (engine.{setting})")
    return encoded
