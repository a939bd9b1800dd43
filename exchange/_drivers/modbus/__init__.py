"""Modbus TCP devices (pymodbus): ``driver = "modbus"``.

- :mod:`.protocol`: :data:`MODBUS`, what the registry hands the tag layer (create, address checks);
- :mod:`.driver`: :class:`ModbusDriver`, reads coalesced into block requests, exact writes;
- :mod:`.link`: the connection, its requests and reconnect backoff;
- :mod:`.address`: Ignition-style addresses and the register codec (shared with the simulator);
- :mod:`.plan`: reads merged into the fewest requests, writes into contiguous blocks;
- :mod:`.settings`: the ``[devices.NAME]`` keys.

Importing this package imports pymodbus; the registry does it only for a configured Modbus device.
"""

from __future__ import annotations

from exchange._drivers.modbus.driver import ModbusDriver
from exchange._drivers.modbus.protocol import MODBUS, ModbusProtocol

__all__ = ["MODBUS", "ModbusDriver", "ModbusProtocol"]
