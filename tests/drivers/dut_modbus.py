"""The modbus device under test: a real server on a free port and an Exchange driver connected to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._drivers.base import Point
from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.contract import DeviceUnderTest

# address -> (data type, initial value); IR/DI points are the read-only tables
MODBUS_POINTS: dict[str, tuple[DataType, object]] = {
    "C1": (DataType.BOOLEAN, False),
    "C2": (DataType.BOOLEAN, True),
    "DI1": (DataType.BOOLEAN, True),
    "HR1": (DataType.INT16, -12),
    "HRI2": (DataType.INT32, 70_000),
    "HRF4": (DataType.FLOAT32, 1.5),
    "HRD6": (DataType.FLOAT64, 2.25),
    "HRUS10": (DataType.UINT16, 65_000),
    "IR1": (DataType.INT16, 7),
    "IRF2": (DataType.FLOAT32, 3.5),
}
CONTRACT_ADDRESSES = {"bool": "C1", "int16": "HR1", "int32": "HRI2", "float32": "HRF4", "missing": "HR1000"}


def modbus_settings(port: int, **extra: object) -> dict[str, object]:
    """Device settings for a test: short backoff so reconnect tests stay fast."""
    return {
        "driver": "modbus",
        "host": "127.0.0.1",
        "port": port,
        "unit_id": 1,
        "timeout_ms": 1000,
        "reconnect_min_ms": 20,
        "reconnect_max_ms": 200,
        **extra,
    }


def make_modbus_server(**kwargs: object) -> ModbusSimServer:
    points = [SimPoint(address, dtype, initial) for address, (dtype, initial) in MODBUS_POINTS.items()]
    server = ModbusSimServer(points, **kwargs)  # type: ignore[arg-type]
    server.start()
    return server


@pytest.fixture
def modbus_dut() -> Iterator[DeviceUnderTest]:
    server = make_modbus_server()
    settings = modbus_settings(server.port)
    device = DeviceConfig("plc", "modbus", settings)
    driver = registry.create_driver(device)
    points = {}
    for key, address in CONTRACT_ADDRESSES.items():
        data_type = registry.validate_address(device, address, None)
        points[key] = Point(f"[test]Modbus/{key}", address, data_type)
    try:
        yield DeviceUnderTest("modbus", driver, points, server, settings)
    finally:
        driver.close()
        server.stop()
