"""Ignition-style Modbus addresses and the register codec, shared by the driver and the simulator.

An address is a table, an optional type and a number: ``C1`` (coil), ``DI1`` (discrete input),
``IR1`` / ``HR1`` (input / holding register, Int16), and for registers a type between table and
number: ``US`` UInt16, ``I`` Int32, ``UI`` UInt32, ``I_64`` Int64, ``UI_64`` UInt64, ``F`` Float32,
``D`` Float64. ``HRI641`` is the Int32 at 641, as in Ignition: the 64-bit types need the ``_``.
Numbers are 1-based (``HR1`` is protocol address 0) unless the device is ``zero_based``.
Multi-register values are big-endian within each register; ``word_order = "little"`` puts the
least significant register first.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any

from exchange._values import DataType, parse_data_type
from exchange.errors import ConfigError

COIL = "C"
DISCRETE_INPUT = "DI"
INPUT_REGISTER = "IR"
HOLDING_REGISTER = "HR"
BIT_TABLES = (COIL, DISCRETE_INPUT)
WRITABLE_TABLES = (COIL, HOLDING_REGISTER)
TABLE_NAMES = {
    COIL: "coil",
    DISCRETE_INPUT: "discrete input",
    INPUT_REGISTER: "input register",
    HOLDING_REGISTER: "holding register",
}

_TYPE_SUFFIXES: dict[str, DataType] = {
    "": DataType.INT16,
    "US": DataType.UINT16,
    "I": DataType.INT32,
    "UI": DataType.UINT32,
    "I_64": DataType.INT64,
    "UI_64": DataType.UINT64,
    "F": DataType.FLOAT32,
    "D": DataType.FLOAT64,
}
# struct format character and register count of each register data type
_CODEC: dict[DataType, tuple[str, int]] = {
    DataType.INT16: ("h", 1),
    DataType.UINT16: ("H", 1),
    DataType.INT32: ("i", 2),
    DataType.UINT32: ("I", 2),
    DataType.INT64: ("q", 4),
    DataType.UINT64: ("Q", 4),
    DataType.FLOAT32: ("f", 2),
    DataType.FLOAT64: ("d", 4),
}
_STRUCTS = {data_type: struct.Struct(">" + fmt) for data_type, (fmt, _) in _CODEC.items()}
_ADDRESS = re.compile(
    r"^(?P<table>C|DI|IR|HR)(?P<suffix>US|UI_64|UI|I_64|I|F|D)?(?P<number>\d+)$", re.IGNORECASE
)
_HELP = (
    "expected C, DI, IR or HR, an optional register type (US, I, UI, I_64, UI_64, F, D) and a number, "
    "e.g. HRF1"
)
MAX_ADDRESS = 65535
WORD_ORDERS = ("big", "little")


@dataclass(frozen=True)
class ModbusAddress:
    """One parsed address: ``offset`` is the protocol (0-based) address of its first register/bit."""

    text: str
    table: str
    data_type: DataType
    number: int
    offset: int
    width: int  # registers (HR/IR) or bits (C/DI) the value occupies

    @property
    def is_bit(self) -> bool:
        return self.table in BIT_TABLES

    @property
    def writable(self) -> bool:
        return self.table in WRITABLE_TABLES

    @property
    def end(self) -> int:
        """One past the last register/bit the value occupies."""
        return self.offset + self.width


def parse_modbus_address(
    address: str, data_type: DataType | None = None, *, zero_based: bool = False
) -> ModbusAddress:
    """Parse ``address``; ``data_type`` (from the tag's ``type``) may refine a bare ``HR``/``IR``.

    Raises ConfigError naming the address when it is malformed, outside 0..65535, or when
    ``data_type`` contradicts the address (``HRF1`` with ``type = "Int16"``, ``C1`` with a number type).
    """
    text = address.strip()
    match = _ADDRESS.match(text)
    if match is None:
        raise ConfigError(f"modbus address {address!r} is not valid: {_HELP}")
    table = match.group("table").upper()
    suffix = (match.group("suffix") or "").upper()
    number = int(match.group("number"))
    if table in BIT_TABLES:
        if suffix:
            raise ConfigError(f"modbus address {address!r}: a {TABLE_NAMES[table]} takes no type suffix")
        effective = DataType.BOOLEAN
        if data_type is not None and data_type is not DataType.BOOLEAN:
            raise ConfigError(
                f"modbus address {address!r}: a {TABLE_NAMES[table]} is Boolean, not {data_type.value}"
            )
    else:
        effective = _TYPE_SUFFIXES[suffix]
        if data_type is not None and data_type is not effective:
            if suffix or data_type not in _CODEC:
                raise ConfigError(
                    f"modbus address {address!r} is {effective.value} but the tag's type is "
                    f"{data_type.value}" + ("" if suffix else " (registers hold Int/UInt/Float types)")
                )
            effective = data_type  # a bare HR/IR takes the configured type
    width = 1 if table in BIT_TABLES else _CODEC[effective][1]
    offset = number if zero_based else number - 1
    if offset < 0:
        raise ConfigError(f"modbus address {address!r}: numbers start at 1 (set zero_based = true for 0)")
    if offset + width - 1 > MAX_ADDRESS:
        raise ConfigError(f"modbus address {address!r} is beyond the last Modbus address {MAX_ADDRESS}")
    return ModbusAddress(text, table, effective, number, offset, width)


def parse_address(address: str, data_type: DataType | None) -> DataType | None:
    """Validate ``address`` without knowing the device and return its effective data type.

    Whether ``0`` is a valid number depends on the device's ``zero_based`` setting, which
    :meth:`exchange._drivers.modbus.MODBUS.parse_device_address` checks; here it is accepted.
    """
    return parse_modbus_address(address, data_type, zero_based=True).data_type


def type_from_name(name: str) -> DataType:
    """A data type name as written in a config or a SimPoint (``Float32``, ``REAL``, ...)."""
    return parse_data_type(name)


def encode(addr: ModbusAddress, value: Any, word_order: str = "big") -> list[int] | list[bool]:
    """The registers (or bits) that hold ``value`` at ``addr``; ``value`` is already the right type.

    Encoding only: the tag layer converted and range-checked the value. What cannot be packed at all
    raises ``struct.error`` / OverflowError / ValueError / TypeError (an Int16 of 70000, a Float32 of
    1e39), which the driver reports as TagRangeError before anything is sent.
    """
    if addr.is_bit:
        return [bool(value)]
    number: float | int = float(value) if addr.data_type.is_float else int(value)
    raw = _STRUCTS[addr.data_type].pack(number)
    words = list(struct.unpack(f">{addr.width}H", raw))
    if word_order == "little":
        words.reverse()
    return words


def decode(addr: ModbusAddress, words: list[int] | list[bool], word_order: str = "big") -> Any:
    """The value held by ``words`` (exactly ``addr.width`` registers, or one bit)."""
    if addr.is_bit:
        return bool(words[0])
    return decode_at(addr, registers_to_bytes(words[: addr.width]), 0, word_order)  # type: ignore[arg-type]


def registers_to_bytes(words: list[int]) -> bytes:
    """A block of registers as the big-endian bytes they travelled as."""
    return struct.pack(f">{len(words)}H", *words)


def decode_at(addr: ModbusAddress, raw: bytes, index: int, word_order: str = "big") -> Any:
    """The value of ``addr`` whose first register is register ``index`` of the block ``raw``."""
    codec = _STRUCTS[addr.data_type]
    if word_order == "little" and addr.width > 1:
        chunk = raw[2 * index : 2 * (index + addr.width)]
        swapped = b"".join(chunk[i : i + 2] for i in range(len(chunk) - 2, -1, -2))
        return codec.unpack(swapped)[0]
    return codec.unpack_from(raw, 2 * index)[0]
