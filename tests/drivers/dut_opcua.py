"""The opcua device under test: a real asyncua server on a free port and an Exchange driver for it.

An asyncua server takes about 1.5 s to build (it loads the standard address space), so one server is
shared by the whole test session (:func:`shared_opcua_server`); each test gets a fresh driver and the
points' initial values. A test that stops the server leaves it to the next user to start again.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._drivers.base import Point
from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.opcua import OpcUaSimServer
from tests.drivers.contract import DeviceUnderTest

# address -> (data type, initial value, writable)
OPCUA_POINTS: dict[str, tuple[DataType, Any, bool]] = {
    "ns=2;s=Test.Bool": (DataType.BOOLEAN, False, True),
    "ns=2;s=Test.Int16": (DataType.INT16, -12, True),
    "ns=2;s=Test.UInt16": (DataType.UINT16, 65_000, True),
    "ns=2;s=Test.Int32": (DataType.INT32, 70_000, True),
    "ns=2;s=Test.Float32": (DataType.FLOAT32, 1.5, True),
    "ns=2;s=Test.Float64": (DataType.FLOAT64, 2.25, True),
    "ns=2;s=Test.String": (DataType.STRING, "idle", True),
    "ns=2;i=1001": (DataType.INT32, 7, True),
    "ns=2;s=Test.ReadOnly": (DataType.INT16, 5, False),
    **{f"ns=2;s=Bulk.F{i:03d}": (DataType.FLOAT32, i * 0.5, True) for i in range(100)},
}
BULK_ADDRESSES = [f"ns=2;s=Bulk.F{i:03d}" for i in range(100)]
MISSING_ADDRESS = "ns=2;s=Test.Missing"
CONTRACT_ADDRESSES = {
    "bool": "ns=2;s=Test.Bool",
    "int16": "ns=2;s=Test.Int16",
    "int32": "ns=2;s=Test.Int32",
    "float32": "ns=2;s=Test.Float32",
    "missing": MISSING_ADDRESS,
}

_shared: list[OpcUaSimServer] = []


def make_opcua_points() -> list[SimPoint]:
    return [SimPoint(address, dtype, initial, writable) for address, (dtype, initial, writable) in OPCUA_POINTS.items()]


def shared_opcua_server(config: pytest.Config) -> OpcUaSimServer:
    """The session's OPC UA simulator, running, with every point back at its initial value."""
    if not _shared:
        server = OpcUaSimServer(make_opcua_points())
        server.start()
        _shared.append(server)
        config.add_cleanup(_stop_shared)
    server = _shared[0]
    server.start()  # no-op when running; a power cycle when a test left it stopped
    for address, (_, initial, _) in OPCUA_POINTS.items():
        server.set(address, initial)
    return server


def _stop_shared() -> None:
    while _shared:
        _shared.pop().stop()


def opcua_settings(url: str, **extra: Any) -> dict[str, Any]:
    """Device settings for a test: short timeout and backoff so fault tests stay fast."""
    return {
        "driver": "opcua",
        "url": url,
        "timeout_ms": 2000,
        "reconnect_min_ms": 20,
        "reconnect_max_ms": 200,
        **extra,
    }


def opcua_points(device: DeviceConfig, addresses: dict[str, str]) -> dict[str, Point]:
    return {
        key: Point(f"[test]OpcUa/{key}", address, registry.validate_address(device, address, None))
        for key, address in addresses.items()
    }


@pytest.fixture
def opcua_dut(request: pytest.FixtureRequest) -> Iterator[DeviceUnderTest]:
    server = shared_opcua_server(request.config)
    settings = opcua_settings(server.url)
    device = DeviceConfig("plc", "opcua", settings)
    driver = registry.create_driver(device)
    try:
        yield DeviceUnderTest("opcua", driver, opcua_points(device, CONTRACT_ADDRESSES), server, settings)
    finally:
        driver.close()
