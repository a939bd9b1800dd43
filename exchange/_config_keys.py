"""Naming what is wrong in a config table: unknown keys, each with the closest known one."""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping
from typing import Any

from exchange.errors import ConfigError


def closest(key: str, known: Collection[str]) -> str | None:
    """The known key closest to ``key`` (case aside), or None when none is close."""
    lowered = {k.lower(): k for k in known}
    match = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def refuse_unknown(table: Mapping[str, Any], known: Collection[str], where: str, noun: str = "key") -> None:
    """ConfigError naming every key of ``table`` outside ``known``, each with the closest known one."""
    unknown = [key for key in table if key not in known]
    if not unknown:
        return
    parts: list[str] = []
    unmatched = False
    for key in unknown:
        match = closest(key, known)
        if match is None:
            unmatched = True
            parts.append(repr(key))
        else:
            parts.append(f"{key!r} (did you mean {match!r}?)")
    plural = noun + ("s" if len(unknown) > 1 else "")
    message = f"{where}: unknown {plural} {', '.join(parts)}"
    if unmatched:
        message += f"; known {noun}s: {', '.join(sorted(known))}"
    raise ConfigError(message)


def describe_value(value: Any) -> str:
    """How a TOML value reads in a message: ``a string 'x'``, ``an integer 3``, ``a table``."""
    if isinstance(value, bool):
        return f"a boolean {str(value).lower()}"
    if isinstance(value, int):
        if abs(value) < 10**30:
            return f"an integer {value}"
        return f"an integer of about {int(value.bit_length() * math.log10(2))} digits"
    if isinstance(value, float):
        return f"a float {value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:60] + "..."
        return f"a string {shown!r}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"  # dates and times
