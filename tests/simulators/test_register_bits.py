"""Bits of a register (Modbus ``HR10.3``) served by the simulator, alone and beside their status word:
Exchange's own driver reads a word and its bits in one call and always sees them agree, a write of
a bit (mask write) changes that bit only, and what the plant does to a bit (``sim.write``, a
``follows``, the model) changes that bit of the word only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._config import load_config
from exchange._tags.service import TagService
from exchange._tags.table import TagTable
from exchange._values import Quality
from simulators.engine import SimulatedPlant
from simulators.state import PlantView
from simulators.testing import simulate_config
from tests.waiting import wait_until

CONFIG = '''
[devices.plc]
driver = "modbus"
host = "127.0.0.1"
port = 502

[tags."[p]Pump/Status"]
device = "plc"
address = "HR10"
type = "UInt16"

[tags."[p]Pump/Healthy"]
device = "plc"
address = "HR10.0"
access = "ro"

[tags."[p]Pump/Run"]
device = "plc"
address = "HR10.3"

[tags."[p]Pump/Running"]
device = "plc"
address = "HR10.4"
access = "ro"

[tags."[p]Pump/Ready"]
device = "plc"
address = "HR10.5"
access = "ro"

[tags."[p]Pump/Cmd"]
device = "plc"
address = "C1"

[tags."[p]Alarm/Word"]
device = "plc"
address = "HR20"
access = "ro"

[tags."[p]Alarm/Ack"]
device = "plc"
address = "HR20.15"

[tags."[p]Lone"]
device = "plc"
address = "HR30.2"

[tags."[p]LoneInput"]
device = "plc"
address = "IR5.1"
access = "ro"

[simulation]
tick_ms = 20

[simulation.tags."[p]Pump/Status"]
initial = 1

[simulation.tags."[p]Pump/Running"]
follows = "[p]Pump/Cmd"
delay_ms = 50

[simulation.tags."[p]Alarm/Ack"]
initial = true

[simulation.tags."[p]LoneInput"]
initial = true
'''
STATUS, HEALTHY, RUN, RUNNING, READY = (f"[p]Pump/{name}" for name in ("Status", "Healthy", "Run", "Running", "Ready"))
ALARM, ACK, LONE, LONE_INPUT, CMD = "[p]Alarm/Word", "[p]Alarm/Ack", "[p]Lone", "[p]LoneInput", "[p]Pump/Cmd"
EVERY = [STATUS, HEALTHY, RUN, RUNNING, READY, ALARM, ACK, LONE, LONE_INPUT]


def ready_is_run(plant: PlantView, dt_s: float) -> None:
    """The model: the pump is ready while it is told to run (a behaviour on a bit tag)."""
    plant[READY] = plant[RUN]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("register_bits") / "exchange.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def sim(project: Path) -> Iterator[SimulatedPlant]:
    with simulate_config(project, model=ready_is_run) as plant:
        yield plant


@pytest.fixture(scope="module")
def tags(sim: SimulatedPlant) -> Iterator[TagService]:
    assert sim.config_path is not None
    service = TagService(load_config(sim.config_path, env={}))
    yield service
    service.close()


@pytest.fixture
def fresh(sim: SimulatedPlant) -> SimulatedPlant:
    sim.reset()
    return sim


def read(tags: TagService, paths: list[str] = EVERY) -> dict[str, Any]:
    values = tags.read(paths)
    assert all(v.quality is Quality.GOOD for v in values), values
    return {path: value.value for path, value in zip(paths, values)}


def consistent(values: dict[str, Any]) -> bool:
    """The word's bits are what the bit tags read."""
    word = values[STATUS]
    return all(values[path] == bool(word >> bit & 1) for path, bit in ((HEALTHY, 0), (RUN, 3), (RUNNING, 4),
                                                                        (READY, 5)))


def test_a_word_and_its_bits_are_accepted_by_the_gateway_and_the_simulator(project: Path) -> None:
    table = TagTable.from_config(load_config(project, env={}))
    assert {tag.path for tag in table} >= {STATUS, HEALTHY, RUN}
    plant = SimulatedPlant.from_file(project)  # before: "one address holds one type" / "written by mask"
    assert plant.spec.word_of == {f"plc:{a}": "plc:HR10" for a in ("HR10.0", "HR10.3", "HR10.4", "HR10.5")} | {
        "plc:HR20.15": "plc:HR20"}


def test_bits_without_their_word_are_served_read_only_too(tmp_path: Path) -> None:
    """Before: 'HR20.3 is a bit of a register: it is written by mask, not as registers'."""
    path = tmp_path / "exchange.toml"
    path.write_text('[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\n'
                    '[tags."[p]A"]\ndevice = "plc"\naddress = "HR20.3"\naccess = "ro"\n'
                    '[tags."[p]B"]\ndevice = "plc"\naddress = "HR20.4"\n'
                    '[simulation.tags."[p]A"]\ninitial = true\n')
    plant = SimulatedPlant.from_file(path)
    server = plant.servers["plc"]
    assert (server.get("HR20"), server.get("HR20.3"), server.get("HR20.4")) == (0b1000, True, False)
    server.set("HR20.4", True)  # a stopped server's memory too: that bit only
    assert server.get("HR20") == 0b11000


def test_the_driver_reads_a_word_and_its_bits_in_one_call_and_they_agree(fresh: SimulatedPlant,
                                                                           tags: TagService) -> None:
    values = read(tags)
    # initial: Status = 1 gives Healthy; Ack's initial sets bit 15 of an Int16 word; the lone bits
    assert values == {STATUS: 1, HEALTHY: True, RUN: False, RUNNING: False, READY: False, ALARM: -32768,
                      ACK: True, LONE: False, LONE_INPUT: True}
    fresh.servers["plc"].reset_counts()  # type: ignore[attr-defined]
    read(tags, [STATUS, HEALTHY, RUN])
    assert len(fresh.servers["plc"].requests()) == 1  # type: ignore[attr-defined]  # one FC3 for all three


def test_a_written_bit_changes_only_that_bit_of_the_word(fresh: SimulatedPlant, tags: TagService) -> None:
    server = fresh.servers["plc"]
    server.reset_counts()  # type: ignore[attr-defined]
    tags.write([RUN], [True])
    assert [(r.function_code, r.start) for r in server.requests()] == [(22, 9)]  # type: ignore[attr-defined]
    # the model makes Ready follow Run at its next tick: bits 0, 3 and 5
    wait_until(lambda: read(tags)[STATUS] == 0b101001, 5.0, message=lambda: str(read(tags)))
    assert consistent(read(tags))
    assert fresh.value(STATUS) == 0b101001 and fresh.value(RUN) is True and fresh.value(HEALTHY) is True

    tags.write([ACK], [False])  # a writable bit of a read-only word: its own bit may change
    wait_until(lambda: fresh.value(ALARM) == 0, 5.0)
    assert read(tags, [ALARM, ACK]) == {ALARM: 0, ACK: False}
    tags.write([LONE], [True])  # a bit without a word
    assert fresh.servers["plc"].get("HR30") == 0b100
    wait_until(lambda: fresh.value(LONE) is True, 5.0)


def test_a_written_word_moves_its_bits(fresh: SimulatedPlant, tags: TagService) -> None:
    tags.write([STATUS], [0b10000])  # Healthy off, Running on: the word is writable, its bits follow
    wait_until(lambda: fresh.value(RUNNING) is True, 5.0)
    assert fresh.value(HEALTHY) is False
    values = read(tags)
    assert values[STATUS] == 0b10000 and values[RUNNING] and not values[HEALTHY] and consistent(values)


def test_the_plant_drives_a_bit_and_only_that_bit(fresh: SimulatedPlant, tags: TagService) -> None:
    fresh.write(HEALTHY, False)  # sim.write of a bit
    assert read(tags, [STATUS, HEALTHY]) == {STATUS: 0, HEALTHY: False}
    fresh.write(STATUS, 0b1000)  # sim.write of the word: its bits in the plant at once
    assert fresh.value(RUN) is True and fresh.value(HEALTHY) is False
    tags.write([CMD], [True])  # Running follows the command, 50 ms later: bit 4 of the word
    wait_until(lambda: read(tags)[RUNNING] is True, 5.0)
    values = read(tags)
    assert values[STATUS] == 0b111000 and consistent(values)  # Ready by the model, as Run is on


def test_clients_may_change_only_the_bits_writable_tags_cover(fresh: SimulatedPlant) -> None:
    from pymodbus.client import ModbusTcpClient

    client = ModbusTcpClient("127.0.0.1", port=fresh.ports["plc"], timeout=3, retries=0)
    assert client.connect()  # type: ignore[no-untyped-call]
    try:
        assert client.write_register(19, 0x0001, device_id=1).isError()  # bit 0 of the read-only Alarm word
        assert not client.mask_write_register(address=19, and_mask=0x7FFF, or_mask=0, device_id=1).isError()
        assert client.read_holding_registers(19, count=1, device_id=1).registers == [0]  # Ack cleared
        assert client.mask_write_register(address=4, and_mask=0xFFFD, or_mask=0, device_id=1).isError()  # IR
    finally:
        client.close()  # type: ignore[no-untyped-call]
    wait_until(lambda: fresh.value(ACK) is False, 5.0)


def test_freezing_a_bit_freezes_its_register(fresh: SimulatedPlant, tags: TagService) -> None:
    fresh.freeze(HEALTHY, False)
    assert read(tags, [STATUS, HEALTHY]) == {STATUS: 0, HEALTHY: False}
    fresh.write(RUN, True)  # the plant goes on: clients keep seeing the stuck register
    assert fresh.value(STATUS) == 0b1001 and fresh.value(HEALTHY) is True
    assert read(tags, [STATUS, HEALTHY, RUN]) == {STATUS: 0, HEALTHY: False, RUN: False}
    fresh.unfreeze(HEALTHY)
    wait_until(lambda: read(tags)[STATUS] == 0b101001, 5.0)  # the plant's word, Ready by the model
    assert consistent(read(tags))
