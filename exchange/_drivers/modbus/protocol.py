"""``driver = "modbus"``: the :class:`~exchange._drivers.base.DeviceProtocol` of Modbus TCP devices."""

from __future__ import annotations

from exchange._config import DeviceConfig
from exchange._drivers.modbus.address import parse_address, parse_modbus_address
from exchange._drivers.modbus.driver import ModbusDriver
from exchange._drivers.modbus.settings import ModbusSettings
from exchange._values import DataType

__all__ = ["MODBUS", "ModbusProtocol"]


class ModbusProtocol:
    """Addresses ``C``/``DI``/``IR``/``HR`` + type + number (:mod:`exchange._drivers.modbus.address`);
    settings :class:`~exchange._drivers.modbus.settings.ModbusSettings`."""

    name = "modbus"

    def create(self, device: DeviceConfig) -> ModbusDriver:
        """A Modbus TCP driver for ``device`` (ConfigError for bad settings); it connects on first use."""
        return ModbusDriver(ModbusSettings.from_device(device))

    def validate_settings(self, device: DeviceConfig) -> None:
        """Raise ConfigError naming the key when the device's settings cannot be used."""
        ModbusSettings.from_device(device)

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


MODBUS = ModbusProtocol()
