"""The ``[devices.NAME]`` keys of an EtherNet/IP (Logix) device, validated with errors naming the key."""

from __future__ import annotations

from dataclasses import dataclass

from exchange._config import DeviceConfig
from exchange._drivers.settings_reader import SettingsReader

_KEYS = {
    "host", "port", "slot", "upload_tags", "timeout_ms", "reconnect_min_ms", "reconnect_max_ms",
}


@dataclass(frozen=True)
class EnipSettings:
    device: str
    host: str
    port: int = 44818
    slot: int = 0
    upload_tags: bool = True  # false: tag types come from the config (controllers that cannot list tags)
    timeout_ms: int = 3000  # connect and per-request socket timeout
    reconnect_min_ms: int = 200  # first wait after a failed connect; doubles up to reconnect_max_ms
    reconnect_max_ms: int = 5000

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def cip_path(self) -> str:
        """The pycomm3 path: host, port and backplane slot of the controller."""
        return f"{self.host}:{self.port}/{self.slot}"

    @classmethod
    def from_device(cls, device: DeviceConfig) -> EnipSettings:
        """Validate ``device.settings``; ConfigError names ``devices.NAME.key`` and the bad value."""
        read = SettingsReader(device, _KEYS, "enip")
        read.check_unknown()
        settings = cls(
            device=device.name,
            host=read.host(bare=True),  # bare: the CIP path appends ":port/slot" itself
            port=read.port(44818),
            slot=read.integer("slot", 0, 0, 255),
            upload_tags=read.boolean("upload_tags", True),
            timeout_ms=read.integer("timeout_ms", 3000, 1, 600_000),
            reconnect_min_ms=read.integer("reconnect_min_ms", 200, 1, 3_600_000),
            reconnect_max_ms=read.integer("reconnect_max_ms", 5000, 1, 3_600_000),
        )
        read.check_at_least("reconnect_max_ms", settings.reconnect_max_ms,
                            "reconnect_min_ms", settings.reconnect_min_ms)
        return settings
