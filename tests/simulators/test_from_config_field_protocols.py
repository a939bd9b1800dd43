"""An engineer's own config with the field protocols of issue 30, served by ``--from-config``:
Modbus devices on RTU over TCP and on a serial line (the simulator's pty pair stands for the port
the config names), an OPC UA array tag and a method answered by the model, its refusals carrying
their status codes and changing nothing. Reached by Exchange from the written config."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange._config import config_from_dict, load_config
from exchange._tags.service import TagService
from exchange.errors import ConfigError, DeviceError
from simulators.engine import SimulatedPlant
from simulators.spec import SimulationError
from simulators.testing import simulate_config
from tests.waiting import wait_until

CONFIG = '''
[devices.gateway]
driver = "modbus"
transport = "rtu-over-tcp"
host = "10.0.0.20"
port = 4001
unit_id = 3

[devices.drive7]
driver = "modbus"
transport = "serial"
serial_port = "/dev/ttyUSB0"
baudrate = 38400
unit_id = 7

[devices.line]
driver = "opcua"
url = "opc.tcp://10.0.0.30:4840/line/"

[tags."[site]Scale/Weight"]
device = "gateway"
address = "IRF1"
access = "ro"

[tags."[site]Drive7/Speed"]
device = "drive7"
address = "HR5"

[tags."[site]Drive7/RunCmd"]
device = "drive7"
address = "C1"

[tags."[site]Drive7/Running"]
device = "drive7"
address = "DI2"
access = "ro"

[tags."[site]Line/Recipe"]
device = "line"
address = "ns=2;s=Line.Recipe"
type = "Float32[]"

[tags."[site]Line/Batch"]
device = "line"
address = "ns=2;s=Line.Batch"
type = "Int32"

[tags."[site]Line/Control"]
device = "line"
address = "ns=2;s=Line.Control"

[simulation]
model = "sim.py"

[simulation.tags."[site]Scale/Weight"]
initial = 12.5

[simulation.tags."[site]Drive7/Running"]
follows = "[site]Drive7/RunCmd"

[simulation.tags."[site]Line/Recipe"]
initial = [1.5, 2.5, 3.5]

[simulation.tags."[site]Line/Control".methods.StartBatch]
inputs = ["Batch: Int32", "Scale: Float32"]
outputs = ["Accepted: Boolean", "Previous: Int32"]
call = "start_batch"

[simulation.tags."[site]Line/Control".methods.Crash]
call = "crash"
'''

MODEL = '''
from simulators.servers.opcua_methods import MethodRefused


def step(plant, dt_s):
    pass


def start_batch(plant, batch, scale):
    if batch <= 0:
        raise MethodRefused("BadOutOfRange", f"batch {batch} is not a batch number")
    previous = plant["[site]Line/Batch"]
    plant["[site]Line/Batch"] = batch
    plant["[site]Line/Recipe"] = [value * scale for value in plant["[site]Line/Recipe"]]
    return True, previous


def crash(plant):
    plant["[site]Line/Batch"] = -1
    return 1 / 0
'''


def write_project(folder: Path) -> Path:
    (folder / "sim.py").write_text(MODEL)
    path = folder / "exchange.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimulatedPlant, TagService, dict[str, object]]]:
    folder = tmp_path_factory.mktemp("field_plant")
    with simulate_config(write_project(folder)) as sim:
        written = sim.config_document()
        for device in written["devices"].values():
            device["timeout_ms"] = 2000
        service = TagService(config_from_dict(written, base_dir=folder, env={}))
        try:
            yield sim, service, written
        finally:
            service.close()


def test_modbus_devices_on_rtu_over_tcp_and_on_a_serial_line_are_served(
    served: tuple[SimulatedPlant, TagService, dict[str, object]],
) -> None:
    sim, service, written = served
    devices = written["devices"]
    assert isinstance(devices, dict)
    gateway, drive = devices["gateway"], devices["drive7"]
    assert (gateway["transport"], gateway["host"], gateway["port"]) == ("rtu-over-tcp", "127.0.0.1",
                                                                        sim.ports["gateway"])
    assert drive["transport"] == "serial" and "host" not in drive and "port" not in drive
    assert drive["serial_port"] != "/dev/ttyUSB0" and Path(drive["serial_port"]).exists()  # the pair's client end
    assert (drive["baudrate"], drive["unit_id"]) == (38400, 7)
    assert sim.endpoint("drive7") == f"serial {drive['serial_port']}"

    assert service.read_one("[site]Scale/Weight").value == 12.5  # RTU frames over TCP, unit 3
    service.write(["[site]Drive7/Speed", "[site]Drive7/RunCmd"], [900, True])  # RTU on the pty pair, unit 7
    wait_until(lambda: sim.value("[site]Drive7/Speed") == 900, 5.0)
    wait_until(lambda: service.read_one("[site]Drive7/Running").value is True, 5.0)  # the plant answered


def test_an_array_tag_is_served_from_its_type_with_its_initial_list(
    served: tuple[SimulatedPlant, TagService, dict[str, object]],
) -> None:
    sim, service, _ = served
    sim.reset()
    assert service.read_one("[site]Line/Recipe").value == [1.5, 2.5, 3.5]
    service.write(["[site]Line/Recipe"], [[4.0, 5.0]])  # a client may change its length
    wait_until(lambda: sim.value("[site]Line/Recipe") == [4.0, 5.0], 5.0)
    sim.write("[site]Line/Recipe", [7, 8, 9])  # the plant's own write, converted per element
    assert service.read_one("[site]Line/Recipe").value == [7.0, 8.0, 9.0]
    sim.reset()
    assert service.read_one("[site]Line/Recipe").value == [1.5, 2.5, 3.5]


def test_a_method_is_answered_by_the_model_and_a_refusal_changes_nothing(
    served: tuple[SimulatedPlant, TagService, dict[str, object]],
) -> None:
    sim, service, _ = served
    sim.reset()
    assert service.call("[site]Line/Control", "StartBatch", [41, 2]) == [True, 0]
    assert sim.value("[site]Line/Batch") == 41  # applied before the call returned ...
    assert service.read_one("[site]Line/Recipe").value == [3.0, 5.0, 7.0]  # ... and served
    assert service.call("[site]Line/Control", "StartBatch", [42, 1.0]) == [True, 41]
    with pytest.raises(DeviceError, match="BadOutOfRange") as refused:
        service.call("[site]Line/Control", "StartBatch", [0, 1.0])
    assert refused.value.status_code == 0x803C0000  # type: ignore[attr-defined]
    assert sim.value("[site]Line/Batch") == 42


def test_a_method_whose_function_raises_is_bad_internal_error_with_the_models_line(
    served: tuple[SimulatedPlant, TagService, dict[str, object]],
) -> None:
    sim, service, _ = served
    sim.reset()
    with pytest.raises(DeviceError, match="BadInternalError"):
        service.call("[site]Line/Control", "Crash", [])
    assert sim.value("[site]Line/Batch") == 0  # what it set before raising is not applied
    line = MODEL.splitlines().index("    return 1 / 0") + 1
    assert any("method Crash" in error and f"sim.py line {line}" in error and "ZeroDivisionError" in error
               for error in sim.model_errors), sim.model_errors


def test_the_serial_pty_pair_goes_with_the_plant(tmp_path: Path) -> None:
    with simulate_config(write_project(tmp_path)) as sim:
        serial_port = Path(sim.config_document()["devices"]["drive7"]["serial_port"])
        assert serial_port.exists()
        sim.stop_device("drive7")  # the drive powered off: the line stays
        assert serial_port.exists()
    assert not serial_port.exists()


@pytest.mark.parametrize(("table", "message"), [
    ('inputs = ["Batch Int32"]\ncall = "f"', "'Batch Int32' is not \"Name: Type\""),
    ('inputs = ["Batch: Int99"]\ncall = "f"', "argument 'Batch': unknown data type 'Int99'"),
    ('call = "not a name"', "call must name a function of the [simulation] model"),
    ('cal = "f"', "cal"),
])
def test_a_bad_method_table_is_refused_naming_it(tmp_path: Path, table: str, message: str) -> None:
    path = write_project(tmp_path)
    path.write_text(CONFIG + f'\n[simulation.tags."[site]Line/Control".methods.Bad]\n{table}\n')
    with pytest.raises(ConfigError, match="methods.Bad") as refused:
        load_config(path, env={})
    assert message in str(refused.value)


def test_methods_need_a_model_and_their_function_in_it(tmp_path: Path) -> None:
    path = write_project(tmp_path)
    path.write_text(CONFIG.replace('model = "sim.py"\n', ""))
    with pytest.raises(ConfigError, match="a method is answered by a function of the model"):
        load_config(path, env={})
    path.write_text(CONFIG.replace('call = "crash"', 'call = "explode"'))
    with pytest.raises(SimulationError, match="call = 'explode', but model .*sim.py has no function explode"):
        SimulatedPlant.from_file(path)


def test_a_written_config_reads_back_as_the_same_document(
    served: tuple[SimulatedPlant, TagService, dict[str, object]],
) -> None:
    sim, _, written = served
    assert tomllib.loads(sim.config_text)["devices"]["drive7"]["serial_port"] == \
        written["devices"]["drive7"]["serial_port"]  # type: ignore[index]
