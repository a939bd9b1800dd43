"""Naming what is wrong in a config table: unknown keys, each with the closest known one; and the
checks every section shares (a section that is a table, its named tables, a required text, a
configured tag)."""

from __future__ import annotations

import difflib
import math
import re
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


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_key(name: str) -> str:
    """``name`` as a TOML key is written: bare when it can be (``every_second``), else quoted
    (``"R1/Charge"``)."""
    return name if _BARE_KEY.fullmatch(name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def section_table(raw: Mapping[str, Any], name: str, source: str) -> dict[str, Any]:
    """``[name]`` of the document (empty when absent); ConfigError when it is not a table."""
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{name}] must be a table, got {describe_value(value)}")
    return value


def named_tables(raw: Mapping[str, Any], section: str, source: str,
                 known: Collection[str]) -> dict[str, dict[str, Any]]:
    """The tables ``[section.NAME]`` by name, each a table holding only ``known`` keys."""
    tables = raw.get(section, {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{source}: [{section}] must hold tables [{section}.NAME]")
    found: dict[str, dict[str, Any]] = {}
    for name, table in tables.items():
        where = f"{source}: {section}.{toml_key(name)}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table ([{section}.{toml_key(name)}])")
        refuse_unknown(table, known, where)
        found[name] = table
    return found


def text_value(table: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    """``table[key]`` stripped: a non-empty string (None when absent and not ``required``)."""
    value = table.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}.{key} must be a non-empty string" + ("" if key in table else " (missing)"))
    return value.strip()


def known_tag(path: str, where: str, tags: Mapping[str, Any]) -> str:
    """``path`` when it is a configured tag; ConfigError naming it otherwise."""
    if path not in tags:
        raise ConfigError(f"{where}: tag {path!r} is not configured ([tags.\"{path}\"])")
    return path
