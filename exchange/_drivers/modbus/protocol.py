"""``driver = "modbus"``: the :class:`~exchange._drivers.base.DeviceProtocol` of Modbus devices
(TCP, RTU over TCP, RTU on a serial line)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from exchange._config import DeviceConfig
from exchange._drivers.base import Point
from exchange._drivers.modbus.address import BIT_TABLES, TABLE_NAMES, parse_address, parse_modbus_address
from exchange._drivers.modbus.codec import ORDERS, Layout
from exchange._drivers.modbus.driver import ModbusDriver
from exchange._drivers.modbus.settings import ModbusSettings, check_shared_ports
from exchange._drivers.modbus.writes import encode_checked
from exchange._drivers.settings_reader import exact_choice
from exchange._values import DataType
from exchange.errors import ConfigError

__all__ = ["MODBUS", "ModbusProtocol"]


class ModbusProtocol:
    """Addresses ``C``/``DI``/``IR``/``HR`` + type + number (:mod:`exchange._drivers.modbus.address`);
    settings :class:`~exchange._drivers.modbus.settings.ModbusSettings`."""

    name = "modbus"

    def create(self, device: DeviceConfig) -> ModbusDriver:
        """A Modbus driver for ``device`` (ConfigError for bad settings); it connects on first use."""
        return ModbusDriver(ModbusSettings.from_device(device))

    def validate_settings(self, device: DeviceConfig) -> None:
        """Raise ConfigError naming the key when the device's settings cannot be used."""
        ModbusSettings.from_device(device)

    def check_devices(self, devices: Sequence[DeviceConfig]) -> None:
        """Devices on one serial port must agree on its baud rate, parity, stop bits and byte size."""
        check_shared_ports([ModbusSettings.from_device(device) for device in devices])

    def parse_address(self, address: str, data_type: DataType | None) -> DataType | None:
        """The address's data type; number 0 is accepted (only the device knows ``zero_based``)."""
        return parse_address(address, data_type)

    def parse_device_address(self, device: DeviceConfig, address: str, data_type: DataType | None) -> DataType:
        """The address's data type for this device (its ``zero_based`` numbering); ConfigError if bad."""
        # the settings themselves are checked by validate_settings; a non-boolean means the default
        zero_based = device.settings.get("zero_based", False) is True
        return parse_modbus_address(address, data_type, zero_based=zero_based).data_type

    def address_writable(self, address: str) -> bool:
        """False for input registers and discrete inputs, which the protocol cannot write."""
        return parse_modbus_address(address, None, zero_based=True).writable

    def check_value(self, point: Point, value: Any) -> None:
        """What a register cannot hold at all: a string longer than its registers or not ASCII."""
        addr = parse_modbus_address(point.address, point.data_type, zero_based=True)
        if addr.data_type is DataType.STRING:
            encode_checked(addr, Layout(), value, f"tag {point.path!r}")

    def check_tag_options(self, device: DeviceConfig, address: str, options: Mapping[str, Any], array: bool) -> None:
        """A tag's ``byte_order`` / ``word_order`` ("big" or "little") where its value spans bytes,
        ``rmw`` (a boolean) on a bit of a holding register; no arrays (one tag, one value)."""
        if array:
            raise ConfigError(f"address {address!r}: a Modbus tag holds one value, not an array (arrays are "
                              "OPC UA's); give each register its own tag")
        addr = parse_modbus_address(address, None, zero_based=True)
        for key in ("byte_order", "word_order"):
            if key not in options:
                continue
            exact_choice(options[key], ORDERS, key)
            if addr.table in BIT_TABLES:
                raise ConfigError(f"{key}: a {TABLE_NAMES[addr.table]} ({address!r}) is one bit, it has no {key}")
            if key == "word_order" and (addr.bit is not None or addr.data_type is DataType.STRING):
                what = ("a bit of a register" if addr.bit is not None
                        else "a string (its characters go register by register)")
                raise ConfigError(f"word_order: {address!r} is {what}; it has no word order (byte_order may apply)")
        if "rmw" in options:
            if not isinstance(options["rmw"], bool):
                raise ConfigError(f"rmw must be true or false, got {options['rmw']!r}")
            if addr.bit is None or addr.table != "HR":
                raise ConfigError(f"rmw applies to a bit of a holding register (e.g. HR10.3), not {address!r}")


MODBUS = ModbusProtocol()
