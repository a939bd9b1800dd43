"""``driver = "enip"``: the :class:`~exchange._drivers.base.DeviceProtocol` of Logix controllers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from exchange._config import DeviceConfig
from exchange._drivers.base import Point
from exchange._drivers.enip.driver import EnipDriver
from exchange._drivers.enip.settings import EnipSettings
from exchange._drivers.enip.tags import parse_logix_address
from exchange._drivers.settings_reader import refuse_tag_options
from exchange._values import DataType
from exchange.errors import ConfigError

__all__ = ["ENIP", "EnipProtocol"]


class EnipProtocol:
    """Addresses are Logix symbolic names (:mod:`exchange._drivers.enip.tags`); a tag's data type,
    unless configured, is the controller's (its uploaded tag list). Settings:
    :class:`~exchange._drivers.enip.settings.EnipSettings`."""

    name = "enip"

    def create(self, device: DeviceConfig) -> EnipDriver:
        """A driver for ``device`` (ConfigError for bad settings); it connects on first use."""
        return EnipDriver(EnipSettings.from_device(device))

    def validate_settings(self, device: DeviceConfig) -> None:
        """Raise ConfigError naming the key when ``[devices.NAME]`` cannot be used."""
        EnipSettings.from_device(device)

    def check_devices(self, devices: Sequence[DeviceConfig]) -> None:
        """Nothing: each device has a connection of its own."""
        return None

    def parse_address(self, address: str, data_type: DataType | None) -> DataType | None:
        """Validate a Logix symbolic address (TagPathError naming it if malformed); return ``data_type``.

        None means the controller's tag list decides the type (``upload_tags = true``).
        """
        parse_logix_address(address)
        return data_type

    def parse_device_address(self, device: DeviceConfig, address: str, data_type: DataType | None) -> DataType | None:
        """:meth:`parse_address`, plus: with ``upload_tags = false`` the tag must have a ``type``."""
        settings = EnipSettings.from_device(device)
        parse_logix_address(address)
        if data_type is None and not settings.upload_tags:
            raise ConfigError(
                f"address {address!r} needs `type` (e.g. \"REAL\"): devices.{device.name}.upload_tags is false, "
                "so the tag types come from the config"
            )
        return data_type

    def address_writable(self, address: str) -> bool:
        """True: whether a tag may be written is the controller's to say (external access)."""
        return True

    def check_value(self, point: Point, value: Any) -> None:
        """Nothing to check before sending: the controller decides."""
        return None

    def check_tag_options(self, device: DeviceConfig, address: str, options: Mapping[str, Any], array: bool) -> None:
        """No tag keys of other protocols, and no array values: a tag is one element (``Arr[3]``)."""
        refuse_tag_options("enip", options)
        if array:
            raise ConfigError(f"address {address!r}: an enip tag holds one value, not an array; address an "
                              "element instead, e.g. Arr[3]")


ENIP = EnipProtocol()
