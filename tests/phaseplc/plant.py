"""The Exchange config of a test PLC's phases: tag paths and the TOML text of its device, tags,
``[phases."UNIT/PHASE"]`` tables and ``[watchdog]``, whatever the protocol (the protocol's module
gives the device table and each tag's address)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from tests.phaseplc.logic import PhaseLogic

PLANT_DEVICE = "phase_plc"
HEARTBEAT_TAG = "[plant]Exchange/Heartbeat"


def tag_path(phase: str, key: str) -> str:
    """``R1/Charge`` + ``state`` -> ``[plant]R1/Charge/State``; ``param:target_l`` ->
    ``[plant]R1/Charge/Params/target_l``; ``report:actual_l`` -> ``[plant]R1/Charge/Reports/actual_l``."""
    if key == "heartbeat":
        return HEARTBEAT_TAG
    kind, _, name = key.partition(":")
    return f"[plant]{phase}/{kind.capitalize()}s/{name}" if name else f"[plant]{phase}/{kind.capitalize()}"


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a TOML basic string


def phase_toml(phases: Iterable[PhaseLogic], device: str, device_toml: str, address: Callable[[str, str], str], *,
               owner_id: int, watchdog_period_ms: int | None, start_timeout_s: float,
               command_timeout_s: float) -> str:
    """The config text; ``address(phase, key)`` is a tag's address on ``device``."""
    lines = [device_toml.rstrip("\n"), ""]
    tables: list[str] = []
    heartbeat_done = False
    for phase in phases:
        for key in phase.values():
            if key == "heartbeat":
                if heartbeat_done:
                    continue
                heartbeat_done = True
            lines += [f"[tags.{_q(tag_path(phase.name, key))}]", f"device = {_q(device)}",
                      f"address = {_q(address(phase.name, key))}", ""]
        params = ", ".join(f"{name} = {_q(tag_path(phase.name, 'param:' + name))}" for name in phase.param_names)
        reports = ", ".join(f"{name} = {_q(tag_path(phase.name, 'report:' + name))}" for name in phase.report_sources)
        tables += [f"[phases.{_q(phase.name)}]",
                   f"command = {_q(tag_path(phase.name, 'command'))}",
                   f"state = {_q(tag_path(phase.name, 'state'))}",
                   f"owner = {_q(tag_path(phase.name, 'owner'))}",
                   f"owner_id = {owner_id}",
                   f"numbering = {_q(phase.numbering)}",
                   f"params = {{ {params} }}",
                   f"reports = {{ {reports} }}",
                   f"start_timeout_s = {start_timeout_s!r}",
                   f"command_timeout_s = {command_timeout_s!r}", ""]
    lines += tables
    if watchdog_period_ms is not None:
        lines += ["[watchdog]", f"tag = {_q(HEARTBEAT_TAG)}", f"period_ms = {watchdog_period_ms}", ""]
    return "\n".join(lines)


def load_plant(toml_text: str, **store: Any) -> Any:
    """The text checked as Exchange checks a config at start (a :class:`exchange._config.Config`)."""
    import tomllib

    from exchange._config import config_from_dict

    raw = tomllib.loads(toml_text)
    raw.setdefault("store", store or {"url": "sqlite:///:memory:"})
    return config_from_dict(raw, env={})
