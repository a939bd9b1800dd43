"""Modbus TCP driver against pymodbus's real server: addressing, coalescing, exceptions, writes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._drivers.base import Point
from exchange._drivers.modbus import ModbusDriver
from exchange._values import DataType, Quality
from exchange.errors import CommunicationError, ConfigError, DeviceError, ReadOnlyTag
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import make_modbus_server, modbus_settings
from tests.netfaults import silent_listener


def make_driver(port: int, **extra: object) -> ModbusDriver:
    driver = registry.create_driver(DeviceConfig("plc", "modbus", modbus_settings(port, **extra)))
    assert isinstance(driver, ModbusDriver)
    return driver


def point(address: str, data_type: DataType | None = None, path: str | None = None) -> Point:
    device = DeviceConfig("plc", "modbus", modbus_settings(502))
    return Point(path or f"[t]{address}", address, registry.validate_address(device, address, data_type))


@pytest.fixture
def server() -> Iterator[ModbusSimServer]:
    srv = make_modbus_server()
    yield srv
    srv.stop()


@pytest.fixture
def driver(server: ModbusSimServer) -> Iterator[ModbusDriver]:
    drv = make_driver(server.port)
    yield drv
    drv.close()


def test_one_based_addresses_go_out_as_protocol_address_minus_one(
    server: ModbusSimServer, driver: ModbusDriver
) -> None:
    server.reset_counts()
    [value] = driver.read([point("HRUS10")])
    assert value.value == 65_000
    [request] = server.requests()
    assert (request.function_code, request.start, request.count) == (3, 9, 1)


def test_zero_based_device_reads_the_same_register_by_its_protocol_number() -> None:
    srv = make_modbus_server(zero_based=True)  # the server's HRUS10 is protocol address 10
    drv = make_driver(srv.port, zero_based=True)
    try:
        srv.reset_counts()
        [value] = drv.read([Point("[t]x", "HRUS10", DataType.UINT16)])
        assert value.value == 65_000
        assert srv.requests()[0].start == 10
        drv.write([(Point("[t]x", "HR1", DataType.INT16), 5)])
        assert srv.requests()[-1].start == 1
        assert srv.get("HR1") == 5
    finally:
        drv.close()
        srv.stop()


def test_word_order_little_swaps_the_registers_of_32_and_64_bit_values(server: ModbusSimServer) -> None:
    little = make_driver(server.port, word_order="little")
    try:
        server.set("HRI2", 0x00010002)  # big-endian words at HR2, HR3: 0x0001 0x0002
        assert little.read([point("HRI2")])[0].value == 0x00020001
        little.write([(point("HRF4"), 1.0)])
        assert (server.get("HR4"), server.get("HR5")) == (0, 0x3F80)  # low word first
        little.write([(point("HRD6"), 2.0)])
        assert [server.get(f"HRUS{n}") for n in range(6, 10)] == [0, 0, 0, 0x4000]
        assert little.read([point("HRD6")])[0].value == 2.0
        assert server.get("HRD6") != 2.0  # the big-endian server sees the swapped value
    finally:
        little.close()


def test_100_tags_are_read_in_the_fewest_block_requests_counted_at_the_server() -> None:
    # 60 Float32 (120 registers) + 40 Int16 right after: 160 registers -> 2 requests of <= 125
    points = [SimPoint(f"HRF{1 + 2 * i}", DataType.FLOAT32, float(i)) for i in range(60)]
    points += [SimPoint(f"HR{121 + i}", DataType.INT16, i) for i in range(40)]
    points += [SimPoint(f"C{1 + i}", DataType.BOOLEAN, i % 3 == 0) for i in range(100)]
    srv = ModbusSimServer(points)
    srv.start()
    drv = make_driver(srv.port)
    try:
        reg_points = [Point(f"[t]{p.address}", p.address, p.data_type) for p in points[:100]]
        coil_points = [Point(f"[t]{p.address}", p.address, p.data_type) for p in points[100:]]
        srv.reset_counts()
        values = drv.read(list(reversed(reg_points)))
        assert srv.read_count() == 2  # ceil(160 / 125)
        assert all(v.quality is Quality.GOOD for v in values)
        assert [v.value for v in reversed(values)] == [float(i) for i in range(60)] + list(range(40))
        srv.reset_counts()
        bits = drv.read(coil_points)
        assert srv.read_count() == 1
        assert [b.value for b in bits] == [i % 3 == 0 for i in range(100)]
    finally:
        drv.close()
        srv.stop()


def test_illegal_address_in_a_block_is_isolated_and_named(server: ModbusSimServer, driver: ModbusDriver) -> None:
    # HR20 is past the server's holding registers (HR1..HR10): the block HR1..HR20 is refused
    points = [point("HR1"), point("HR20"), point("HRF4")]
    first = driver.read(points)
    assert [v.quality for v in first] == [Quality.GOOD, Quality.BAD_NOT_FOUND, Quality.GOOD]
    assert first[1].error is not None
    for fragment in ("'plc'", "HR20", "exception code 2", "ILLEGAL DATA ADDRESS"):
        assert fragment in first[1].error
    server.reset_counts()
    second = driver.read(points)
    assert [v.quality for v in second] == [v.quality for v in first]
    assert server.read_count() == 3  # learned: no block over the gap, the bad address alone


def test_device_exception_codes_are_surfaced_with_device_and_address(
    server: ModbusSimServer, driver: ModbusDriver
) -> None:
    server.inject_exception("HRF4", 4)
    [value] = driver.read([point("HRF4")])
    assert value.quality is Quality.BAD_DEVICE_ERROR
    assert "exception code 4 (SERVER DEVICE FAILURE)" in (value.error or "")
    with pytest.raises(DeviceError) as caught:
        driver.write([(point("HRF4", path="[t]Tank/SP"), 1.0)])
    message = str(caught.value)
    for fragment in ("'plc'", "HRF4", "[t]Tank/SP", "exception code 4"):
        assert fragment in message
    server.inject_exception("HRF4", None)
    assert driver.read([point("HRF4")])[0].quality is Quality.GOOD


def test_writes_to_input_registers_and_discrete_inputs_are_refused_before_sending(
    server: ModbusSimServer, driver: ModbusDriver
) -> None:
    server.reset_counts()
    for address, value in (("IR1", 5), ("IRF2", 1.0), ("DI1", False)):
        with pytest.raises(ReadOnlyTag, match=address):
            driver.write([(point("HR1"), 1), (point(address), value)])
    assert server.requests() == []
    assert server.get("HR1") == -12


def test_write_function_codes_one_request_per_tag_or_adjacent_block(
    server: ModbusSimServer, driver: ModbusDriver
) -> None:
    server.reset_counts()
    driver.write([(point("C1"), True)])
    driver.write([(point("HR1"), 3)])
    driver.write([(point("HRI2"), -5)])
    driver.write([(point("C1"), False), (point("C2"), False)])
    driver.write([(point("HR1"), 9), (point("HRI2"), 8), (point("HRF4"), 0.5), (point("HRUS10"), 1)])
    got = [(r.function_code, r.start, r.count) for r in server.requests()]
    assert got == [(5, 0, 1), (6, 0, 1), (16, 1, 2), (15, 0, 2), (16, 0, 5), (6, 9, 1)]
    assert [server.get(a) for a in ("C1", "C2", "HR1", "HRI2", "HRF4", "HRUS10")] == [False, False, 9, 8, 0.5, 1]


def test_server_side_read_only_register_answers_an_exception(driver: ModbusDriver) -> None:
    srv = ModbusSimServer([SimPoint("HR1", DataType.INT16, 1, writable=False)])
    srv.start()
    drv = make_driver(srv.port)
    try:
        with pytest.raises(DeviceError, match="exception code 2"):
            drv.write([(point("HR1"), 2)])
        assert srv.get("HR1") == 1
        assert srv.write_count("HR1") == 1
    finally:
        drv.close()
        srv.stop()


def test_a_hung_device_times_out_once_then_fails_fast() -> None:
    listener, accepted = silent_listener()
    drv = make_driver(listener.getsockname()[1], timeout_ms=1000, reconnect_min_ms=5000, reconnect_max_ms=5000)
    try:
        started = time.monotonic()
        [first] = drv.read([point("HR1")])
        assert first.quality is Quality.ERROR_TIMEOUT_EXPIRED
        assert 0.95 < time.monotonic() - started < 4.0
        started = time.monotonic()
        [second] = drv.read([point("HR1")])
        with pytest.raises(CommunicationError, match="was not sent"):
            drv.write([(point("HR1"), 1)])
        assert second.quality is Quality.BAD_NOT_CONNECTED
        assert time.monotonic() - started < 0.5  # half the 1 s timeout: nothing waited on the socket
    finally:
        drv.close()
        listener.close()
        for conn in accepted:
            conn.close()


def test_unreachable_port_gives_not_connected_and_closed_driver_refuses(server: ModbusSimServer) -> None:
    drv = make_driver(server.port)
    drv.close()
    [value] = drv.read([point("HR1")])
    assert value.quality is Quality.BAD_NOT_CONNECTED
    with pytest.raises(CommunicationError, match="closed"):
        drv.write([(point("HR1"), 1)])


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"host": ""}, "devices.plc.host"),
        ({"port": 70000}, "devices.plc.port"),
        ({"unit_id": -1}, "devices.plc.unit_id"),
        ({"word_order": "middle"}, "devices.plc.word_order"),
        ({"zero_based": "yes"}, "devices.plc.zero_based"),
        ({"timeout": 5}, "unknown modbus key(s) timeout"),
    ],
)
def test_bad_device_settings_are_config_errors_naming_the_key(settings: dict[str, object], fragment: str) -> None:
    device = DeviceConfig("plc", "modbus", {**modbus_settings(502), **settings})
    with pytest.raises(ConfigError) as caught:
        registry.create_driver(device)
    assert fragment in str(caught.value)
