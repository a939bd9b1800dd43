"""``driver = "opcua"``: the :class:`~exchange._drivers.base.DeviceProtocol` of OPC UA servers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from exchange._config import DeviceConfig
from exchange._drivers.base import Point
from exchange._drivers.opcua.addresses import parse_node_id_text
from exchange._drivers.opcua.settings import parse_settings
from exchange._drivers.settings_reader import refuse_tag_options
from exchange._values import DataType
from exchange.errors import ConfigError

if TYPE_CHECKING:
    from exchange._drivers.opcua.driver import OpcUaDriver

__all__ = ["OPCUA", "OpcUaProtocol"]


class OpcUaProtocol:
    """Addresses are NodeIds (:func:`~exchange._drivers.opcua.addresses.parse_node_id_text`); a
    tag's data type, unless configured, is the node's, learned on connect. Settings:
    :mod:`exchange._drivers.opcua.settings`. Errors name the device as ``device 'NAME' (opcua)``.

    Only :meth:`create` imports asyncua (with the driver): the checks the gateway makes at start-up,
    before it recovers its runs, do not."""

    name = "opcua"

    def create(self, device: DeviceConfig) -> OpcUaDriver:
        """The driver for an ``opcua`` device (ConfigError naming device and key for bad settings).

        Nothing connects yet: the first read, write or subscribe does.
        """
        if device.driver != self.name:
            raise ConfigError(f"device {device.name!r}: driver is {device.driver!r}, not 'opcua'")
        from exchange._drivers.opcua.driver import OpcUaDriver

        return OpcUaDriver(parse_settings(device))

    def validate_settings(self, device: DeviceConfig) -> None:
        """Raise ConfigError naming the device and key when the ``[devices.NAME]`` settings are unusable."""
        parse_settings(device)

    def check_devices(self, devices: Sequence[DeviceConfig]) -> None:
        """Nothing: each device has a connection of its own."""
        return None

    def parse_address(self, address: str, data_type: DataType | None) -> DataType | None:
        """Validate a NodeId address (TagPathError naming it and the fault); return ``data_type``
        (None: learned from the node)."""
        parse_node_id_text(address)
        return data_type

    def parse_device_address(self, device: DeviceConfig, address: str, data_type: DataType | None) -> DataType | None:
        """:meth:`parse_address`: no setting of the device changes what an address may be."""
        return self.parse_address(address, data_type)

    def address_writable(self, address: str) -> bool:
        """True: whether a node may be written is the server's to say (access level, user rights)."""
        return True

    def check_value(self, point: Point, value: Any) -> None:
        """Nothing to check before sending: OPC UA nodes: the node's type decides, learned from the device."""
        return None

    def check_tag_options(self, device: DeviceConfig, address: str, options: Mapping[str, Any], array: bool) -> None:
        """Arrays are welcome (the node says whether it holds one); Modbus's tag keys are not."""
        refuse_tag_options("opcua", options)


OPCUA = OpcUaProtocol()
