"""Which module implements each ``driver = "..."`` of the config, imported only when used.

Every protocol module (``exchange.drivers.opcua``, ``.modbus``, ``.enip``) exposes two functions:

- ``create(device: DeviceConfig) -> Driver``: a driver for the device (it may connect lazily);
- ``parse_address(address: str, data_type: DataType | None) -> DataType | None``: validate an
  address as written in the config; return its effective data type, or None when the device
  decides (OPC UA); raise ConfigError/TagError naming the address otherwise.

Optional, used when present: ``parse_device_address(device, address, data_type)`` (a check that
needs the device's settings, e.g. Modbus ``zero_based``), ``address_writable(address) -> bool``
(False for addresses the protocol cannot write, e.g. Modbus input registers), and
``validate_settings(device)`` (raise ConfigError for bad ``[devices.NAME]`` keys).

The imports are lazy so that a gateway without OPC UA devices never imports asyncua, and so on.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from exchange.config import DRIVERS, DeviceConfig
from exchange.drivers.base import Driver
from exchange.errors import ConfigError, ExchangeError
from exchange.tags.model import DataType

_MODULES = {name: f"exchange.drivers.{name}" for name in DRIVERS}


def driver_module(device: DeviceConfig) -> ModuleType:
    """The protocol module for ``device.driver``; ConfigError for an unknown driver name."""
    try:
        module_name = _MODULES[device.driver]
    except KeyError:
        raise ConfigError(
            f"devices.{device.name}.driver must be one of {', '.join(_MODULES)}, got {device.driver!r}"
        ) from None
    return importlib.import_module(module_name)


def create_driver(device: DeviceConfig) -> Driver:
    """A new driver for ``device`` from its protocol module."""
    driver: Driver = driver_module(device).create(device)
    return driver


def validate_address(device: DeviceConfig, address: str, data_type: DataType | None) -> DataType | None:
    """Check ``address`` (and the configured ``data_type``) for ``device``; return the effective type.

    Errors are ConfigError naming the device, the address and what is wrong.
    """
    module = driver_module(device)
    try:
        checker = getattr(module, "parse_device_address", None)
        if checker is not None:
            result: DataType | None = checker(device, address, data_type)
        else:
            result = module.parse_address(address, data_type)
    except ConfigError as exc:
        raise ConfigError(f"device {device.name!r} ({device.driver}): {exc}") from exc
    except ExchangeError as exc:
        raise ConfigError(f"device {device.name!r} ({device.driver}): address {address!r}: {exc}") from exc
    return result


def address_writable(device: DeviceConfig, address: str) -> bool:
    """False when the protocol cannot write ``address`` at all (Modbus IR/DI); True otherwise."""
    checker = getattr(driver_module(device), "address_writable", None)
    return True if checker is None else bool(checker(address))


def validate_settings(device: DeviceConfig) -> None:
    """Validate the device's settings where its module offers a check (ConfigError otherwise)."""
    checker = getattr(driver_module(device), "validate_settings", None)
    if checker is not None:
        checker(device)
