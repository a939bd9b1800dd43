"""What the simulator cannot serve is refused naming the device or tag, before anything listens; a
model that raises is reported with its line (and the tag) while the plant keeps serving."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from exchange._cli.main import cli
from simulators.engine import SimulatedPlant
from simulators.spec import SimulationError
from simulators.testing import simulate_config
from tests.simulators.own_plant import write_project

DEVICES = '''
[devices.plc]
driver = "modbus"
host = "127.0.0.1"

[devices.line]
driver = "opcua"
url = "opc.tcp://127.0.0.1:4840/"

[devices.logix]
driver = "enip"
host = "127.0.0.1"

[tags."[p]Ok"]
device = "plc"
address = "HR1"
'''

# (case, tags and [simulation] added to DEVICES, what the one error line says)
BAD = [
    ("modbus-byte-order", '[devices.drive7]\ndriver = "modbus"\ntransport = "rtu-over-tcp"\nhost = "127.0.0.1"\n'
     'byte_order = "little"\n[tags."[p]Drive/Speed"]\ndevice = "drive7"\naddress = "HR1"\n',
     "device 'drive7' (modbus): byte_order 'little': the simulator serves registers big-endian"),
    ("methods-on-modbus", '[simulation]\nmodel = "sim.py"\n[simulation.tags."[p]Ok".methods.Go]\ncall = "go"\n',
     "tag '[p]Ok' (device 'plc', address 'HR1'): the modbus simulator serves no methods (OPC UA does)"),
    ("list-initial-for-a-scalar", '[simulation.tags."[p]Ok"]\ninitial = [1, 2]\n',
     "tag '[p]Ok' (device 'plc', address 'HR1'): initial [1, 2]: a list is the initial of an array tag"),
    ("scalar-initial-for-an-array", '[tags."[p]Arr"]\ndevice = "line"\naddress = "ns=2;s=Arr"\ntype = "Int16[]"\n'
     '[simulation.tags."[p]Arr"]\ninitial = 3\n',
     "tag '[p]Arr' (device 'line', address 'ns=2;s=Arr'): initial 3: an array tag starts at a list"),
    ("array-initial-out-of-range", '[tags."[p]Arr"]\ndevice = "line"\naddress = "ns=2;s=Arr"\ntype = "Int16[]"\n'
     '[simulation.tags."[p]Arr"]\ninitial = [1, 70000]\n',
     "initial element [1] 70000: 70000 is outside the Int16 range"),
    ("array-initial-of-another-length", '[tags."[p]Arr"]\ndevice = "line"\naddress = "ns=2;s=Arr"\n'
     'type = "Int16[3]"\n[simulation.tags."[p]Arr"]\ninitial = [1, 2]\n',
     "initial [1, 2] has 2 element(s), but the tag holds 3 (type = \"Int16[3]\")"),
    ("same-address-two-types",
     '[tags."[p]A"]\ndevice = "plc"\naddress = "HR1"\ntype = "UInt16"\n',
     "tag '[p]A' (device 'plc', address 'HR1'): tag '[p]Ok' is at the same address as Int16, this one as UInt16"),
    ("overlapping-registers", '[tags."[p]F"]\ndevice = "plc"\naddress = "HRF2"\n[tags."[p]G"]\ndevice = "plc"\n'
     'address = "HR3"\n', "tag '[p]G' (device 'plc', address 'HR3'): it overlaps tag '[p]F' at 'HRF2'"),
    ("bit-inside-a-float", '[tags."[p]F"]\ndevice = "plc"\naddress = "HRF2"\n[tags."[p]Bit"]\ndevice = "plc"\n'
     'address = "HR3.1"\n', "tag '[p]Bit' (device 'plc', address 'HR3.1'): tag '[p]Bit' at 'HR3.1' is a bit of a "
     "register inside tag '[p]F' at 'HRF2' (Float32): a bit shares its register only with a 16-bit word"),
    ("bit-and-word-start-apart", '[tags."[p]Bit"]\ndevice = "plc"\naddress = "HR1.2"\n[simulation.tags."[p]Ok"]\n'
     'initial = 4\n[simulation.tags."[p]Bit"]\ninitial = false\n',
     "tag '[p]Bit' (device 'plc', address 'HR1.2'): starts at False, but it is bit 2 of tag '[p]Ok', "
     "which starts at 4"),
    ("opcua-standard-namespace", '[tags."[p]T"]\ndevice = "line"\naddress = "ns=0;i=2258"\ntype = "Int32"\n',
     "tag '[p]T' (device 'line', address 'ns=0;i=2258'): ns=0 is the standard namespace"),
    ("opcua-no-type", '[tags."[p]T"]\ndevice = "line"\naddress = "ns=2;s=T"\n',
     "tag '[p]T' (device 'line', address 'ns=2;s=T'): has no type"),
    ("initial-not-the-type", '[tags."[p]T"]\ndevice = "plc"\naddress = "HRF10"\n'
     '[simulation.tags."[p]T"]\ninitial = "full"\n',
     "tag '[p]T' (device 'plc', address 'HRF10'): initial 'full': 'full' is not a number"),
    ("initial-out-of-range", '[simulation.tags."[p]Ok"]\ninitial = 70000\n',
     "tag '[p]Ok' (device 'plc', address 'HR1'): initial 70000: 70000 is outside the Int16 range"),
    ("simulation-type-differs", '[simulation.tags."[p]Ok"]\ntype = "Float32"\n',
     "tag '[p]Ok' (device 'plc', address 'HR1'): [simulation.tags] type is Float32, but the tag is Int16"),
    ("follows-another-kind", '[tags."[p]B"]\ndevice = "plc"\naddress = "C1"\n'
     '[simulation.tags."[p]B"]\nfollows = "[p]Ok"\n',
     "tag '[p]B': follows '[p]Ok', but a Boolean cannot take a Int16 value"),
    ("logix-two-dimensions", '[tags."[p]M"]\ndevice = "logix"\naddress = "Grid[1,2]"\ntype = "DINT"\n',
     "tag '[p]M' (device 'logix', address 'Grid[1,2]'): the simulated controller serves one-dimensional arrays"),
    ("logix-array-and-scalar", '[tags."[p]E"]\ndevice = "logix"\naddress = "Arr[1]"\ntype = "DINT"\n'
     '[tags."[p]S"]\ndevice = "logix"\naddress = "Arr"\ntype = "DINT"\n',
     "tag '[p]S' (device 'logix', address 'Arr'): tag '[p]E' uses 'arr' as a array of Int32, this one as a scalar"),
]


@pytest.mark.parametrize(("extra", "message"), [pytest.param(e, m, id=i) for i, e, m in BAD])
def test_what_cannot_be_served_is_named(tmp_path: Path, extra: str, message: str) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text(DEVICES + extra)
    (tmp_path / "sim.py").write_text("def step(plant, dt_s):\n    pass\n\n\ndef go(plant):\n    pass\n")
    with pytest.raises(SimulationError) as refused:
        SimulatedPlant.from_file(path)
    text = str(refused.value)
    assert text.startswith(f"{path}: the simulator cannot serve this config:"), text
    assert message in text, text
    assert len(text.splitlines()) == 2, text  # that one problem, nothing else


def test_every_problem_is_named_at_once_and_nothing_listens(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    names = ("modbus-byte-order", "same-address-two-types", "overlapping-registers", "opcua-standard-namespace",
             "logix-two-dimensions")
    chosen = [case for case in BAD if case[0] in names]
    path.write_text(DEVICES + "".join(extra for _, extra, _ in chosen))
    before = set(threading.enumerate())
    result = CliRunner().invoke(cli, ["simulate", "--from-config", str(path)])
    assert result.exit_code == 1, result.output
    for _, _, message in chosen:
        assert message in result.output
    assert "simulated plant ready" not in result.output
    started = [t.name for t in set(threading.enumerate()) - before]
    assert not [n for n in started if n.startswith(("modbus-sim", "opcua-sim", "sim-ticker"))], started


def test_demo_options_with_from_config_are_a_usage_error(tmp_path: Path) -> None:
    path = write_project(tmp_path)
    result = CliRunner().invoke(cli, ["simulate", "--from-config", str(path), "--modbus-port", "5020"])
    assert result.exit_code == 2
    assert "--modbus-port: for the demo line only" in result.output


def test_two_devices_on_one_fixed_port_are_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text('[devices.a]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = 1502\n'
                    '[devices.b]\ndriver = "enip"\nhost = "127.0.0.1"\nport = 1502\n')
    with pytest.raises(SimulationError, match="devices 'a' and 'b' both listen on port 1502"):
        SimulatedPlant.from_file(path)
    SimulatedPlant.from_file(path, free_ports=True)  # each on a free port of its own: fine


@pytest.mark.parametrize(("model", "message"), [
    ("def step(plant, dt_s)\n    pass\n", "sim/area9.py: line 1: expected ':'"),
    ("import no_such_module_here\n", "sim/area9.py cannot be loaded: line 1: ModuleNotFoundError"),
    ("def stepp(plant, dt_s):\n    pass\n", "sim/area9.py has no function step(plant, dt_s)"),
])
def test_a_model_that_cannot_be_loaded_is_named_with_its_line(tmp_path: Path, model: str, message: str) -> None:
    path = write_project(tmp_path, model=model)
    with pytest.raises(SimulationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SimulatedPlant.from_file(path)


FAILING_MODEL = '''
def step(plant, dt_s):
    level = plant["[site]Area9/Silo/Level"]
    if level > 70.0:
        plant["[site]Area9/Silo/Level"] = "overflow"
    elif level > 65.0:
        plant["[site]Area9/Silo/Levle"] = level
    else:
        plant["[site]Area9/Silo/Level"] = level + 1.0
'''


def test_a_model_that_raises_is_reported_with_its_line_and_tag_and_the_plant_serves_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    path = write_project(tmp_path, model=FAILING_MODEL)
    model_file = str(tmp_path / "sim" / "area9.py")
    with simulate_config(path, ticker=False) as sim:
        sim.advance(0.02 * 3)  # 62.5 -> 65.5: then the model names a tag that does not exist
        assert sim.read("[site]Area9/Silo/Level") == 65.5
        sim.advance(0.02 * 10)
        assert sim.read("[site]Area9/Silo/Level") == 65.5  # its last value, still served
        sim.write("[site]Area9/Silo/Level", 71.0)
        sim.advance(0.02 * 10)
        assert sim.read("[site]Area9/Silo/Level") == 71.0
        sim.write("[site]Area9/Valve3/Cmd", True)  # follows go on while the model fails
        sim.advance(0.4)
        assert sim.read("[site]Area9/Valve3/Open") is True
        assert sim.model_errors == [
            f"model {model_file} line 7 (in step): unknown tag '[site]Area9/Silo/Levle': not in the config's "
            "[tags] (did you mean '[site]Area9/Silo/Level'?); the plant keeps its last values",
            f"model {model_file} line 5 (in step): tag '[site]Area9/Silo/Level' (Float32): 'overflow' is not a "
            "number (the tag is Float32); the plant keeps its last values",
        ]
        # logged once each, not at every tick
        assert caplog.text.count("line 7 (in step)") == 1 and caplog.text.count("line 5 (in step)") == 1
        sim.write("[site]Area9/Silo/Level", 50.0)
        sim.advance(0.02)
        assert sim.read("[site]Area9/Silo/Level") == 51.0  # the model works again
