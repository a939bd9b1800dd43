"""Which protocol implements each ``driver = "..."`` of the config, imported only when used.

:data:`PROTOCOLS` maps every name :data:`exchange._config.DRIVERS` admits to a loader of that
protocol's :class:`~exchange._drivers.base.DeviceProtocol` object. The loaders import their package
inside the function, so a gateway without OPC UA devices never imports asyncua, one without
EtherNet/IP devices never imports pycomm3, and so on (``tests/drivers/test_registry.py`` checks it).
The imports are written out, not computed from the name: mypy checks each protocol object against
the interface, and every protocol offers every check (no optional functions found with getattr).

The functions below are what the tag layer calls; each takes the device's config and adds the device
to error messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from exchange._config import DeviceConfig
from exchange._drivers.base import DeviceProtocol, Driver, Point
from exchange._values import DataType
from exchange.errors import ConfigError, ExchangeError

__all__ = [
    "PROTOCOLS", "address_writable", "check_value", "create_driver", "protocol", "validate_address",
    "validate_devices", "validate_settings", "validate_tag_options",
]


def _opcua() -> DeviceProtocol:
    from exchange._drivers.opcua import OPCUA

    return OPCUA


def _modbus() -> DeviceProtocol:
    from exchange._drivers.modbus import MODBUS

    return MODBUS


def _enip() -> DeviceProtocol:
    from exchange._drivers.enip import ENIP

    return ENIP


# name -> loader; the names and their order are exchange._config.DRIVERS' (a test holds them equal)
PROTOCOLS: Mapping[str, Callable[[], DeviceProtocol]] = {"opcua": _opcua, "modbus": _modbus, "enip": _enip}


def protocol(device: DeviceConfig) -> DeviceProtocol:
    """The protocol of ``device.driver``, imported on first use; ConfigError for an unknown name.

    The config refuses unknown names when it is loaded; this guards a DeviceConfig built in code.
    """
    loader = PROTOCOLS.get(device.driver)
    if loader is None:
        raise ConfigError(
            f"devices.{device.name}.driver must be one of {', '.join(PROTOCOLS)}, got {device.driver!r}"
        )
    return loader()


def create_driver(device: DeviceConfig) -> Driver:
    """A new driver for ``device`` (it may connect lazily)."""
    return protocol(device).create(device)


def validate_address(device: DeviceConfig, address: str, data_type: DataType | None) -> DataType | None:
    """Check ``address`` (and the configured ``data_type``) for ``device``; return the effective type.

    Errors are ConfigError naming the device, the address and what is wrong.
    """
    checker = protocol(device)
    try:
        return checker.parse_device_address(device, address, data_type)
    except ConfigError as exc:
        raise ConfigError(f"device {device.name!r} ({device.driver}): {exc}") from exc
    except ExchangeError as exc:
        raise ConfigError(f"device {device.name!r} ({device.driver}): address {address!r}: {exc}") from exc


def validate_tag_options(device: DeviceConfig, address: str, options: Mapping[str, Any], array: bool) -> None:
    """Check a tag's protocol keys (``options``: Modbus ``byte_order``, ``word_order``, ``rmw``) and
    whether it may be an ``array`` (``type = "Float32[]"``) on ``device``, once its address passed
    :func:`validate_address`. ConfigError naming the device and the key."""
    try:
        protocol(device).check_tag_options(device, address, options, array)
    except ExchangeError as exc:
        raise ConfigError(f"device {device.name!r} ({device.driver}): {exc}") from exc


def address_writable(device: DeviceConfig, address: str) -> bool:
    """False when the protocol cannot write ``address`` at all (Modbus IR/DI); True otherwise."""
    return protocol(device).address_writable(address)


def check_value(device: DeviceConfig, point: Point, value: Any) -> None:
    """TagTypeError/TagRangeError when ``value`` cannot be encoded at ``point`` on ``device`` at all
    (checked for every value of a write before anything is sent to any device)."""
    protocol(device).check_value(point, value)


def validate_settings(device: DeviceConfig) -> None:
    """Raise ConfigError naming the device and key when its ``[devices.NAME]`` settings are unusable."""
    protocol(device).validate_settings(device)


def validate_devices(devices: Iterable[DeviceConfig]) -> None:
    """:func:`validate_settings` of each device, then whether the devices of each protocol can work
    together (devices sharing a serial port agree on its settings); ConfigError naming the first
    device and key that cannot."""
    by_protocol: dict[str, list[DeviceConfig]] = {}
    for device in devices:
        validate_settings(device)
        by_protocol.setdefault(device.driver, []).append(device)
    for group in by_protocol.values():
        protocol(group[0]).check_devices(group)
