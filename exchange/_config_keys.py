"""Naming what is wrong in a config table: unknown keys, each with the closest known one."""

from __future__ import annotations

import difflib
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
