"""Modbus devices (pymodbus): ``driver = "modbus"``, over TCP, RTU over TCP or RTU on a serial line.

- :mod:`.protocol`: :data:`MODBUS`, what the registry hands the tag layer (create, address checks);
- :mod:`.driver`: :class:`ModbusDriver`, reads coalesced into block requests, exact writes (and the
  traps of real lines, in its docstring);
- :mod:`.link`: one device's requests and its backoff; :mod:`.line`: the connection or serial port,
  shared by the devices on one wire;
- :mod:`.address`: Ignition-style addresses (shared with the simulator); :mod:`.codec`: values to and
  from registers in every byte and word order, strings, bits;
- :mod:`.plan`: reads merged into the fewest requests, writes into contiguous blocks;
  :mod:`.writes`: a write call as requests (mask writes for bits, overlaps refused);
- :mod:`.settings`: the ``[devices.NAME]`` keys.

Importing this package imports pymodbus; the registry does it only for a configured Modbus device.
"""

from __future__ import annotations

from exchange._drivers.modbus.driver import ModbusDriver
from exchange._drivers.modbus.protocol import MODBUS, ModbusProtocol

__all__ = ["MODBUS", "ModbusDriver", "ModbusProtocol"]
