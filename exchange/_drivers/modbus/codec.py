"""The register codec: values to and from Modbus registers, in every byte and word order.

Registers travel as 16-bit words, big-endian on the wire. How a device lays a value over them is
two independent choices, each ``"big"`` or ``"little"`` (:class:`Layout`):

- ``byte_order``: ``"little"`` swaps the two bytes of every register (``BADC`` for a Float32);
- ``word_order``: ``"little"`` puts the least significant register first (``CDAB``); it only
  matters for 32- and 64-bit values.

The four layouts of the Float32 bytes ``A B C D`` (``A`` the most significant) are then
``ABCD`` (big, big), ``CDAB`` (byte big, word little), ``BADC`` (byte little, word big) and
``DCBA`` (little, little). Both swaps are their own inverse and commute, so one function
(:func:`_arrange`) turns the value's bytes into the wire's and back.

Strings (``HRS10:8``) hold two characters per register, the first character in the high byte
(``byte_order = "little"``: in the low byte), padded with NUL; a read stops at the first NUL.
``word_order`` has no meaning for them. Written strings must be ASCII; read bytes are decoded as
Latin-1, so a device's odd byte shows instead of failing the read.

A bit of a register (``HR10.3``) is numbered in the register's value, 0 the least significant;
with ``byte_order = "little"`` that value is the register with its bytes swapped, so bit 0 is the
wire register's bit 8 (:func:`wire_bit`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Protocol

from exchange._values import DataType

ORDERS = ("big", "little")

# struct format character and register count of each numeric register data type
CODEC: dict[DataType, tuple[str, int]] = {
    DataType.INT16: ("h", 1),
    DataType.UINT16: ("H", 1),
    DataType.INT32: ("i", 2),
    DataType.UINT32: ("I", 2),
    DataType.INT64: ("q", 4),
    DataType.UINT64: ("Q", 4),
    DataType.FLOAT32: ("f", 2),
    DataType.FLOAT64: ("d", 4),
}
_STRUCTS = {data_type: struct.Struct(">" + fmt) for data_type, (fmt, _) in CODEC.items()}


@dataclass(frozen=True)
class Layout:
    """How a value lies over its registers (module doc); the default is Modbus's own big-endian."""

    byte_order: str = "big"
    word_order: str = "big"


BIG_ENDIAN = Layout()


class ModbusAddress(Protocol):
    """What the codec needs of an address (:class:`exchange._drivers.modbus.address.ModbusAddress`)."""

    @property
    def text(self) -> str: ...

    @property
    def data_type(self) -> DataType: ...

    @property
    def width(self) -> int: ...

    @property
    def bit(self) -> int | None: ...

    @property
    def is_bit(self) -> bool: ...


def _arrange(raw: bytes, layout: Layout, words: bool = True) -> bytes:
    """``raw`` (the value's bytes, most significant first, or the wire's) in the other order."""
    out = raw
    if layout.byte_order == "little":
        out = b"".join(out[i + 1 : i + 2] + out[i : i + 1] for i in range(0, len(out), 2))
    if words and layout.word_order == "little" and len(out) > 2:
        out = b"".join(out[i : i + 2] for i in range(len(out) - 2, -1, -2))
    return out


def wire_bit(bit: int, layout: Layout) -> int:
    """The bit of the wire register that is bit ``bit`` of the register's value (module doc)."""
    return bit if layout.byte_order == "big" else (bit + 8) % 16


def plain_struct(addr: ModbusAddress, layout: Layout) -> struct.Struct | None:
    """The struct that reads ``addr``'s value straight from the wire bytes, where no byte or word
    needs moving (a number in Modbus's own order); None for bits, strings and swapped layouts."""
    if addr.is_bit or addr.bit is not None or addr.data_type not in _STRUCTS:
        return None
    if layout.byte_order == "big" and (layout.word_order == "big" or addr.width == 1):
        return _STRUCTS[addr.data_type]
    return None


def registers_to_bytes(words: list[int]) -> bytes:
    """A block of registers as the big-endian bytes they travelled as."""
    return struct.pack(f">{len(words)}H", *words)


def encode_value(addr: ModbusAddress, value: Any, layout: Layout = BIG_ENDIAN) -> list[int] | list[bool]:
    """The registers (or the one bit) that hold ``value`` at ``addr``; ``value`` is already converted.

    A bit of a register has no registers of its own (it is written by mask or read-modify-write):
    ValueError. What cannot be packed at all raises ``struct.error`` / OverflowError / ValueError /
    TypeError / UnicodeEncodeError (an Int16 of 70000, a string too long or not ASCII), which the
    driver reports before anything is sent.
    """
    if addr.is_bit:
        return [bool(value)]
    if addr.bit is not None:
        raise ValueError(f"{addr.text} is a bit of a register: it is written by mask, not as registers")
    if addr.data_type is DataType.STRING:
        raw = str(value).encode("ascii")
        size = 2 * addr.width
        if len(raw) > size:
            raise ValueError(f"{len(raw)} characters do not fit {addr.width} registers ({size} characters)")
        wire = _arrange(raw.ljust(size, b"\x00"), layout, words=False)
        return list(struct.unpack(f">{addr.width}H", wire))
    number: float | int = float(value) if addr.data_type.is_float else int(value)
    wire = _arrange(_STRUCTS[addr.data_type].pack(number), layout)
    return list(struct.unpack(f">{addr.width}H", wire))


def decode_value_at(addr: ModbusAddress, raw: bytes, index: int, layout: Layout = BIG_ENDIAN) -> Any:
    """The value of ``addr`` whose first register is register ``index`` of the block ``raw``."""
    if addr.bit is not None:
        (word,) = struct.unpack_from(">H", raw, 2 * index)
        return bool((word >> wire_bit(addr.bit, layout)) & 1)
    if layout.byte_order == "big" and (layout.word_order == "big" or addr.width == 1):
        if addr.data_type is not DataType.STRING:  # the common case: no copy of the block
            return _STRUCTS[addr.data_type].unpack_from(raw, 2 * index)[0]
    chunk = raw[2 * index : 2 * (index + addr.width)]
    if addr.data_type is DataType.STRING:
        text = _arrange(chunk, layout, words=False)
        return text.split(b"\x00", 1)[0].decode("latin-1")
    return _STRUCTS[addr.data_type].unpack(_arrange(chunk, layout))[0]


def decode_value(addr: ModbusAddress, words: list[int] | list[bool], layout: Layout = BIG_ENDIAN) -> Any:
    """The value held by ``words`` (exactly ``addr.width`` registers, or one bit)."""
    if addr.is_bit:
        return bool(words[0])
    return decode_value_at(addr, registers_to_bytes(words[: addr.width]), 0, layout)  # type: ignore[arg-type]
