"""Modbus devices (``driver = "modbus"``) served by :class:`simulators.servers.modbus.ModbusSimServer`.

Addresses are parsed by the driver's own parser (:func:`exchange._drivers.modbus.address.
parse_modbus_address`) with the device's ``zero_based``; values are encoded in its ``word_order``.
Each transport has a server factory in :data:`TRANSPORTS`: ``"tcp"`` (Modbus TCP on the configured
port), ``"rtu-over-tcp"`` (RTU frames on that port, as a serial-to-Ethernet gateway passes them) and
``"serial"`` (RTU on a serial line: the configured ``serial_port`` cannot be opened by the simulator,
so each such device gets its own socat pty pair, :mod:`simulators.servers.pty_pair`, at its
``baudrate``; the written config names the pair's client end as ``serial_port``). A serial device has
no port: its endpoint's port is 0 and it shows its serial port instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from exchange._config import DeviceConfig
from exchange._drivers.modbus.address import parse_modbus_address
from exchange._drivers.modbus.settings import ModbusSettings
from exchange._values import DataType
from exchange.errors import ConfigError
from simulators.devices.base import Endpoint, ServedMethod, Slot, UnservableError
from simulators.servers.base import SimPoint, SimServer

DEFAULT_TRANSPORT = "tcp"
SERIAL = "serial"


def _serving(transport: str) -> ServerFactory:
    def build(settings: ModbusSettings, points: Sequence[SimPoint], host: str, port: int) -> SimServer:
        from simulators.servers.modbus import ModbusSimServer

        return ModbusSimServer(points, host=host, port=port, unit_id=settings.unit_id,
                               zero_based=settings.zero_based, word_order=settings.word_order,
                               transport=transport, baudrate=settings.baudrate)

    return build


ServerFactory = Callable[[ModbusSettings, Sequence[SimPoint], str, int], SimServer]
# transport (the device's ``transport`` key, "tcp" when absent) -> how to serve it
TRANSPORTS: dict[str, ServerFactory] = {name: _serving(name) for name in (DEFAULT_TRANSPORT, "rtu-over-tcp", SERIAL)}


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
    arrays = False
    methods = False

    def endpoint(self, device: DeviceConfig) -> Endpoint:
        transport = _transport(device)
        settings = _settings(device)
        if settings.byte_order != "big":
            raise UnservableError(f"byte_order {settings.byte_order!r}: the simulator serves registers big-endian "
                                  "(byte_order = \"big\") only")
        if transport == SERIAL:
            return Endpoint("", 0, serial_port=settings.serial_port)
        return Endpoint(settings.host, settings.port)

    def slot(self, device: DeviceConfig, address: str, data_type: DataType | None) -> Slot:
        zero_based = device.settings.get("zero_based", False) is True
        try:
            parsed = parse_modbus_address(address, data_type, zero_based=zero_based)
        except ConfigError as exc:
            raise UnservableError(str(exc)) from exc
        span = (parsed.table, parsed.offset, parsed.end)
        if parsed.bit is not None:  # a point of its own, beside the register's word and other bits
            return Slot(key=(parsed.table, parsed.offset, parsed.bit), span=span, data_type=parsed.data_type,
                        bit=parsed.bit)
        return Slot(key=(parsed.table, parsed.offset), span=span, data_type=parsed.data_type)

    def infer_type(self, value: bool | int | float | str) -> DataType:
        raise UnservableError("a Modbus address says its own type")  # never asked: slot() gives it

    def check_type(self, data_type: DataType) -> None:
        return None  # the address parser admits only what the register codec can hold

    def server(self, device: DeviceConfig, points: Sequence[SimPoint], host: str, port: int,
               methods: Sequence[ServedMethod] = ()) -> SimServer:
        return TRANSPORTS[_transport(device)](_settings(device), points, host, port)

    def device_out(self, table: Mapping[str, Any], configured: Endpoint, host: str, port: int,
                   server: SimServer) -> dict[str, Any]:
        serial_port = getattr(server, "serial_port", None)
        if configured.serial_port or serial_port:  # the pair's client end (the configured one before start)
            return {**table, "serial_port": serial_port or configured.serial_port}
        return {**table, "host": host, "port": port}

    def tag_out(self, table: Mapping[str, Any], data_type: DataType) -> dict[str, Any]:
        return dict(table)


KIND = ModbusKind()
