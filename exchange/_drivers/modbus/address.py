"""Ignition-style Modbus addresses, shared by the driver and the simulator.

An address is a table, an optional type and a number: ``C1`` (coil), ``DI1`` (discrete input),
``IR1`` / ``HR1`` (input / holding register, Int16), and for registers a type between table and
number: ``US`` UInt16, ``I`` Int32, ``UI`` UInt32, ``I_64`` Int64, ``UI_64`` UInt64, ``F`` Float32,
``D`` Float64. ``HRI641`` is the Int32 at 641, as in Ignition: the 64-bit types need the ``_``.
Two more shapes for registers:

- a bit of a register: ``HR10.3`` is bit 3 (0 the least significant) of holding register 10, a
  Boolean; ``IR10.15`` likewise, read-only;
- a string over N registers: ``HRS10:8`` is a String in the 8 registers HR10..HR17 (16 characters,
  two per register); N is 1 to 123, so a string is always written in one request.

Numbers are 1-based (``HR1`` is protocol address 0) unless the device is ``zero_based``. How values
lie over their registers (byte and word order) is the codec's: :mod:`exchange._drivers.modbus.codec`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from exchange._drivers.modbus.codec import (
    CODEC,
    ORDERS,
    Layout,
    decode_value,
    decode_value_at,
    encode_value,
    registers_to_bytes,
)
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
    "S": DataType.STRING,
}
_ADDRESS = re.compile(
    r"^(?P<table>C|DI|IR|HR)(?P<suffix>US|UI_64|UI|I_64|I|F|D|S)?(?P<number>\d+)"
    r"(?:\.(?P<bit>\d+)|:(?P<length>\d+))?$",
    re.IGNORECASE,
)
_HELP = (
    "expected C, DI, IR or HR, an optional register type (US, I, UI, I_64, UI_64, F, D) and a number, "
    "e.g. HRF1; a bit of a register as HR10.3; a string over N registers as HRS10:8"
)
MAX_STRING_REGISTERS = 123  # the most one write request (FC16) carries
MAX_ADDRESS = 65535
WORD_ORDERS = ORDERS  # "big", "little": also the byte orders

__all__ = [
    "BIT_TABLES", "COIL", "DISCRETE_INPUT", "HOLDING_REGISTER", "INPUT_REGISTER", "MAX_ADDRESS", "TABLE_NAMES",
    "WORD_ORDERS", "WRITABLE_TABLES", "Layout", "ModbusAddress", "decode", "decode_at", "encode", "parse_address",
    "parse_modbus_address", "registers_to_bytes", "type_from_name",
]


@dataclass(frozen=True)
class ModbusAddress:
    """One parsed address: ``offset`` is the protocol (0-based) address of its first register/bit."""

    text: str
    table: str
    data_type: DataType
    number: int
    offset: int
    width: int  # registers (HR/IR) or bits (C/DI) the value occupies
    bit: int | None = None  # a bit of the register at ``offset`` (``HR10.3``): 0..15

    @property
    def is_bit(self) -> bool:
        """A coil or discrete input (a bit table); a bit of a register is :attr:`bit`."""
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
    bit_text, length_text = match.group("bit"), match.group("length")
    bit: int | None = None
    if table in BIT_TABLES:
        if suffix:
            raise ConfigError(f"modbus address {address!r}: a {TABLE_NAMES[table]} takes no type suffix")
        if bit_text is not None or length_text is not None:
            raise ConfigError(f"modbus address {address!r}: a {TABLE_NAMES[table]} is one bit; it takes no "
                              "bit number or length")
        effective, width = DataType.BOOLEAN, 1
    elif bit_text is not None:
        if suffix:
            raise ConfigError(f"modbus address {address!r}: a bit of a register takes no type (write "
                              f"{table}{number}.{bit_text})")
        bit = int(bit_text)
        if bit > 15:
            raise ConfigError(f"modbus address {address!r}: a register has bits 0 to 15, not {bit}")
        effective, width = DataType.BOOLEAN, 1
    elif suffix == "S":
        if length_text is None:
            raise ConfigError(f"modbus address {address!r}: a string needs its length in registers, "
                              f"e.g. {table}S{number}:8")
        width = int(length_text)
        if not 1 <= width <= MAX_STRING_REGISTERS:
            raise ConfigError(f"modbus address {address!r}: a string spans 1 to {MAX_STRING_REGISTERS} "
                              f"registers, not {width}")
        effective = DataType.STRING
    elif length_text is not None:
        raise ConfigError(f"modbus address {address!r}: only a string (HRS/IRS) takes a length")
    else:
        effective = _TYPE_SUFFIXES[suffix]
        if data_type is not None and data_type is not effective and not suffix and data_type in CODEC:
            effective = data_type  # a bare HR/IR takes the configured type
        width = CODEC[effective][1]
    if data_type is not None and data_type is not effective:
        if effective is DataType.BOOLEAN:
            what = f"a {TABLE_NAMES[table]}" if table in BIT_TABLES else "a bit of a register"
            raise ConfigError(f"modbus address {address!r}: {what} is Boolean, not {data_type.value}")
        hint = "" if suffix else " (registers hold Int/UInt/Float types; a string is HRS<n>:<registers>)"
        raise ConfigError(
            f"modbus address {address!r} is {effective.value} but the tag's type is {data_type.value}{hint}"
        )
    offset = number if zero_based else number - 1
    if offset < 0:
        raise ConfigError(f"modbus address {address!r}: numbers start at 1 (set zero_based = true for 0)")
    if offset + width - 1 > MAX_ADDRESS:
        raise ConfigError(f"modbus address {address!r} is beyond the last Modbus address {MAX_ADDRESS}")
    return ModbusAddress(text, table, effective, number, offset, width, bit)


def parse_address(address: str, data_type: DataType | None) -> DataType | None:
    """Validate ``address`` without knowing the device and return its effective data type.

    Whether ``0`` is a valid number depends on the device's ``zero_based`` setting, which
    :meth:`exchange._drivers.modbus.MODBUS.parse_device_address` checks; here it is accepted.
    """
    return parse_modbus_address(address, data_type, zero_based=True).data_type


def type_from_name(name: str) -> DataType:
    """A data type name as written in a config or a SimPoint (``Float32``, ``REAL``, ...)."""
    return parse_data_type(name)


def encode(addr: ModbusAddress, value: Any, word_order: str = "big", byte_order: str = "big") -> list[int] | list[bool]:
    """The registers (or the one coil bit) that hold ``value`` at ``addr``, in the given orders.

    See :func:`exchange._drivers.modbus.codec.encode_value` (what it refuses, and why).
    """
    return encode_value(addr, value, Layout(byte_order, word_order))


def decode(addr: ModbusAddress, words: list[int] | list[bool], word_order: str = "big", byte_order: str = "big") -> Any:
    """The value held by ``words`` (exactly ``addr.width`` registers, or one bit)."""
    return decode_value(addr, words, Layout(byte_order, word_order))


def decode_at(addr: ModbusAddress, raw: bytes, index: int, word_order: str = "big", byte_order: str = "big") -> Any:
    """The value of ``addr`` whose first register is register ``index`` of the block ``raw``."""
    return decode_value_at(addr, raw, index, Layout(byte_order, word_order))
