"""The enip device under test: cpppo's Logix simulator on a free port and an Exchange driver connected to it.

cpppo cannot serve its tag list, so the driver runs with ``upload_tags = false`` and every point
carries its config type. A server costs ~0.15 s to start (a child process), so each test gets its own:
a test that stops, kills or restarts it cannot disturb the next one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._drivers.base import Driver, Point
from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.enip import EnipSimServer
from tests.drivers.contract import DeviceUnderTest

# address -> (data type, initial value, writable)
ENIP_POINTS: dict[str, tuple[DataType, Any, bool]] = {
    "Valve": (DataType.BOOLEAN, False, True),
    "Step": (DataType.INT16, -12, True),
    "Counter": (DataType.INT32, 70_000, True),
    "Tank_Level": (DataType.FLOAT32, 1.5, True),
    "Total": (DataType.FLOAT64, 2.25, True),
    "Program:MainProgram.Phase": (DataType.INT32, 3, True),
    "Arr[0]": (DataType.FLOAT32, 0.5, True),
    "Arr[3]": (DataType.FLOAT32, 3.5, True),
    "Arr[9]": (DataType.FLOAT32, 9.5, True),
    "Motor.Speed": (DataType.FLOAT32, 1450.0, True),
    "Setpoint_RO": (DataType.INT16, 40, False),
}
CONTRACT_ADDRESSES = {
    "bool": "Valve", "int16": "Step", "int32": "Counter", "float32": "Tank_Level", "missing": "No_Such_Tag",
}
MISSING_TYPE = DataType.INT16


def enip_settings(port: int, **extra: Any) -> dict[str, Any]:
    """Device settings for a test: no tag upload (cpppo), short timeouts and backoff."""
    return {
        "driver": "enip",
        "host": "127.0.0.1",
        "port": port,
        "upload_tags": False,
        "timeout_ms": 5000,  # generous: a 200-tag batch takes cpppo ~0.3 s, more on a loaded machine
        "reconnect_min_ms": 20,
        "reconnect_max_ms": 200,
        **extra,
    }


def make_enip_server(extra: dict[str, tuple[DataType, Any, bool]] | None = None) -> EnipSimServer:
    points = [SimPoint(address, dtype, initial, writable)
              for address, (dtype, initial, writable) in {**ENIP_POINTS, **(extra or {})}.items()]
    server = EnipSimServer(points)
    server.start()
    return server


def enip_point(device: DeviceConfig, address: str, data_type: DataType | None, name: str = "") -> Point:
    """A Point as the tag layer would build it (validated through the registry)."""
    checked = registry.validate_address(device, address, data_type)
    return Point(f"[test]Logix/{name or address}", address, checked)


def enip_driver(server: EnipSimServer, **extra: Any) -> tuple[DeviceConfig, Driver]:
    device = DeviceConfig("logix", "enip", enip_settings(server.port, **extra))
    return device, registry.create_driver(device)


@pytest.fixture
def enip_dut() -> Iterator[DeviceUnderTest]:
    server = make_enip_server()
    device, driver = enip_driver(server)
    points = {}
    for key, address in CONTRACT_ADDRESSES.items():
        data_type = ENIP_POINTS[address][0] if address in ENIP_POINTS else MISSING_TYPE
        points[key] = enip_point(device, address, data_type, key)
    try:
        yield DeviceUnderTest("enip", driver, points, server, dict(device.settings))
    finally:
        driver.close()
        server.stop()
