"""Values as Ignition shows them: a value, a quality name and a timestamp; plus data types.

This is the vocabulary the drivers and the tag layer share, so it sits below both (drivers never
import :mod:`exchange._tags`). Quality names follow Ignition's (``Good``, ``Bad_NotConnected``, ...).
Data type names follow the sized spelling (``Int16``, ``Float32``); Ignition's own spellings
(``Int2``, ``Float4``, ...) and Logix type names (``DINT``, ``REAL``, ...) are accepted as aliases by
:func:`parse_data_type`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypedDict

from exchange._timefmt import iso_utc
from exchange.errors import TagError


class Quality(str, Enum):
    """Ignition's quality names; only ``Good`` carries a value."""

    GOOD = "Good"
    UNCERTAIN = "Uncertain"
    BAD = "Bad"
    BAD_NOT_CONNECTED = "Bad_NotConnected"
    BAD_NOT_FOUND = "Bad_NotFound"
    BAD_READ_ONLY = "Bad_ReadOnly"
    BAD_OUT_OF_RANGE = "Bad_OutOfRange"
    BAD_ACCESS_DENIED = "Bad_AccessDenied"
    BAD_DEVICE_ERROR = "Bad_DeviceError"
    ERROR_TYPE_CONVERSION = "Error_TypeConversion"
    ERROR_TIMEOUT_EXPIRED = "Error_TimeoutExpired"
    ERROR = "Error"

    @property
    def is_good(self) -> bool:
        return self is Quality.GOOD


class DataType(str, Enum):
    """The data types a tag can have; the value is the name shown in messages (``Int16``)."""

    BOOLEAN = "Boolean"
    INT8 = "Int8"
    UINT8 = "UInt8"
    INT16 = "Int16"
    UINT16 = "UInt16"
    INT32 = "Int32"
    UINT32 = "UInt32"
    INT64 = "Int64"
    UINT64 = "UInt64"
    FLOAT32 = "Float32"
    FLOAT64 = "Float64"
    STRING = "String"

    @property
    def is_integer(self) -> bool:
        return self in _INT_RANGES

    @property
    def is_float(self) -> bool:
        return self in (DataType.FLOAT32, DataType.FLOAT64)

    def integer_range(self) -> tuple[int, int]:
        return _INT_RANGES[self]


_INT_RANGES: dict[DataType, tuple[int, int]] = {
    DataType.INT8: (-(2**7), 2**7 - 1),
    DataType.UINT8: (0, 2**8 - 1),
    DataType.INT16: (-(2**15), 2**15 - 1),
    DataType.UINT16: (0, 2**16 - 1),
    DataType.INT32: (-(2**31), 2**31 - 1),
    DataType.UINT32: (0, 2**32 - 1),
    DataType.INT64: (-(2**63), 2**63 - 1),
    DataType.UINT64: (0, 2**64 - 1),
}

_ALIASES: dict[str, DataType] = {
    # Ignition spellings
    "int1": DataType.INT8, "int2": DataType.INT16, "int4": DataType.INT32, "int8": DataType.INT64,
    "float4": DataType.FLOAT32, "float8": DataType.FLOAT64, "bool": DataType.BOOLEAN,
    "double": DataType.FLOAT64, "float": DataType.FLOAT32,
    # Logix spellings
    "sint": DataType.INT8, "usint": DataType.UINT8, "int": DataType.INT16, "uint": DataType.UINT16,
    "dint": DataType.INT32, "udint": DataType.UINT32, "lint": DataType.INT64, "ulint": DataType.UINT64,
    "real": DataType.FLOAT32, "lreal": DataType.FLOAT64, "string": DataType.STRING,
    "sstring": DataType.STRING,
}


def parse_data_type(name: str) -> DataType:
    """Return the DataType for ``name`` (sized, Ignition or Logix spelling, any case)."""
    for member in DataType:
        if member.value.lower() == name.lower():
            return member
    try:
        return _ALIASES[name.lower()]
    except KeyError:
        raise TagError(f"unknown data type {name!r}") from None


class _ReadingKeys(TypedDict):
    value: Any
    quality: str
    timestamp: str


class TagReading(_ReadingKeys, total=False):
    """A reading as people see it (``tags.read``, ``exchange tag read --json``): the value (None
    unless the quality is Good), Ignition's quality name, the ISO 8601 UTC timestamp, and ``error``
    only when a quality that is not Good has a reason."""

    error: str


@dataclass(frozen=True)
class QualifiedValue:
    """A value as read from a device: ``value`` is None unless ``quality`` is Good.

    ``error`` optionally says why a quality is not Good (device, address and the device's code).
    """

    value: Any
    quality: Quality
    timestamp: float  # seconds since the epoch
    error: str | None = None

    @classmethod
    def good(cls, value: Any, timestamp: float | None = None) -> QualifiedValue:
        return cls(value, Quality.GOOD, time.time() if timestamp is None else timestamp)

    @classmethod
    def bad(
        cls, quality: Quality, timestamp: float | None = None, error: str | None = None
    ) -> QualifiedValue:
        return cls(None, quality, time.time() if timestamp is None else timestamp, error)

    def to_dict(self) -> TagReading:
        out: TagReading = {"value": self.value, "quality": self.quality.value, "timestamp": iso_utc(self.timestamp)}
        if self.error is not None:
            out["error"] = self.error
        return out
