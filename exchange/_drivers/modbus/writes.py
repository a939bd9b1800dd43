"""A Modbus write call as requests: register and coil blocks, and bits of registers.

:func:`plan` turns the encoded items of one ``write`` call into :class:`Operation` s in the caller's
order: a :class:`~exchange._drivers.modbus.plan.WriteBlock` (FC5/6/15/16) for values that own their
registers or coils, merged where strictly adjacent, and a :class:`BitWrite` per register for the
bits of registers (``HR10.3``), every bit of one register in one request. Before that it refuses a
call that would write one register or coil twice (two tags over the same address, a whole register
beside one of its bits): each recorded write goes out once, and nothing is sent.

A bit goes out as one mask write (FC22: the device changes only the masked bits, atomically). A
device without it (``mask_write = false``, or it answered ILLEGAL FUNCTION to one) can only be
written by reading the register and writing it back whole (FC3 + FC6): another master's change to
the register's other bits between the two is lost. That is refused unless every tag in the request
says ``rmw = true``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from exchange._drivers.modbus.address import ModbusAddress
from exchange._drivers.modbus.codec import Layout, encode_value, wire_bit
from exchange._drivers.modbus.plan import WriteBlock, plan_writes
from exchange._values import DataType
from exchange.errors import TagError, TagRangeError, TagTypeError

ILLEGAL_FUNCTION = 1


@dataclass
class BitWrite:
    """Bits of one holding register: ``set_mask`` bits become 1, ``clear_mask`` bits 0."""

    offset: int
    text: str  # the register, as messages name it (HR10)
    set_mask: int = 0
    clear_mask: int = 0
    rmw: bool = True  # every member allows a read-modify-write
    members: list[int] = field(default_factory=list)

    @property
    def and_mask(self) -> int:
        """FC22's AND mask: the bits kept as they are."""
        return ~(self.set_mask | self.clear_mask) & 0xFFFF

    def apply(self, word: int) -> int:
        """The register after the write, from its value ``word`` (the read-modify-write)."""
        return (word & self.and_mask) | self.set_mask


Operation = WriteBlock | BitWrite


@dataclass(frozen=True)
class Item:
    """One write of the call: the address, its encoded registers/bit, the tag's layout and rmw."""

    path: str
    addr: ModbusAddress
    values: list[int] | list[bool]
    layout: Layout
    rmw: bool


def encode_checked(addr: ModbusAddress, layout: Layout, value: Any, where: str) -> list[int] | list[bool]:
    """``value``'s registers (a bit: ``[value]``), or TagTypeError/TagRangeError starting with ``where``.

    The value is already converted to the tag's type; what can still fail is what the registers
    cannot hold (a string too long for them, or not ASCII; a number the codec cannot pack).
    """
    if addr.bit is not None:
        return [bool(value)]
    try:
        return encode_value(addr, value, layout)
    except UnicodeEncodeError as exc:
        raise TagTypeError(f"{where}: {value!r} is not ASCII text ({addr.text} holds {2 * addr.width} ASCII "
                           "characters); nothing was sent") from exc
    except (struct.error, OverflowError, ValueError, TypeError, ArithmeticError) as exc:
        detail = f": {exc}" if addr.data_type is DataType.STRING else ""
        raise TagRangeError(f"{where}: {value!r} does not fit {addr.text} ({addr.data_type.value}){detail}; "
                            "nothing was sent") from exc


def plan(items: Sequence[Item], where: str) -> list[Operation]:
    """The requests for ``items``, in their order (module doc); TagError when two overlap."""
    _refuse_overlaps(items, where)
    operations: list[Operation] = []
    bits: dict[int, BitWrite] = {}
    run: list[tuple[ModbusAddress, list[int] | list[bool]]] = []
    run_members: list[int] = []

    def flush() -> None:
        for block in plan_writes(run):
            block.members = [run_members[m] for m in block.members]
            operations.append(block)
        run.clear()
        run_members.clear()

    for index, item in enumerate(items):
        addr = item.addr
        if addr.bit is None:
            run.append((addr, item.values))
            run_members.append(index)
            continue
        flush()
        op = bits.get(addr.offset)
        if op is None:
            op = bits[addr.offset] = BitWrite(addr.offset, f"{addr.table}{addr.number}")
            operations.append(op)
        mask = 1 << wire_bit(addr.bit, item.layout)
        if item.values[0]:
            op.set_mask |= mask
        else:
            op.clear_mask |= mask
        op.rmw = op.rmw and item.rmw
        op.members.append(index)
    flush()
    return operations


def _refuse_overlaps(items: Sequence[Item], where: str) -> None:
    owners: dict[tuple[str, int], tuple[str, bool]] = {}  # (table, offset) -> (tag path, whole register)
    bits_taken: dict[tuple[int, int], str] = {}
    for item in items:
        addr = item.addr
        if addr.bit is not None:
            key = (addr.offset, wire_bit(addr.bit, item.layout))
            other = bits_taken.get(key)
            owner = owners.get((addr.table, addr.offset))
            if other is None and owner is not None and owner[1]:
                other = owner[0]
            if other is not None:
                raise _overlap(where, other, item, addr.text)
            bits_taken[key] = item.path
            owners.setdefault((addr.table, addr.offset), (item.path, False))
            continue
        for offset in range(addr.offset, addr.end):
            owner = owners.get((addr.table, offset))
            if owner is not None:
                raise _overlap(where, owner[0], item, f"{addr.table}{offset + addr.number - addr.offset}")
            owners[(addr.table, offset)] = (item.path, True)


def _overlap(where: str, first: str, item: Item, at: str) -> TagError:
    return TagError(f"{where}: tags {first!r} and {item.path!r} both write {at} in one call; each value is "
                    "written once, so write them in separate calls; nothing was sent")


def rmw_refusal(where: str, op: BitWrite, paths: Sequence[str], why: str) -> str:
    """Why a bit write that would need a read-modify-write the tags do not allow is refused."""
    return (
        f"{where}: the write of {', '.join(paths)} ({op.text}) needs a read-modify-write of the whole register: "
        f"{why}. A change the device or another master makes to the register's other bits between the read "
        "and the write would be lost; set rmw = true on the tag to allow it"
    )
