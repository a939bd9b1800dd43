"""``exchange phases``: each configured phase with the state its PLC (a real Modbus server) reports
now, named by the phase's numbering, and whom its owner tag names; a device that cannot be read
shows ``-`` and exits 3. (The commanding run, from a real gateway: tests/console/test_console_phases.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    addresses = ("HR1", "HR2", "HR3", "HR11", "HR12")
    server = ModbusSimServer([SimPoint(address, DataType.INT16, 0) for address in addresses])
    server.start()
    yield server
    server.stop()


def _env(root: Path, zygote: ForkServer, port: int) -> ExchangeEnv:
    env = ExchangeEnv.create(root, zygote=zygote)
    tags = {"R1/Charge/Command": "HR1", "R1/Charge/State": "HR2", "R1/Charge/Owner": "HR3",
            "TK2/Transfer/Command": "HR11", "TK2/Transfer/State": "HR12"}
    text = f'[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = {port}\ntimeout_ms = 500\n'
    text += "".join(f'[tags."[plant]{path}"]\ndevice = "plc"\naddress = "{address}"\ntype = "Int16"\n'
                    for path, address in tags.items())
    text += '''
[units.R1]
class = "reactor"

[phases."R1/Charge"]
unit = "R1"
command = "[plant]R1/Charge/Command"
state = "[plant]R1/Charge/State"
owner = "[plant]R1/Charge/Owner"
owner_id = 7

[phases."TK2/Transfer"]
command = "[plant]TK2/Transfer/Command"
state = "[plant]TK2/Transfer/State"
numbering = "packml"
'''
    with env.config_path.open("a", encoding="utf-8") as file:
        file.write("\n" + text)
    return env


def test_phases_shows_the_plc_s_states_by_their_numbering_and_the_owner(
        tmp_path: Path, exchange_zygote: ForkServer, plc: ModbusSimServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, plc.port)
    plc.set("HR2", 9)  # pli: HELD
    plc.set("HR3", 7)  # our owner_id
    plc.set("HR12", 6)  # packml: EXECUTE
    listed = env.cli("phases", "--json")
    assert listed.returncode == 0, listed.stderr
    assert listed.json() == [
        {"phase": "R1/Charge", "unit": "R1", "state": "HELD", "state_number": 9, "state_quality": "Good",
         "state_error": None, "owner": 7, "owner_quality": "Good", "owned_by": "exchange", "run": None},
        {"phase": "TK2/Transfer", "unit": None, "state": "EXECUTE", "state_number": 6, "state_quality": "Good",
         "state_error": None, "owner": None, "owner_quality": None, "owned_by": None, "run": None},
    ]
    plc.set("HR3", 2)  # another batch system's id
    plc.set("HR12", 99)  # a number the numbering has no name for
    lines = env.cli("phases").stdout.splitlines()
    assert lines[0].split() == ["PHASE", "UNIT", "STATE", "OWNER", "RUN"]
    assert lines[1].split() == ["R1/Charge", "R1", "HELD", "other", "(2)", "-"]
    assert lines[2].split() == ["TK2/Transfer", "-", "99", "-", "-"]
    plc.stop()
    down = env.cli("phases")
    assert down.returncode == 3, down.stdout + down.stderr
    assert "- (Bad_" in down.stdout


def test_no_phases_says_so(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    assert env.cli("phases", "--json").json() == []
    listed = env.cli("phases")
    assert listed.returncode == 0 and "no phases configured" in listed.stdout + listed.stderr


def test_phases_without_a_store_yet_shows_the_plc_and_no_runs(
        tmp_path: Path, exchange_zygote: ForkServer, plc: ModbusSimServer) -> None:
    env = _env(tmp_path / "plant", exchange_zygote, plc.port)
    assert env.sqlite_path is not None
    env.sqlite_path.unlink()  # no gateway has run yet: an engineer checks the PLC first
    plc.set("HR2", 1)  # IDLE
    listed = env.cli("phases", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(p["phase"], p["state"], p["run"]) for p in listed.json()] == [("R1/Charge", "IDLE", None),
                                                                         ("TK2/Transfer", "0", None)]
    assert "the runs commanding the phases are unknown" in listed.stderr
