"""[phases."UNIT/PHASE"], [watchdog] and [units]: read and checked when the config is loaded."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._phase_numbering import NUMBERINGS, PACKML, PLI
from exchange.errors import ConfigError

TAGS = {
    "[plant]R1/Charge/Command": {"device": "plc", "address": "HR1", "type": "Int16"},
    "[plant]R1/Charge/State": {"device": "plc", "address": "HR2", "type": "Int16"},
    "[plant]R1/Charge/Owner": {"device": "plc", "address": "HR3", "type": "UInt16"},
    "[plant]R1/Charge/Target": {"device": "plc", "address": "HRF10"},
    "[plant]R1/Charge/Actual": {"device": "plc", "address": "IRF20"},
    "[plant]R1/Level": {"device": "plc", "address": "HRF30", "type": "Float32"},
    "[plant]R1/StateRo": {"device": "plc", "address": "IR40", "type": "Int16", "access": "ro"},
    "[plant]Exchange/Heartbeat": {"device": "plc", "address": "HR50", "type": "UInt16"},
}
PLANT: dict[str, Any] = {
    "devices": {"plc": {"driver": "modbus", "host": "127.0.0.1"}},
    "tags": TAGS,
    "units": {"wait_attention_s": 120, "R1": {"class": "reactor"}, "TK2": {"class": "tank"}},
    "phases": {"R1/Charge": {
        "unit": "R1", "command": "[plant]R1/Charge/Command", "state": "[plant]R1/Charge/State",
        "owner": "[plant]R1/Charge/Owner", "owner_id": 3, "numbering": "packml",
        "params": {"target_l": "[plant]R1/Charge/Target"}, "reports": {"actual_l": "[plant]R1/Charge/Actual"},
        "start_timeout_s": 5, "command_timeout_s": 20.5,
    }},
    "watchdog": {"tag": "[plant]Exchange/Heartbeat", "period_ms": 500},
}


def with_changes(section: str, name: str | None, **changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(PLANT)
    table = raw[section] if name is None else raw[section][name]
    for key, value in changes.items():
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return raw


def test_a_phase_its_unit_and_the_watchdog_are_read_as_written() -> None:
    config = config_from_dict(PLANT, env={})
    phase = config.phases["R1/Charge"]
    assert (phase.unit, phase.command, phase.state, phase.owner, phase.owner_id, phase.numbering) == (
        "R1", "[plant]R1/Charge/Command", "[plant]R1/Charge/State", "[plant]R1/Charge/Owner", 3, "packml")
    assert phase.params == {"target_l": "[plant]R1/Charge/Target"}
    assert phase.reports == {"actual_l": "[plant]R1/Charge/Actual"}
    assert (phase.start_timeout_s, phase.command_timeout_s) == (5.0, 20.5)
    assert (config.watchdog.tag, config.watchdog.period_ms) == ("[plant]Exchange/Heartbeat", 500)
    assert config.units.wait_attention_s == 120.0
    assert {name: unit.unit_class for name, unit in config.units.units.items()} == {"R1": "reactor", "TK2": "tank"}


def test_the_defaults_are_pli_owner_one_and_no_watchdog() -> None:
    raw = with_changes("phases", "R1/Charge", unit=None, owner=None, owner_id=None, numbering=None, params=None,
                       reports=None, start_timeout_s=None, command_timeout_s=None)
    del raw["watchdog"], raw["units"]
    config = config_from_dict(raw, env={})
    phase = config.phases["R1/Charge"]
    assert (phase.unit, phase.owner, phase.owner_id, phase.numbering, dict(phase.params), dict(phase.reports)) == (
        None, None, 1, "pli", {}, {})
    assert (phase.start_timeout_s, phase.command_timeout_s) == (10.0, 30.0)
    assert config.watchdog.tag is None and config.units.units == {}


@pytest.mark.parametrize(("raw", "message"), [
    (with_changes("phases", "R1/Charge", comand="[plant]R1/Charge/Command"), "unknown key"),
    (with_changes("phases", "R1/Charge", command=None), 'phases."R1/Charge".command must be a non-empty string'),
    (with_changes("phases", "R1/Charge", command="[plant]R1/Nope"), "tag '[plant]R1/Nope' is not configured"),
    (with_changes("phases", "R1/Charge", command="[plant]R1/StateRo"), "is read-only"),
    (with_changes("phases", "R1/Charge", state="[plant]R1/Level"), "of type 'Float32'; a phase's numbers need an "
                                                                   "integer tag"),
    (with_changes("phases", "R1/Charge", unit="R9"), "unit 'R9' names no [units.NAME] (configured: R1, TK2)"),
    (with_changes("phases", "R1/Charge", numbering="isa"), "numbering must be one of pli, packml, got 'isa'"),
    (with_changes("phases", "R1/Charge", owner_id=0), "owner_id must be an integer from 1 to 32767"),
    (with_changes("phases", "R1/Charge", params={"target_l": "[plant]R1/StateRo"}),
     "params.target_l: tag '[plant]R1/StateRo' is read-only"),
    (with_changes("phases", "R1/Charge", reports={"actual_l": 5}), "reports.actual_l must be a tag path"),
    (with_changes("phases", "R1/Charge", start_timeout_s=0), "start_timeout_s must be a number of seconds above 0"),
    (with_changes("watchdog", None, period_ms=50), "watchdog.period_ms must be an integer from 100 to 60000"),
    (with_changes("watchdog", None, tag="[plant]R1/StateRo"), "watchdog.tag: tag '[plant]R1/StateRo' is read-only"),
    (with_changes("units", "R1", **{"class": None}), "units.R1.class must be a non-empty string (missing)"),
    (with_changes("units", None, wait_attention=5), "unknown key"),
])
def test_a_mistake_is_one_line_naming_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict(raw, env={})
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_phase_is_named_unit_slash_phase() -> None:
    raw = copy.deepcopy(PLANT)
    raw["phases"]["Charge"] = raw["phases"].pop("R1/Charge")
    with pytest.raises(ConfigError, match=r'a phase is named UNIT/PHASE \(e.g. "R1/Charge"\), got \'Charge\''):
        config_from_dict(raw, env={})


def test_the_numberings_are_those_of_the_contract() -> None:
    assert set(NUMBERINGS) == {"pli", "packml"}
    assert [PLI.commands[c] for c in ("START", "HOLD", "RESTART", "STOP", "RESET", "ABORT")] == [1, 4, 5, 6, 7, 8]
    assert [PLI.state_name(n) for n in (1, 2, 3, 9, 11, 13, 17, 42)] == [
        "IDLE", "RUNNING", "COMPLETE", "HELD", "STOPPED", "ABORTED", "PERMISSIVE", "42"]
    assert [PACKML.commands[c] for c in ("RESET", "START", "STOP", "HOLD", "UNHOLD", "ABORT")] == [1, 2, 3, 4, 5, 8]
    assert [PACKML.state_name(n) for n in (2, 4, 6, 9, 11, 17)] == [
        "STOPPED", "IDLE", "EXECUTE", "ABORTED", "HELD", "COMPLETE"]
