"""What a driver contract test gets from each protocol's fixture (tests/drivers/dut_<protocol>.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exchange._drivers.base import Driver, Point
from simulators.servers.base import SimServer


@dataclass
class DeviceUnderTest:
    """A driver connected to a real server of its protocol on a free port.

    ``points`` has at least the keys ``bool``, ``int16``, ``int32``, ``float32`` (writable points) and
    ``missing`` (an address the server does not have). ``server`` gives server-side values, write
    counts and faults.
    """

    protocol: str
    driver: Driver
    points: dict[str, Point]
    server: SimServer
    settings: dict[str, Any]
