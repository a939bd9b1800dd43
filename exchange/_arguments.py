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
from typing import Any

from exchange.errors import InvalidArgument

__all__ = ["integer", "number", "optional_number", "positive_number", "shown", "text", "unencodable"]

_SHOWN_MAX_CHARS = 80


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
