"""The ``[devices.NAME]`` keys of a Modbus TCP device, validated once with errors naming the key."""

from __future__ import annotations

from dataclasses import dataclass

from exchange._config import DeviceConfig
from exchange._drivers.modbus.address import WORD_ORDERS
from exchange._drivers.modbus.plan import MAX_READ_BITS, MAX_READ_REGISTERS
from exchange._drivers.settings_reader import SettingsReader

_KEYS = {
    "host", "port", "unit_id", "zero_based", "word_order", "timeout_ms", "span_gaps",
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
        read = SettingsReader(device, _KEYS, "modbus")
        read.check_unknown()
        settings = cls(
            device=device.name,
            host=read.host(),
            port=read.port(502),
            unit_id=read.integer("unit_id", 1, 0, 255),
            zero_based=read.boolean("zero_based", False),
            word_order=read.choice("word_order", WORD_ORDERS, "big"),
            timeout_ms=read.integer("timeout_ms", 2000, 1, 600_000),
            span_gaps=read.boolean("span_gaps", True),
            max_registers_per_read=read.integer("max_registers_per_read", MAX_READ_REGISTERS, 1, MAX_READ_REGISTERS),
            max_bits_per_read=read.integer("max_bits_per_read", MAX_READ_BITS, 1, MAX_READ_BITS),
            reconnect_min_ms=read.integer("reconnect_min_ms", 100, 1, 3_600_000),
            reconnect_max_ms=read.integer("reconnect_max_ms", 5000, 1, 3_600_000),
        )
        read.check_at_least("reconnect_max_ms", settings.reconnect_max_ms,
                            "reconnect_min_ms", settings.reconnect_min_ms)
        return settings
