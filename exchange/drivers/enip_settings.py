"""The ``[devices.NAME]`` keys of an EtherNet/IP (Logix) device, validated with errors naming the key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exchange.config import DeviceConfig
from exchange.errors import ConfigError

_KEYS = {
    "driver", "host", "port", "slot", "upload_tags", "timeout_ms", "reconnect_min_ms", "reconnect_max_ms",
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
        raw: Mapping[str, Any] = device.settings
        where = f"devices.{device.name}"
        unknown = set(raw) - _KEYS
        if unknown:
            raise ConfigError(
                f"{where}: unknown enip key(s) {', '.join(sorted(unknown))} "
                f"(known: {', '.join(sorted(_KEYS - {'driver'}))})"
            )
        host = raw.get("host")
        if not isinstance(host, str) or not host.strip() or "/" in host or ":" in host:
            raise ConfigError(f"{where}.host must be a host name or IPv4 address, got {host!r}")
        upload_tags = raw.get("upload_tags", True)
        if not isinstance(upload_tags, bool):
            raise ConfigError(f"{where}.upload_tags must be true or false, got {upload_tags!r}")
        settings = cls(
            device=device.name,
            host=host.strip(),
            port=_int(raw, "port", 44818, 1, 65535, where),
            slot=_int(raw, "slot", 0, 0, 255, where),
            upload_tags=upload_tags,
            timeout_ms=_int(raw, "timeout_ms", 3000, 1, 600_000, where),
            reconnect_min_ms=_int(raw, "reconnect_min_ms", 200, 1, 3_600_000, where),
            reconnect_max_ms=_int(raw, "reconnect_max_ms", 5000, 1, 3_600_000, where),
        )
        if settings.reconnect_max_ms < settings.reconnect_min_ms:
            raise ConfigError(f"{where}.reconnect_max_ms must be >= reconnect_min_ms")
        return settings


def _int(raw: Mapping[str, Any], key: str, default: int, low: int, high: int, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{where}.{key} must be an integer from {low} to {high}, got {value!r}")
    return value
