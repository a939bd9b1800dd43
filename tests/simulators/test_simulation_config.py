"""``[simulation]`` as the config loader checks it: every command (a gateway too) refuses a bad one,
naming the key and the closest valid one, and a gateway runs with a good one (it ignores it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict, load_config
from exchange.errors import ConfigError
from exchange.workflows.testing import running_engine

BASE = {
    "devices": {"plc": {"driver": "modbus", "host": "127.0.0.1"}},
    "tags": {"[site]Valve/Cmd": {"device": "plc", "address": "C1"},
             "[site]Valve/Open": {"device": "plc", "address": "DI1", "access": "ro"},
             "[site]Silo/Level": {"device": "plc", "address": "IRF1", "access": "ro"}},
}


def with_simulation(simulation: Any) -> dict[str, Any]:
    return {**BASE, "simulation": simulation}


def test_a_full_section_is_read_with_the_model_resolved_against_the_config(tmp_path: Path) -> None:
    (tmp_path / "exchange.toml").write_text('''
[devices.plc]
driver = "modbus"
host = "127.0.0.1"

[tags."[site]Valve/Cmd"]
device = "plc"
address = "C1"

[tags."[site]Valve/Open"]
device = "plc"
address = "DI1"

[simulation]
tick_ms = 50
model = "sim/area9.py"

[simulation.tags."[site]Valve/Open"]
follows = "[site]Valve/Cmd"
delay_ms = 300

[simulation.tags."[site]Valve/Cmd"]
initial = true
type = "Boolean"
''')
    simulation = load_config(tmp_path / "exchange.toml", env={}).simulation
    assert simulation.tick_ms == 50
    assert simulation.model == str(tmp_path / "sim" / "area9.py")
    follower = simulation.tags["[site]Valve/Open"]
    assert (follower.follows, follower.delay_ms, follower.initial) == ("[site]Valve/Cmd", 300, None)
    command = simulation.tags["[site]Valve/Cmd"]
    assert (command.initial, command.data_type, command.follows) == (True, "Boolean", None)


def test_defaults_and_a_module_name_as_model() -> None:
    assert config_from_dict(BASE, env={}).simulation.tick_ms == 100
    assert config_from_dict(BASE, env={}).simulation.model is None
    assert config_from_dict(with_simulation({"model": "sim.area9"}), env={}).simulation.model == "sim.area9"


@pytest.mark.parametrize(("simulation", "message"), [
    ({"tik_ms": 10}, "simulation: unknown key 'tik_ms' (did you mean 'tick_ms'?)"),
    ({"modle": "m.py"}, "simulation: unknown key 'modle' (did you mean 'model'?)"),
    ({"tick_ms": 0}, "simulation.tick_ms must be an integer from 1 to 60000, got an integer 0"),
    ({"tick_ms": 2.5}, "simulation.tick_ms must be an integer from 1 to 60000, got a float 2.5"),
    ({"model": ""}, "simulation.model must be a Python file"),
    ({"model": "my model"}, "simulation.model 'my model' is neither a .py file nor a module name"),
    ({"tags": {"[site]Valve/Opne": {"initial": True}}},
     "simulation.tags.\"[site]Valve/Opne\": '[site]Valve/Opne' is not a configured tag "
     "(did you mean '[site]Valve/Open'?)"),
    ({"tags": {"[site]Valve/Open": {"folows": "[site]Valve/Cmd"}}},
     "unknown key 'folows' (did you mean 'follows'?)"),
    ({"tags": {"[site]Valve/Open": {"inital": True}}}, "unknown key 'inital' (did you mean 'initial'?)"),
    ({"tags": {"[site]Valve/Open": {"follows": "[site]Valve/Cdm"}}},
     "follows: '[site]Valve/Cdm' is not a configured tag (did you mean '[site]Valve/Cmd'?)"),
    ({"tags": {"[site]Valve/Open": {"follows": "[site]Valve/Open"}}}, "follows names the tag itself"),
    ({"tags": {"[site]Valve/Open": {"delay_ms": 300}}}, "delay_ms needs follows"),
    ({"tags": {"[site]Valve/Open": {"follows": "[site]Valve/Cmd", "delay_ms": -1}}},
     "delay_ms must be an integer from 0 to 86400000, got an integer -1"),
    ({"tags": {"[site]Silo/Level": {"initial": [[1, 2]]}}},  # a list is an array tag's; one level only
     "initial must be a boolean, number or string, or a list of them for an array tag, got an array"),
    ({"tags": {"[site]Silo/Level": {"initial": [1.0, float("inf")]}}}, "initial must be a finite number"),
    ({"tags": {"[site]Silo/Level": {"initial": float("nan")}}}, "initial must be a finite number"),
    ({"tags": {"[site]Silo/Level": {"type": 5}}}, "type must be a data type name"),
    ({"tags": {"[site]Silo/Level": 5}}, "must be a table, got an integer 5"),
    ("on", "[simulation] must be a table, got a string 'on'"),
])
def test_a_bad_section_is_refused_naming_the_key(simulation: Any, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict(with_simulation(simulation), source="plant.toml", env={})
    assert message in str(refused.value)
    assert str(refused.value).startswith("plant.toml")


def test_a_gateway_runs_with_the_section_and_ignores_it(tmp_path: Path) -> None:
    raw = with_simulation({"tick_ms": 20, "model": "sim/none_yet.py",
                           "tags": {"[site]Valve/Open": {"follows": "[site]Valve/Cmd", "delay_ms": 300}}})
    raw = {**raw, "store": {"url": f"sqlite:///{tmp_path}/exchange.db"}, "apps": {"paths": [str(tmp_path)]}}
    with running_engine(raw, base_dir=tmp_path) as rt:  # the gateway's own start checks pass
        assert rt.listRuns() == []
