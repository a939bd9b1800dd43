"""A plant engineer's own config for the simulator tests: three devices, one per protocol, with their
own addresses, types, settings and a ``[simulation]`` with follows and a model."""

from __future__ import annotations

from pathlib import Path

CONFIG = '''
[store]
url = "sqlite:///var/exchange.db"

[apps]
paths = ["apps"]

[devices.silo]
driver = "modbus"
host = "10.0.0.5"
port = 502
unit_id = 3

[devices.packer]
driver = "modbus"
host = "10.0.0.6"
port = 502
zero_based = true
word_order = "little"

[devices.line]
driver = "opcua"
url = "opc.tcp://10.0.0.7:4840/area9/"
username = "exchange"
password = "secret"

[devices.logix]
driver = "enip"
host = "10.0.0.8"

[tags."[site]Area9/Valve3/Cmd"]
device = "silo"
address = "C3"

[tags."[site]Area9/Valve3/Open"]
device = "silo"
address = "DI3"
access = "ro"

[tags."[site]Area9/Silo/Level"]
device = "silo"
address = "IRF10"
access = "ro"

[tags."[site]Area9/Silo/Setpoint"]
device = "silo"
address = "HRF20"

[tags."[site]Area9/Silo/Batch"]
device = "silo"
address = "HR30"
type = "UInt16"

[tags."[site]Area9/Packer/Count"]
device = "packer"
address = "HRI0"

[tags."[site]Area9/Packer/Weight"]
device = "packer"
address = "HRD4"

[tags."[site]Area9/Motor/Speed"]
device = "line"
address = "ns=2;s=Area9.Motor.Speed"

[tags."[site]Area9/Motor/Run"]
device = "line"
address = "ns=2;i=1001"

[tags."[site]Area9/Motor/Running"]
device = "line"
address = "nsu=urn:acme:area9;s=Motor.Running"
access = "ro"

[tags."[site]Area9/Motor/Recipe"]
device = "line"
address = "ns=3;s=Recipe.Name"
type = "String"

[tags."[site]Area9/Heater/Temp"]
device = "logix"
address = "Heater_Temp"
type = "REAL"

[tags."[site]Area9/Heater/On"]
device = "logix"
address = "Program:Main.HeaterOn"

[tags."[site]Area9/Heater/Zone2"]
device = "logix"
address = "Zones[2]"
type = "DINT"

[simulation]
tick_ms = 20
model = "sim/area9.py"

[simulation.tags."[site]Area9/Valve3/Open"]
follows = "[site]Area9/Valve3/Cmd"
delay_ms = 300

[simulation.tags."[site]Area9/Silo/Level"]
initial = 62.5

[simulation.tags."[site]Area9/Silo/Setpoint"]
initial = 80.0

[simulation.tags."[site]Area9/Silo/Batch"]
initial = 40000

[simulation.tags."[site]Area9/Packer/Count"]
initial = -70000

[simulation.tags."[site]Area9/Packer/Weight"]
initial = 12.25

[simulation.tags."[site]Area9/Motor/Speed"]
type = "Int16"
initial = 900

[simulation.tags."[site]Area9/Motor/Run"]
initial = false

[simulation.tags."[site]Area9/Motor/Running"]
follows = "[site]Area9/Motor/Run"
delay_ms = 100

[simulation.tags."[site]Area9/Motor/Recipe"]
initial = "wheat"

[simulation.tags."[site]Area9/Heater/Temp"]
initial = 21.5

[simulation.tags."[site]Area9/Heater/On"]
initial = true

[simulation.tags."[site]Area9/Heater/Zone2"]
initial = 7
'''

MODEL = '''
FILL_PERCENT_PER_S = 2.0


def step(plant, dt_s):
    """The silo fills while its valve is open (its feedback), up to 100 %."""
    if plant["[site]Area9/Valve3/Open"]:
        level = plant["[site]Area9/Silo/Level"]
        plant["[site]Area9/Silo/Level"] = min(100.0, level + FILL_PERCENT_PER_S * dt_s)
'''


def write_project(folder: Path, config: str = CONFIG, model: str = MODEL) -> Path:
    """The engineer's project: ``exchange.toml`` and ``sim/area9.py``; the config's path."""
    (folder / "sim").mkdir(parents=True, exist_ok=True)
    (folder / "sim" / "area9.py").write_text(model, encoding="utf-8")
    path = folder / "exchange.toml"
    path.write_text(config, encoding="utf-8")
    return path
