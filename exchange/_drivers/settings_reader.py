"""Typed reads of one ``[devices.NAME]`` table, each bad value a ConfigError naming the device and the key.

The drivers name a key in one of two styles, kept as they are because operators and tests rely on them:
``devices.plc.port must ...`` (Modbus, EtherNet/IP: the TOML path) and ``device 'line' (opcua): port must ...``
(OPC UA, matching its tag-address errors). ``dotted`` picks the style; the checks are the same.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from exchange._config import DeviceConfig
from exchange._config_keys import closest
from exchange.errors import ConfigError

# keys of every device, read by the tag layer (comm_timeout_s: how long a write waits for a lost link)
COMMON_KEYS = frozenset({"driver", "comm_timeout_s"})


class SettingsReader:
    """Reads ``device.settings``; every method raises ConfigError naming the key and the bad value."""

    def __init__(self, device: DeviceConfig, known_keys: Collection[str], protocol: str, *, dotted: bool = True):
        self.raw: Mapping[str, Any] = device.settings
        self._known = frozenset(known_keys) | COMMON_KEYS
        self._protocol = protocol
        self._dotted = dotted
        self.where = f"devices.{device.name}" if dotted else f"device {device.name!r} ({protocol})"

    def at(self, key: str) -> str:
        """The device and ``key``, as the start of an error message."""
        return f"{self.where}.{key}" if self._dotted else f"{self.where}: {key}"

    def check_unknown(self) -> None:
        """ConfigError listing keys this driver does not know (a typo would otherwise be silently ignored)."""
        unknown = sorted(set(self.raw) - self._known)
        if not unknown:
            return
        what = f"unknown {self._protocol} key(s)" if self._dotted else "unknown setting(s)"
        known = ", ".join(sorted(self._known - {"driver"}))
        close = [match for key in unknown if (match := closest(key, self._known)) is not None]
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"{self.where}: {what} {', '.join(unknown)}{hint} (known: {known})")

    def host(self, *, bare: bool = False) -> str:
        """The required ``host``, stripped; ``bare`` also refuses ``:`` and ``/`` (no port or path in it)."""
        value = self.raw.get("host")
        if not isinstance(value, str) or not value.strip() or (bare and ("/" in value or ":" in value)):
            expected = "a host name or IPv4 address" if bare else "a non-empty string"
            raise ConfigError(f"{self.at('host')} must be {expected}, got {value!r}")
        return value.strip()

    def port(self, default: int) -> int:
        """``port``, a TCP port number."""
        return self.integer("port", default, 1, 65535)

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        """An integer from ``low`` to ``high`` inclusive (booleans refused: TOML ``true`` is not 1)."""
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{self.at(key)} must be an integer from {low} to {high}, got {value!r}")
        return value

    def positive_int(self, key: str, default: int, allow_zero: bool = False) -> int:
        """A duration in milliseconds above zero (or at least zero with ``allow_zero``), no upper bound."""
        value = self.raw.get(key, default)
        low = 0 if allow_zero else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            kind = "a non-negative" if allow_zero else "a positive"
            raise ConfigError(f"{self.at(key)} must be {kind} integer (milliseconds), got {value!r}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """``true`` or ``false``; strings such as ``"yes"`` are refused."""
        value = self.raw.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.at(key)} must be true or false, got {value!r}")
        return value

    def choice(self, key: str, choices: Collection[str], default: str) -> str:
        """One of ``choices``, spelt exactly as documented (``"big"``, not ``"Big"``: one spelling
        per setting, so a search of the plant's configs finds every device that uses it)."""
        return exact_choice(self.raw.get(key, default), choices, self.at(key))

    def string(self, key: str) -> str | None:
        """An optional non-empty string; None when the key is absent."""
        value = self.raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or value == "":
            raise ConfigError(f"{self.at(key)} must be a non-empty string")
        return value

    def check_at_least(self, key: str, value: int, floor_key: str, floor: int) -> None:
        """ConfigError unless ``value`` (read from ``key``) >= ``floor`` (read from ``floor_key``)."""
        if value < floor:
            raise ConfigError(f"{self.at(key)} must be >= {floor_key} ({floor}), got {value}")


def exact_choice(value: Any, choices: Collection[str], where: str) -> str:
    """``value`` when it is one of ``choices`` exactly; ConfigError naming ``where``, the documented
    spellings and, for a different case or blanks around it, the spelling meant."""
    if isinstance(value, str) and value in choices:
        return value
    spellings = ", ".join(choices)
    meant = next((c for c in choices if isinstance(value, str) and value.strip().lower() == c.lower()), None)
    hint = f" (write {meant!r})" if meant is not None else ""
    raise ConfigError(f"{where} must be one of {spellings}, got {value!r}{hint}")


def refuse_tag_options(protocol: str, options: Mapping[str, Any]) -> None:
    """ConfigError for a tag of ``protocol`` that sets another protocol's tag keys (``byte_order``,
    ``word_order`` and ``rmw`` are Modbus's: a register layout has no meaning elsewhere)."""
    if options:
        keys = ", ".join(sorted(options))
        raise ConfigError(f"{keys}: only Modbus tags take byte_order, word_order and rmw (register layouts); "
                          f"this is an {protocol} tag")
