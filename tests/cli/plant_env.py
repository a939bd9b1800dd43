"""An ``exchange`` project folder on the session's simulated plant: the tags commands' tests share it."""

from __future__ import annotations

from pathlib import Path

from simulators.plant_servers import PlantServers
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv

LEVEL = "[plant]Line1/Tank/Level"  # Modbus IRF1, Float32, ro
INLET = "[plant]Line1/Tank/InletValve/Cmd"  # Modbus C1, Boolean, rw
SPEED = "[plant]Line1/Mixer/Speed"  # OPC UA, no type (the node's Int16), rw, 0..1500
RUNNING = "[plant]Line1/Mixer/Running"  # OPC UA, ro
SETPOINT = "[plant]Line1/Heater/Setpoint"  # EtherNet/IP REAL, rw, 0..95


def plant_env(root: Path, plant: PlantServers, zygote: ForkServer, extra: str = "") -> ExchangeEnv:
    """A project in ``root`` whose config has the plant's devices and tags (and ``extra`` TOML). No
    store yet: a command that writes a tag by hand opens it (for its audit) only once it sends."""
    env = ExchangeEnv.create(root, zygote=zygote, seeded=False)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write("\n" + plant.config_text + "\n" + extra)
    return env
