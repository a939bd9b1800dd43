"""The ``[devices.NAME]`` keys of a Modbus TCP device, validated once with errors naming the key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exchange.config import DeviceConfig
from exchange.drivers.modbus_address import WORD_ORDERS
from exchange.drivers.modbus_plan import MAX_READ_BITS, MAX_READ_REGISTERS
from exchange.errors import ConfigError

_KEYS = {
    "driver", "host", "port", "unit_id", "zero_based", "word_order", "timeout_ms", "span_gaps",
    "max_registers_per_read", "max_bits_per_read", "reconnect_min_ms", "reconnect_max_ms",
}


@dataclass(frozen=True)
class ModbusSettings:
    device: str
    host: str
    port: int = 502
    unit_id: int = 1
    zero_based: bool = False
    word_order: str = "big"
    timeout_ms: int = 2000
    span_gaps: bool = True  # one read may cover unrequested registers between two tags
    max_registers_per_read: int = MAX_READ_REGISTERS
    max_bits_per_read: int = MAX_READ_BITS
    reconnect_min_ms: int = 100
    reconnect_max_ms: int = 5000

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def from_device(cls, device: DeviceConfig) -> ModbusSettings:
        """Validate ``device.settings``; ConfigError names ``devices.NAME.key`` and the bad value."""
        raw: Mapping[str, Any] = device.settings
        where = f"devices.{device.name}"
        unknown = set(raw) - _KEYS
        if unknown:
            raise ConfigError(
                f"{where}: unknown modbus key(s) {', '.join(sorted(unknown))} "
                f"(known: {', '.join(sorted(_KEYS - {'driver'}))})"
            )
        host = raw.get("host")
        if not isinstance(host, str) or not host.strip():
            raise ConfigError(f"{where}.host must be a non-empty string, got {host!r}")
        word_order = raw.get("word_order", "big")
        if word_order not in WORD_ORDERS:
            raise ConfigError(f'{where}.word_order must be "big" or "little", got {word_order!r}')
        settings = cls(
            device=device.name,
            host=host.strip(),
            port=_int(raw, "port", 502, 1, 65535, where),
            unit_id=_int(raw, "unit_id", 1, 0, 255, where),
            zero_based=_bool(raw, "zero_based", False, where),
            word_order=str(word_order),
            timeout_ms=_int(raw, "timeout_ms", 2000, 1, 600_000, where),
            span_gaps=_bool(raw, "span_gaps", True, where),
            max_registers_per_read=_int(raw, "max_registers_per_read", MAX_READ_REGISTERS, 1,
                                        MAX_READ_REGISTERS, where),
            max_bits_per_read=_int(raw, "max_bits_per_read", MAX_READ_BITS, 1, MAX_READ_BITS, where),
            reconnect_min_ms=_int(raw, "reconnect_min_ms", 100, 1, 3_600_000, where),
            reconnect_max_ms=_int(raw, "reconnect_max_ms", 5000, 1, 3_600_000, where),
        )
        if settings.reconnect_max_ms < settings.reconnect_min_ms:
            raise ConfigError(
                f"{where}.reconnect_max_ms ({settings.reconnect_max_ms}) must be >= reconnect_min_ms "
                f"({settings.reconnect_min_ms})"
            )
        return settings


def _int(raw: Mapping[str, Any], key: str, default: int, low: int, high: int, where: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"{where}.{key} must be an integer from {low} to {high}, got {value!r}")
    return value


def _bool(raw: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be true or false, got {value!r}")
    return value
