"""``[phases."UNIT/PHASE"]``, ``[watchdog]`` and ``[units]``: the equipment a batch commands.

A phase is the PLC's phase logic behind a Phase Logic Interface (see ../shared/DESIGN.md, "Equipment
phases"): Exchange writes command numbers to its ``command`` tag and follows the PLC's ``state`` tag,
numbered as ``numbering`` says (:mod:`exchange._phase_numbering`). The watchdog is a heartbeat tag
each gateway writes while it is alive, so the PLC can hold its phases when it stops. A unit is a
vessel or line that one run at a time may command (``[units.NAME]``, with a ``class``; the scalar
keys of ``[units]`` are settings).

Checked when the config is loaded, like every other section: an unknown key, tag or unit, a tag
written that is read-only, a command, state or owner tag whose declared type is not an integer, a
bad number: one line naming the key. A tag whose type is not declared is the tag layer's to type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from exchange._config_keys import (
    describe_value,
    known_tag,
    named_tables,
    refuse_unknown,
    section_table,
    text_value,
    toml_key,
)
from exchange._phase_numbering import NUMBERINGS
from exchange._values import parse_data_type
from exchange.errors import ConfigError, TagError

PHASE_KEYS = ("unit", "command", "state", "owner", "owner_id", "numbering", "params", "reports",
              "start_timeout_s", "command_timeout_s")
WATCHDOG_KEYS = ("tag", "period_ms")
UNITS_SETTINGS = ("wait_attention_s",)
UNIT_KEYS = ("class",)


@dataclass(frozen=True)
class PhaseConfig:
    """One ``[phases."UNIT/PHASE"]`` table, checked."""

    name: str
    command: str
    state: str
    unit: str | None = None
    owner: str | None = None
    owner_id: int = 1
    numbering: str = "pli"
    params: Mapping[str, str] = field(default_factory=dict)  # parameter name -> tag written before Start
    reports: Mapping[str, str] = field(default_factory=dict)  # report name -> tag read at Complete
    start_timeout_s: float = 10.0
    command_timeout_s: float = 30.0


@dataclass(frozen=True)
class WatchdogConfig:
    """``[watchdog]``: the heartbeat tag and how often a gateway writes it (None: no watchdog)."""

    tag: str | None = None
    period_ms: int = 1000


@dataclass(frozen=True)
class UnitConfig:
    name: str
    unit_class: str


@dataclass(frozen=True)
class UnitsConfig:
    """``[units]``: its settings and its units."""

    wait_attention_s: float = 600.0
    units: Mapping[str, UnitConfig] = field(default_factory=dict)


def _required_text(table: Mapping[str, Any], key: str, where: str) -> str:
    value = text_value(table, key, where)
    assert value is not None  # required
    return value


def _seconds(table: Mapping[str, Any], key: str, where: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 7 * 24 * 3600:
        raise ConfigError(f"{where}.{key} must be a number of seconds above 0 (at most a week), got {value!r}")
    return float(value)


def _tag(path: str, where: str, tags: Mapping[str, Any], *, written: bool = False, integer: bool = False) -> str:
    """``path`` as a configured tag: written ones may not be read-only; an integer one may not
    declare another type."""
    config = tags[known_tag(path, where, tags)]
    if written and getattr(config, "access", None) == "ro":
        raise ConfigError(f"{where}: tag {path!r} is read-only (access = \"ro\"); Exchange writes it")
    declared = getattr(config, "data_type", None)
    if integer and declared is not None:
        try:
            is_integer = parse_data_type(declared).is_integer
        except TagError:
            is_integer = False  # an unknown type (or an array) the tag layer refuses anyway
        if not is_integer:
            raise ConfigError(f"{where}: tag {path!r} is of type {declared!r}; a phase's numbers need an "
                              "integer tag (Int16, UInt16, Int32, ...)")
    return path


def _tag_map(table: Mapping[str, Any], key: str, where: str, tags: Mapping[str, Any], *,
             written: bool) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}.{key} must be a table of name = \"tag\", got {describe_value(value)}")
    found: dict[str, str] = {}
    for name, path in value.items():
        if not isinstance(path, str) or not path.strip():
            raise ConfigError(f"{where}.{key}.{name} must be a tag path, got {describe_value(path)}")
        found[name] = _tag(path.strip(), f"{where}.{key}.{name}", tags, written=written)
    return found


def units(raw: Mapping[str, Any], source: str) -> UnitsConfig:
    """``[units]``: scalar keys are settings, tables are units (``class`` required)."""
    table = section_table(raw, "units", source)
    settings = {key: value for key, value in table.items() if not isinstance(value, dict)}
    refuse_unknown(settings, UNITS_SETTINGS, f"{source}: units")
    found: dict[str, UnitConfig] = {}
    for name, unit in table.items():
        if not isinstance(unit, dict):
            continue
        where = f"{source}: units.{name}"
        refuse_unknown(unit, UNIT_KEYS, where)
        found[name] = UnitConfig(name=name, unit_class=_required_text(unit, "class", where))
    return UnitsConfig(wait_attention_s=_seconds(settings, "wait_attention_s", f"{source}: units", 600.0),
                       units=found)


def phases(raw: Mapping[str, Any], source: str, tags: Mapping[str, Any],
           known_units: Mapping[str, UnitConfig]) -> dict[str, PhaseConfig]:
    """Every ``[phases."UNIT/PHASE"]`` table, checked against the tags and the units."""
    found: dict[str, PhaseConfig] = {}
    for name, table in named_tables(raw, "phases", source, PHASE_KEYS).items():
        where = f"{source}: phases.{toml_key(name)}"
        parts = name.split("/")
        if len(parts) != 2 or not all(part.strip() for part in parts):
            raise ConfigError(f"{where}: a phase is named UNIT/PHASE (e.g. \"R1/Charge\"), got {name!r}")
        unit = table.get("unit")
        if unit is not None and (not isinstance(unit, str) or unit not in known_units):
            configured = ", ".join(sorted(known_units)) or "none"
            raise ConfigError(f"{where}.unit {unit!r} names no [units.NAME] (configured: {configured})")
        numbering = table.get("numbering", "pli")
        if numbering not in NUMBERINGS:
            raise ConfigError(f"{where}.numbering must be one of {', '.join(NUMBERINGS)}, got {numbering!r}")
        owner_id = table.get("owner_id", 1)
        if isinstance(owner_id, bool) or not isinstance(owner_id, int) or not 1 <= owner_id <= 32767:
            raise ConfigError(f"{where}.owner_id must be an integer from 1 to 32767 (0 means free), got {owner_id!r}")
        owner = table.get("owner")
        found[name] = PhaseConfig(
            name=name,
            command=_tag(_required_text(table, "command", where), f"{where}.command", tags, written=True, integer=True),
            state=_tag(_required_text(table, "state", where), f"{where}.state", tags, integer=True),
            unit=unit,
            owner=None if owner is None else _tag(_required_text(table, "owner", where), f"{where}.owner", tags,
                                                  written=True, integer=True),
            owner_id=owner_id,
            numbering=numbering,
            params=_tag_map(table, "params", where, tags, written=True),
            reports=_tag_map(table, "reports", where, tags, written=False),
            start_timeout_s=_seconds(table, "start_timeout_s", where, 10.0),
            command_timeout_s=_seconds(table, "command_timeout_s", where, 30.0),
        )
    return found


def watchdog(raw: Mapping[str, Any], source: str, tags: Mapping[str, Any]) -> WatchdogConfig:
    """``[watchdog]``: absent, no heartbeat; else a writable tag and a period of 100 ms to 60 s."""
    table = section_table(raw, "watchdog", source)
    if not table:
        return WatchdogConfig()
    where = f"{source}: watchdog"
    refuse_unknown(table, WATCHDOG_KEYS, where)
    period_ms = table.get("period_ms", 1000)
    if isinstance(period_ms, bool) or not isinstance(period_ms, int) or not 100 <= period_ms <= 60_000:
        raise ConfigError(f"{where}.period_ms must be an integer from 100 to 60000, got {period_ms!r}")
    return WatchdogConfig(tag=_tag(_required_text(table, "tag", where), f"{where}.tag", tags, written=True),
                          period_ms=period_ms)
