"""The one driver contract, run against every protocol's driver and a real server of that protocol.

Each protocol's fixture (tests/drivers/dut_<protocol>.py) gives a DeviceUnderTest. A missing point
may read as Bad_NotFound or, for Modbus servers that answer exception 2 that way, Bad_OutOfRange
(Exchange's Modbus driver reports Bad_NotFound).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._tags.convert import values_equal
from exchange._values import Quality
from exchange.errors import CommunicationError
from tests.drivers.contract import DeviceUnderTest
from tests.waiting import wait_until

PROTOCOLS = ["modbus_dut", "opcua_dut", "enip_dut"]
NEW_VALUES: dict[str, list[Any]] = {
    "bool": [True, False],
    "int16": [-1234, 31000],
    "int32": [-2_000_000, 123_456_789],
    "float32": [12.5, -0.1],
}
MISSING_QUALITIES = (Quality.BAD_NOT_FOUND, Quality.BAD_OUT_OF_RANGE)


@pytest.fixture(params=PROTOCOLS)
def dut(request: pytest.FixtureRequest) -> DeviceUnderTest:
    value: DeviceUnderTest = request.getfixturevalue(request.param)
    return value


def read_value(dut: DeviceUnderTest, key: str) -> Any:
    result = dut.driver.read([dut.points[key]])[0]
    assert result.quality is Quality.GOOD, result
    return result.value


@pytest.mark.parametrize("key", list(NEW_VALUES))
def test_write_then_read_round_trip(dut: DeviceUnderTest, key: str) -> None:
    point = dut.points[key]
    for value in NEW_VALUES[key]:
        dut.driver.write([(point, value)])
        assert values_equal(read_value(dut, key), value, point.data_type), (key, value)
        assert values_equal(dut.server.get(point.address), value, point.data_type)


def test_server_side_change_is_read(dut: DeviceUnderTest) -> None:
    dut.server.set(dut.points["int32"].address, 424242)
    dut.server.set(dut.points["float32"].address, 6.75)
    assert read_value(dut, "int32") == 424242
    assert read_value(dut, "float32") == pytest.approx(6.75)


def test_batch_read_keeps_the_order_of_the_points(dut: DeviceUnderTest) -> None:
    expected = {"bool": True, "int16": -77, "int32": 99_999, "float32": 0.25}
    for key, value in expected.items():
        dut.server.set(dut.points[key].address, value)
    order = ["float32", "bool", "int32", "int16", "float32"]
    results = dut.driver.read([dut.points[k] for k in order])
    assert [r.quality for r in results] == [Quality.GOOD] * len(order)
    for key, result in zip(order, results, strict=True):
        assert values_equal(result.value, expected[key], dut.points[key].data_type), (key, result)


def test_missing_point_gets_a_bad_quality_and_the_others_still_read(dut: DeviceUnderTest) -> None:
    dut.server.set(dut.points["int16"].address, 321)
    results = dut.driver.read([dut.points["int16"], dut.points["missing"], dut.points["float32"]])
    assert results[0].quality is Quality.GOOD and results[0].value == 321
    assert results[1].quality in MISSING_QUALITIES
    assert results[1].value is None
    assert results[2].quality is Quality.GOOD


def test_each_write_is_counted_once_at_the_server(dut: DeviceUnderTest) -> None:
    int16, float32 = dut.points["int16"], dut.points["float32"]
    before = (dut.server.write_count(int16.address), dut.server.write_count(float32.address))
    dut.driver.write([(int16, 11)])
    dut.driver.write([(float32, 2.5)])
    dut.driver.write([(int16, 12), (float32, 3.5)])
    assert dut.server.write_count(int16.address) == before[0] + 2
    assert dut.server.write_count(float32.address) == before[1] + 2
    assert dut.server.get(int16.address) == 12
    assert dut.server.get(float32.address) == pytest.approx(3.5)


def test_stopped_server_fails_fast_then_the_driver_reconnects(dut: DeviceUnderTest) -> None:
    int16 = dut.points["int16"]
    assert read_value(dut, "int16") is not None  # connected before the fault
    # a second driver whose backoff is a minute: after the outage a poll keeps to it, and retry_now
    # (what an explicit read and the RESUME of a run held on a bad read ask first) reads at once
    patient = registry.create_driver(DeviceConfig("patient", dut.protocol, {
        **dut.settings, "reconnect_min_ms": 60_000, "reconnect_max_ms": 60_000}))
    try:
        assert patient.read([int16])[0].quality is Quality.GOOD
        dut.server.stop()
        try:
            results = dut.driver.read([int16, dut.points["bool"]])
            assert [r.quality for r in results] == [Quality.BAD_NOT_CONNECTED] * 2
            started = time.monotonic()
            with pytest.raises(CommunicationError):
                dut.driver.write([(int16, 5)])
            again = dut.driver.read([int16])[0]
            assert again.quality is Quality.BAD_NOT_CONNECTED
            assert time.monotonic() - started < 1.0, "a device known down must fail fast"
            # the lost connection is tried again once at most, then the minute-long backoff begins
            assert [patient.read([int16])[0].quality for _ in range(2)] == [Quality.BAD_NOT_CONNECTED] * 2
        finally:
            dut.server.start()
        assert patient.read([int16])[0].quality is Quality.BAD_NOT_CONNECTED  # a poll keeps to the backoff
        started = time.monotonic()
        patient.retry_now()
        assert patient.read([int16])[0].quality is Quality.GOOD
        assert time.monotonic() - started < 15  # at once, not after the minute
    finally:
        patient.close()
    wait_until(lambda: dut.driver.read([int16])[0].quality is Quality.GOOD, timeout_s=20)
    before = dut.server.write_count(int16.address)
    dut.driver.write([(int16, 77)])
    assert dut.server.get(int16.address) == 77
    assert dut.server.write_count(int16.address) == before + 1


def test_dropped_connections_are_reestablished(dut: DeviceUnderTest) -> None:
    assert read_value(dut, "int16") is not None
    dut.server.drop_connections()
    dut.server.set(dut.points["int16"].address, 4321)
    wait_until(lambda: dut.driver.read([dut.points["int16"]])[0].value == 4321, timeout_s=20)

