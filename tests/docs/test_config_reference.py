"""docs/configuration.md against the config loader, so the page cannot drift from the code.

- Every key the loader accepts, in every table, is in the page's table for it, and every key the
  page's tables list is one the loader accepts.
- Where the page gives a default, it is the loader's: for the fixed tables, the config loaded from
  nothing; for ``[databases.NAME]``, the settings' defaults; for ``[devices.NAME]`` each documented
  default is a value the driver accepts.
- The page's TOML examples are accepted by a real runtime (``running_engine``: the same checks a
  gateway makes at start, devices and tags included).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

# exchange._config, exchange._drivers.registry and exchange._integrations.sql_engine are internals: this
# is the one place the test reaches into them, so a rename inside exchange/ is a change here only. The
# drivers' keys are not imported (the drivers are being reorganised): they are read from the drivers'
# own refusal of an unknown key, which lists the keys they know ("... (known: a, b, c)").
from exchange import _config as loader
from exchange import _config_phases as equipment
from exchange import _config_plant as plant
from exchange import _config_record as record
from exchange import _config_roles as roles
from exchange import _config_signatures as signatures
from exchange import _config_simulation as simulation
from exchange._drivers.registry import validate_settings
from exchange._integrations.sql_engine import DatabaseSettings
from exchange._tags.table import TagTable
from exchange.errors import ConfigError
from exchange.workflows.testing import running_engine
from tests.docs.markdown import code_blocks, first_code, page, sections, table_rows

# ----- the loader's key lists ------------------------------------------------------------------------
UNKNOWN_PROBE = "no_such_key_for_the_docs_test"
REQUIRED_DEVICE_KEYS = {"modbus": {"host": "127.0.0.1"}, "enip": {"host": "127.0.0.1"},
                        "opcua": {"url": "opc.tcp://127.0.0.1:4840/"}}
# keys that belong to one Modbus transport: their defaults are checked on a device of that transport
SERIAL = {"driver": "modbus", "transport": "serial", "serial_port": "/dev/ttyS0"}
KEY_CONTEXT = {("modbus", key): SERIAL for key in ("baudrate", "parity", "stopbits", "bytesize")}


def device_keys(driver: str) -> set[str]:
    """The keys a ``[devices.NAME]`` table of ``driver`` may hold, as its validation lists them."""
    settings = {"driver": driver, **REQUIRED_DEVICE_KEYS[driver], UNKNOWN_PROBE: 1}
    with pytest.raises(ConfigError) as refused:
        validate_settings(loader.DeviceConfig(name="probe", driver=driver, settings=settings))
    match = re.search(r"\(known: ([^)]*)\)", str(refused.value))
    assert match, f"the {driver} driver's refusal no longer lists its keys: {refused.value}"
    return {key.strip() for key in match.group(1).split(",")} | {"driver"}


def validate_device(driver: str, settings: Mapping[str, Any]) -> None:
    validate_settings(loader.DeviceConfig(name="probe", driver=driver, settings={"driver": driver, **settings}))


def accepted_keys() -> dict[str, set[str]]:
    """Each table of the page (by its heading's code) -> the keys the loader accepts there. A
    driver's keys are those of its own table plus the common ``[devices.NAME]`` one."""
    keys = {
        "[store]": set(loader.STORE_KEYS),
        "[apps]": set(loader.APPS_KEYS),
        "[engine]": set(loader.ENGINE_KEYS),
        "[http]": set(loader.HTTP_KEYS),
        "[api]": set(loader.API_KEYS),
        "[retention]": set(loader.RETENTION_KEYS),
        "[opcua_server]": set(loader.OPCUA_SERVER_KEYS),
        "[attention]": set(loader.ATTENTION_KEYS),
        "[schedules.NAME]": set(plant.SCHEDULE_KEYS),
        "[triggers.NAME]": set(plant.TRIGGER_KEYS),
        "[command_tags.NAME]": set(plant.COMMAND_TAG_KEYS),
        '[phases."UNIT/PHASE"]': set(equipment.PHASE_KEYS),
        "[watchdog]": set(equipment.WATCHDOG_KEYS),
        "[units]": set(equipment.UNITS_SETTINGS),
        "[units.NAME]": set(equipment.UNIT_KEYS),
        "[roles.NAME]": set(roles.ROLE_KEYS),
        "[signatures]": set(signatures.SIGNATURES_KEYS),
        "[record]": set(record.RECORD_SETTINGS),
        "[record.WORKFLOW]": set(record.RECORD_WORKFLOW_KEYS),
        '[tags."PATH"]': set(loader.TAG_KEYS),
        "[databases.NAME]": {"url", *DatabaseSettings.__dataclass_fields__},
        "[simulation]": set(loader.SIMULATION_KEYS) - {"tags", "phases"},
        '[simulation.phases."UNIT/PHASE"]': set(simulation.SIMULATION_PHASE_KEYS),
        '[simulation.tags."PATH"]': set(simulation.SIMULATION_TAG_KEYS),
        '[simulation.tags."PATH".methods.NAME]': set(simulation.SIMULATION_METHOD_KEYS),
    }
    for driver in loader.DRIVERS:
        keys[f'driver = "{driver}"'] = device_keys(driver)
    return keys


def loaded_defaults() -> dict[str, dict[str, Any]]:
    """The values the loader gives each key of the fixed tables when the file says nothing."""
    config = loader.config_from_dict({}, env={})
    engine = {key: getattr(config.engine, key) for key in loader.ENGINE_KEYS}
    http = {key: getattr(config.http, key) for key in loader.HTTP_KEYS}
    return {
        "[store]": {"url": loader.DEFAULT_STORE_URL, "shared": config.store_shared},
        "[apps]": {"paths": ["apps"]},
        "[engine]": engine,
        "[http]": http,
        "[api]": {key: getattr(config.api, key) for key in loader.API_KEYS},
        "[retention]": {key: getattr(config.retention, key) for key in loader.RETENTION_KEYS},
        "[opcua_server]": {key: getattr(config.opcua_server, key) for key in loader.OPCUA_SERVER_KEYS},
        "[attention]": {key: getattr(config.attention, key) for key in loader.ATTENTION_KEYS},
        "[databases.NAME]": {key: getattr(DatabaseSettings(), key) for key in DatabaseSettings.__dataclass_fields__},
        "[simulation]": {"tick_ms": config.simulation.tick_ms, "model": config.simulation.model},
        "[watchdog]": {"period_ms": config.watchdog.period_ms},
        '[simulation.phases."UNIT/PHASE"]': {key: getattr(simulation.SimulatedPhaseConfig(name="U/P"), key)
                                             for key in simulation.SIMULATION_PHASE_KEYS},
        "[units]": {"wait_attention_s": config.units.wait_attention_s},
        "[signatures]": {"required_for": sorted(config.signatures.required_for)},
        "[record]": {"tags": list(config.record.tags), "interval_ms": config.record.interval_ms,
                     "keep_alive_ms": config.record.keep_alive_ms},
        '[phases."UNIT/PHASE"]': {key: getattr(equipment.PhaseConfig(name="U/P", command="c", state="s"), key)
                                  for key in ("owner_id", "numbering", "params", "reports", "start_timeout_s",
                                              "command_timeout_s")},
    }


# ----- the page ------------------------------------------------------------------------------------
PAGE = page("configuration.md")
MISSING = object()  # a default cell that is not a TOML value (required, none)


def documented() -> dict[str, dict[str, object]]:
    """Each table of the page (its heading's first code span) -> {key: documented default}."""
    tables: dict[str, dict[str, object]] = {}
    for section in sections(PAGE):
        rows = table_rows(section.body)
        if not rows or rows[0] and first_code(rows[0][0]) is None:
            continue
        title = first_code(section.title)
        assert title is not None, f"the table under {section.title!r} needs a `[table]` heading"
        assert title not in tables, f"two tables for {title}"
        tables[title] = {}
        for row in rows:
            key = first_code(row[0])
            assert key is not None and len(row) == 4, f"{title}: row {row} is not | `key` | type | default | meaning |"
            tables[title][key] = default_of(row[2])
    return tables


def default_of(cell: str) -> object:
    code = first_code(cell)
    if code is None or cell != f"`{code}`":
        return MISSING
    return tomllib.loads(f"value = {code}")["value"]


DOCUMENTED = documented()
ACCEPTED = accepted_keys()


COMMON = "[devices.NAME]"  # the table of the keys every driver takes


def test_every_table_of_the_loader_has_a_table_on_the_page() -> None:
    assert set(DOCUMENTED) == set(ACCEPTED) | {COMMON}
    for section in loader.SECTIONS:
        assert any(title.startswith(f"[{section}") for title in DOCUMENTED), section


def test_the_common_device_keys_are_every_drivers() -> None:
    for driver in loader.DRIVERS:
        assert set(DOCUMENTED[COMMON]) <= device_keys(driver), driver


@pytest.mark.parametrize("table", sorted(ACCEPTED))
def test_the_page_lists_exactly_the_keys_the_loader_accepts(table: str) -> None:
    page_keys = set(DOCUMENTED[table])
    if table.startswith("driver = "):
        page_keys |= set(DOCUMENTED[COMMON])
    assert page_keys - ACCEPTED[table] == set(), f"{table}: documented but refused by the loader"
    assert ACCEPTED[table] - page_keys == set(), f"{table}: accepted by the loader but not documented"


@pytest.mark.parametrize("table", sorted(loaded_defaults()))
def test_documented_defaults_are_the_loaders(table: str) -> None:
    for key, expected in loaded_defaults()[table].items():
        shown = DOCUMENTED[table][key]
        if shown is MISSING:
            continue  # "required", "none": checked by the tests of the loader
        assert shown == expected, f"{table} {key}: the page says {shown!r}, the loader uses {expected!r}"


def test_tag_defaults_are_the_loaders() -> None:
    raw = {"devices": {"plc": {"driver": "modbus", "host": "127.0.0.1"}},
           "tags": {"[p]T": {"device": "plc", "address": "HR1"}}}
    config = loader.config_from_dict(raw, env={})
    tag = config.tags["[p]T"]
    assert DOCUMENTED['[tags."PATH"]']["access"] == TagTable.from_config(config).get("[p]T").access
    assert DOCUMENTED['[tags."PATH"]']["bool_numbers"] == tag.bool_numbers


def test_simulated_tag_defaults_are_the_loaders() -> None:
    raw = {"devices": {"plc": {"driver": "modbus", "host": "127.0.0.1"}},
           "tags": {"[p]A": {"device": "plc", "address": "C1"}, "[p]B": {"device": "plc", "address": "C2"}},
           "simulation": {"tags": {"[p]B": {"follows": "[p]A"}}}}
    tag = loader.config_from_dict(raw, env={}).simulation.tags["[p]B"]
    assert DOCUMENTED['[simulation.tags."PATH"]']["delay_ms"] == tag.delay_ms


@pytest.mark.parametrize("driver", loader.DRIVERS)
def test_documented_device_defaults_are_accepted_by_the_driver(driver: str) -> None:
    tables = (DOCUMENTED[COMMON], DOCUMENTED[f'driver = "{driver}"'])
    for table in tables:
        for key, default in table.items():
            if default is MISSING or key == "driver":
                continue
            if (driver, key) == ("opcua", "security_mode"):
                continue  # accepted only together with a security policy (and its certificate files)
            context = KEY_CONTEXT.get((driver, key), REQUIRED_DEVICE_KEYS[driver])
            validate_device(driver, {**context, key: default})


def examples() -> list[dict[str, Any]]:
    return [tomllib.loads(block.body) for block in code_blocks(PAGE) if block.lang == "toml"]


def test_the_pages_examples_start_a_runtime(tmp_path: Path) -> None:
    found = examples()
    assert len(found) >= 2
    apps = tmp_path / "apps"
    apps.mkdir()
    for index, raw in enumerate(found):
        variables = set(re.findall(r"\$\{(\w+)\}", repr(raw)))
        env = dict.fromkeys(variables, "secret")
        raw = dict(raw, store={"url": f"sqlite:///{tmp_path}/store{index}.db"}, apps={"paths": [str(apps)]})
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            with running_engine(raw, base_dir=tmp_path) as rt:  # a mistake raises here, naming it
                assert rt.listRuns() == []
