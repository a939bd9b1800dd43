"""The fault controls of a simulated config, as Exchange's own tag layer sees them: a stopped device
reads Bad_NotConnected and comes back with the plant's values, a Bad point reads Bad_DeviceError on
every protocol, a frozen sensor sticks while the plant goes on, dropped connections are re-made."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exchange._config import load_config
from exchange._tags.service import TagService
from exchange._values import Quality
from simulators.engine import SimulatedPlant
from simulators.testing import simulate_config
from tests.simulators.own_plant import write_project
from tests.waiting import wait_until

LEVEL, CMD, OPEN = "[site]Area9/Silo/Level", "[site]Area9/Valve3/Cmd", "[site]Area9/Valve3/Open"
SPEED, TEMP = "[site]Area9/Motor/Speed", "[site]Area9/Heater/Temp"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedPlant]:
    with simulate_config(write_project(tmp_path_factory.mktemp("own_plant"))) as plant:
        yield plant


@pytest.fixture
def plant(sim: SimulatedPlant) -> Iterator[SimulatedPlant]:
    sim.reset()
    try:
        yield sim
    finally:
        sim.undo_faults()


@pytest.fixture
def tags(plant: SimulatedPlant) -> Iterator[TagService]:
    assert plant.config_path is not None
    service = TagService(load_config(plant.config_path, env={}))
    try:
        yield service
    finally:
        service.close()


def quality(tags: TagService, path: str) -> Quality:
    return tags.read_one(path).quality


def test_a_stopped_device_reads_not_connected_and_comes_back_with_the_plants_values(
    plant: SimulatedPlant, tags: TagService,
) -> None:
    plant.write(CMD, True)
    # a read may time out on a loaded machine: a bad reading has no value, so look again
    wait_until(lambda: (tags.read_one(LEVEL).value or 0.0) > 62.5, 10.0)
    port = plant.ports["silo"]
    plant.stop_device("silo")
    assert not plant.is_running("silo") and plant.is_running("line")
    wait_until(lambda: quality(tags, LEVEL) is Quality.BAD_NOT_CONNECTED, 10.0)
    assert quality(tags, SPEED) is Quality.GOOD  # the other devices serve on
    level = plant.value(LEVEL)
    wait_until(lambda: plant.value(LEVEL) > level + 0.2, 5.0)  # the silo goes on filling meanwhile
    plant.start_device("silo")
    assert plant.ports["silo"] == port
    wait_until(lambda: quality(tags, LEVEL) is Quality.GOOD, 15.0)
    assert tags.read_one(LEVEL).value > level + 0.2 and tags.read_one(CMD).value is True


@pytest.mark.parametrize("path", [LEVEL, SPEED, TEMP], ids=["modbus", "opcua", "enip"])
def test_a_bad_point_reads_device_error_until_it_is_good_again(
    plant: SimulatedPlant, tags: TagService, path: str,
) -> None:
    assert quality(tags, path) is Quality.GOOD
    plant.set_bad(path)
    assert plant.bad == frozenset({path})
    bad = tags.read_one(path)
    assert (bad.quality, bad.value) == (Quality.BAD_DEVICE_ERROR, None)
    assert plant.read(path) is not None  # the plant's own value goes on
    plant.set_good(path)
    assert quality(tags, path) is Quality.GOOD


def test_a_frozen_sensor_sticks_while_the_plant_goes_on(plant: SimulatedPlant, tags: TagService) -> None:
    plant.freeze(LEVEL, 99.0)
    plant.write(CMD, True)
    wait_until(lambda: plant.value(LEVEL) > 63.0, 5.0)
    assert tags.read_one(LEVEL).value == 99.0 and plant.read(LEVEL) == 99.0
    assert plant.frozen == frozenset({LEVEL})
    plant.unfreeze(LEVEL)
    wait_until(lambda: 63.0 < tags.read_one(LEVEL).value < 99.0, 5.0)


def test_a_frozen_command_is_ignored_by_the_plant_until_unfrozen(plant: SimulatedPlant, tags: TagService) -> None:
    plant.freeze(CMD)
    tags.write([CMD], [True])
    assert plant.read(CMD) is True  # it landed in the PLC's memory ...
    since = plant.time_s
    wait_until(lambda: plant.time_s > since + 0.5, 5.0)
    assert plant.value(CMD) is False and plant.read(OPEN) is False  # ... but the program ignores it
    plant.unfreeze(CMD)
    wait_until(lambda: plant.read(OPEN) is True, 5.0)


def test_dropped_connections_are_made_again_by_the_drivers(plant: SimulatedPlant, tags: TagService) -> None:
    assert quality(tags, SPEED) is Quality.GOOD and quality(tags, TEMP) is Quality.GOOD
    plant.drop_connections("line")
    plant.drop_connections("enip")  # by driver name: the one enip device
    wait_until(lambda: quality(tags, SPEED) is Quality.GOOD and quality(tags, TEMP) is Quality.GOOD, 15.0)


def test_reset_undoes_every_fault_and_restarts_from_the_initial_values(plant: SimulatedPlant) -> None:
    plant.write(LEVEL, 10.0)
    plant.freeze(SPEED, 5)
    plant.set_bad(TEMP)
    plant.stop_device("silo")
    plant.reset()
    assert plant.frozen == frozenset() and plant.bad == frozenset() and plant.is_running("silo")
    assert plant.read(LEVEL) == 62.5 and plant.read(SPEED) == 900 and plant.time_s < 1.0
    with pytest.raises(KeyError, match="no device 'silos'"):
        plant.stop_device("silos")
    with pytest.raises(KeyError, match="no device 'modbus'"):  # two modbus devices: say which
        plant.stop_device("modbus")
