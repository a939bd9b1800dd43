"""The enip driver against cpppo's Logix simulator: addressing, errors, tag upload, faults, batch speed."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator

import pytest
from pycomm3 import LogixDriver

from exchange._drivers.base import Driver, Point
from exchange._drivers.enip.tags import TagDefinitions, parse_logix_address
from exchange._values import DataType, Quality
from exchange.errors import CommunicationError, DeviceError, TagPathError, TagTypeError
from simulators.servers.base import SimPoint
from simulators.servers.enip import EnipSimServer
from tests.conftest import free_port
from tests.drivers.dut_enip import ENIP_POINTS, enip_driver, enip_point, make_enip_server
from tests.waiting import wait_until

BATCH = {f"R{i}": (DataType.FLOAT32, i / 4, True) for i in range(150)}
BATCH.update({f"L{i}": (DataType.FLOAT64, i * 1.5, True) for i in range(50)})


@pytest.fixture(scope="module")
def server() -> Iterator[EnipSimServer]:
    sim = make_enip_server(BATCH)
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def logix(server: EnipSimServer) -> Iterator[tuple[EnipSimServer, Driver, dict[str, Point]]]:
    if not server.running:
        server.start()
    server.reset_counts()
    device, driver = enip_driver(server)
    points = {a: enip_point(device, a, t) for a, (t, _, _) in {**ENIP_POINTS, **BATCH}.items()}
    points["missing"] = enip_point(device, "No_Such_Tag", DataType.INT16, "missing")
    try:
        yield server, driver, points
    finally:
        driver.close()


def test_program_scope_array_element_and_member_addresses_read_and_write(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]],
) -> None:
    server, driver, points = logix
    addresses = ["Program:MainProgram.Phase", "Arr[0]", "Arr[3]", "Arr[9]", "Motor.Speed"]
    server.set_many({"Program:MainProgram.Phase": 7, "Arr[3]": 33.5, "Motor.Speed": 1500.0})
    results = driver.read([points[a] for a in addresses])
    assert [r.value for r in results] == [7, 0.5, 33.5, 9.5, 1500.0]
    assert all(r.quality is Quality.GOOD for r in results)
    driver.write([(points["Program:MainProgram.Phase"], 8), (points["Arr[9]"], -1.25)])
    driver.write([(points["Motor.Speed"], 1200.0)])
    assert server.get_many(["Program:MainProgram.Phase", "Arr[9]", "Arr[3]", "Motor.Speed"]) == {
        "Program:MainProgram.Phase": 8, "Arr[9]": -1.25, "Arr[3]": 33.5, "Motor.Speed": 1200.0,
    }


def test_an_unknown_tag_reads_bad_not_found_naming_device_address_and_status(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]],
) -> None:
    _, driver, points = logix
    result = driver.read([points["missing"]])[0]
    assert result.quality is Quality.BAD_NOT_FOUND and result.value is None
    assert result.error is not None
    for part in ("logix", "No_Such_Tag", "CIP status 0x05"):
        assert part in result.error


def test_a_write_to_an_unknown_tag_raises_naming_device_tag_address_and_status(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]],
) -> None:
    server, driver, points = logix
    with pytest.raises(DeviceError) as caught:
        driver.write([(points["Step"], 5), (points["missing"], 1)])
    message = str(caught.value)
    for part in ("device logix", "[test]Logix/missing", "address No_Such_Tag", "CIP status 0x05"):
        assert part in message
    assert "[test]Logix/Step" not in message, "only the refused write is reported"
    assert server.get("Step") == 5 and server.write_count("Step") == 1


def test_a_write_to_a_read_only_tag_is_refused_and_stores_nothing(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]],
) -> None:
    server, driver, points = logix
    with pytest.raises(DeviceError, match=r"Setpoint_RO.*CIP status 0x0F"):
        driver.write([(points["Setpoint_RO"], 99)])
    assert server.get("Setpoint_RO") == 40
    assert driver.read([points["Setpoint_RO"]])[0].value == 40


def test_refused_before_sending_malformed_address_or_missing_type(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]],
) -> None:
    server, driver, points = logix
    with pytest.raises(TagPathError, match=r"'Bad\.\.Name'"):
        driver.write([(points["Step"], 1), (Point("[test]Logix/bad", "Bad..Name", DataType.INT16), 1)])
    untyped = Point("[test]Logix/untyped", "Counter", None)
    with pytest.raises(TagTypeError, match="needs `type`"):
        driver.write([(points["Step"], 1), (untyped, 1)])
    assert server.write_count() == 0
    bad, good = driver.read([untyped, points["Counter"]])
    assert bad.quality is Quality.ERROR_TYPE_CONVERSION and "Counter" in str(bad.error)
    assert good.quality is Quality.GOOD


def test_upload_tags_true_against_a_controller_without_a_tag_list_says_what_to_change(
    server: EnipSimServer,
) -> None:
    device, driver = enip_driver(server, upload_tags=True)
    try:
        point = enip_point(device, "Step", None)
        result = driver.read([point])[0]
        assert result.quality is Quality.BAD_NOT_CONNECTED
        assert "upload_tags = false" in str(result.error)
        with pytest.raises(CommunicationError, match="logix"):
            driver.write([(point, 1)])
    finally:
        driver.close()
    assert server.write_count() == 0


def test_a_batch_of_200_tags_is_read_in_multiple_service_packets(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]],
) -> None:
    # cpppo refuses unfragmented Read Tag replies over 488 bytes, but its Multiple Service Packet
    # replies are not limited that way: pycomm3's connection-size split is enough.
    server, driver, points = logix
    names = list(BATCH)
    results = driver.read([points[n] for n in names])
    assert [r.value for r in results] == [BATCH[n][1] for n in names]
    assert server.read_count() == 200
    assert server.message_count() <= 3


def test_a_stopped_controller_fails_fast_and_the_driver_reconnects_after_a_restart(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]],
) -> None:
    server, driver, points = logix
    step = points["Step"]
    driver.write([(step, 10)])
    server.kill()
    try:
        started = time.monotonic()
        assert driver.read([step])[0].quality is Quality.BAD_NOT_CONNECTED
        for _ in range(5):
            with pytest.raises(CommunicationError, match=r"device logix \(127\.0\.0\.1:\d+\)"):
                driver.write([(step, 11)])
            assert driver.read([step])[0].quality is Quality.BAD_NOT_CONNECTED
        assert time.monotonic() - started < 1.0
    finally:
        server.start()
    wait_until(lambda: driver.read([step])[0].quality is Quality.GOOD, timeout_s=10, message="reconnect")
    assert driver.read([step])[0].value == 10, "the controller kept its value; no failed write leaked"
    driver.write([(step, 12)])
    assert server.get("Step") == 12
    assert server.write_count("Step") == 2


def test_an_unreachable_device_does_not_hold_up_another() -> None:
    sim = EnipSimServer([SimPoint("Level", DataType.FLOAT32, 2.5)])
    dead = EnipSimServer([SimPoint("Level", DataType.FLOAT32, 7.5)], port=free_port())
    sim.start()
    device, alive = enip_driver(sim)
    dead_device, gone = enip_driver(dead)  # drivers connect lazily: nothing to clean up before try
    try:
        level = enip_point(device, "Level", DataType.FLOAT32)
        gone_level = enip_point(dead_device, "Level", DataType.FLOAT32)
        started = time.monotonic()
        assert gone.read([gone_level])[0].quality is Quality.BAD_NOT_CONNECTED
        assert alive.read([level])[0].value == 2.5
        assert time.monotonic() - started < 1.0
        dead.start()  # the device comes up on its configured port: the driver finds it
        wait_until(lambda: gone.read([gone_level])[0].value == 7.5, timeout_s=10, message="late device")
    finally:
        alive.close()
        gone.close()
        sim.stop()
        dead.stop()


def test_reads_survive_a_restart_and_dropped_connections_without_a_bad_result(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]],
) -> None:
    server, driver, points = logix
    assert driver.read([points["Counter"]])[0].quality is Quality.GOOD
    server.restart()
    assert driver.read([points["Counter"]])[0].quality is Quality.GOOD
    server.drop_connections()
    server.set("Counter", 4242)
    assert driver.read([points["Counter"]])[0].value == 4242


def _seconds(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def test_a_100_tag_read_costs_about_what_raw_pycomm3_costs(
    logix: tuple[EnipSimServer, Driver, dict[str, Point]], capsys: pytest.CaptureFixture[str],
) -> None:
    server, driver, points = logix
    names = [f"R{i}" for i in range(100)]
    batch = [points[n] for n in names]
    raw = LogixDriver(f"127.0.0.1:{server.port}", init_tags=False)
    raw.open()
    definitions = TagDefinitions()
    for name in names:
        definitions.declare(parse_logix_address(name), DataType.FLOAT32)
    raw._tags = definitions.table
    try:
        assert [t.value for t in raw.read(*names)] == [r.value for r in driver.read(batch)]
        raw_s, driver_s = [], []
        for _ in range(8):  # interleaved, so both see the same machine load
            raw_s.append(_seconds(lambda: raw.read(*names)))
            driver_s.append(_seconds(lambda: driver.read(batch)))
    finally:
        raw.close()
    # The fastest run of each is the least disturbed by other load: compare those, print medians too.
    raw_ms, driver_ms = min(raw_s) * 1000, min(driver_s) * 1000
    medians = f"medians {statistics.median(raw_s) * 1000:.1f} / {statistics.median(driver_s) * 1000:.1f} ms"
    with capsys.disabled():
        print(f"\nenip 100-tag read: raw pycomm3 {raw_ms:.1f} ms, Exchange driver {driver_ms:.1f} ms "
              f"(fastest of 8), ratio {driver_ms / raw_ms:.2f}; {medians}")
    # The target is 1.5x (bench/tags.py); the bound here leaves room for a loaded test machine.
    # That the 100 tags travel in one or two packets is asserted exactly in the 200-tag batch test.
    assert driver_ms <= raw_ms * 2.0 + 5
