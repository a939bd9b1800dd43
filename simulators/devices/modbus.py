"""Modbus devices (``driver = "modbus"``) served by :class:`simulators.servers.modbus.ModbusSimServer`.

Addresses are parsed by the driver's own parser (:func:`exchange._drivers.modbus.address.
parse_modbus_address`) with the device's ``zero_based``; values are encoded in its ``word_order``.
Each transport the simulator can serve has a server factory in :data:`TRANSPORTS`; a device whose
``transport`` is not there (RTU over TCP, serial) is refused naming the transport, before anything
listens. Serving RTU over TCP is one more entry there (pymodbus's server takes an RTU framer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from exchange._config import DeviceConfig
from exchange._drivers.modbus.address import parse_modbus_address
from exchange._drivers.modbus.settings import ModbusSettings
from exchange._values import DataType
from exchange.errors import ConfigError
from simulators.devices.base import Endpoint, Slot, UnservableError
from simulators.servers.base import SimPoint, SimServer

DEFAULT_TRANSPORT = "tcp"


def _tcp_server(settings: ModbusSettings, points: Sequence[SimPoint], host: str, port: int) -> SimServer:
    from simulators.servers.modbus import ModbusSimServer

    return ModbusSimServer(points, host=host, port=port, unit_id=settings.unit_id,
                           zero_based=settings.zero_based, word_order=settings.word_order)


ServerFactory = Callable[[ModbusSettings, Sequence[SimPoint], str, int], SimServer]
# transport (the device's ``transport`` key, "tcp" when absent) -> how to serve it
TRANSPORTS: dict[str, ServerFactory] = {DEFAULT_TRANSPORT: _tcp_server}


def _transport(device: DeviceConfig) -> str:
    transport = device.settings.get("transport", DEFAULT_TRANSPORT)
    if transport not in TRANSPORTS:
        served = ", ".join(repr(t) for t in TRANSPORTS)
        raise UnservableError(f"Modbus transport {transport!r} is not supported by the simulator yet "
                              f"(it serves {served})")
    return str(transport)


def _settings(device: DeviceConfig) -> ModbusSettings:
    return ModbusSettings.from_device(device)


class ModbusKind:
    driver = "modbus"

    def endpoint(self, device: DeviceConfig) -> Endpoint:
        _transport(device)  # first: the driver may not know the key yet
        settings = _settings(device)
        return Endpoint(settings.host, settings.port)

    def slot(self, device: DeviceConfig, address: str, data_type: DataType | None) -> Slot:
        zero_based = device.settings.get("zero_based", False) is True
        try:
            parsed = parse_modbus_address(address, data_type, zero_based=zero_based)
        except ConfigError as exc:
            raise UnservableError(str(exc)) from exc
        return Slot(key=(parsed.table, parsed.offset), span=(parsed.table, parsed.offset, parsed.end),
                    data_type=parsed.data_type)

    def infer_type(self, value: bool | int | float | str) -> DataType:
        raise UnservableError("a Modbus address says its own type")  # never asked: slot() gives it

    def check_type(self, data_type: DataType) -> None:
        return None  # the address parser admits only what the register codec can hold

    def server(self, device: DeviceConfig, points: Sequence[SimPoint], host: str, port: int) -> SimServer:
        return TRANSPORTS[_transport(device)](_settings(device), points, host, port)

    def device_out(self, table: Mapping[str, Any], configured: Endpoint, host: str, port: int) -> dict[str, Any]:
        return {**table, "host": host, "port": port}

    def tag_out(self, table: Mapping[str, Any], data_type: DataType) -> dict[str, Any]:
        return dict(table)


KIND = ModbusKind()
