"""Bits of a register beside the register itself: a status word and its bits, served as one register.

A Modbus tag ``HR10.3`` is bit 3 of holding register 10 (0 the least significant of the register's
value). The simulator serves it as a point of its own (a Boolean), and the register is one memory on
the server, so clients always read a word and its bits consistently. The plant keeps one value per
point, though: when a tag names the whole register too (a 16-bit word, ``HRUS10`` or ``HR10``), the
word and its bits are one *register group* and a change of one is a change of the others
(:class:`RegisterGroups`): setting the bit changes that bit of the word, setting the word changes
the bits. Without a word tag the register's bits are independent points (the server changes only
that bit of its register).

Only a 16-bit word (Int16 or UInt16) shares its register with bits: a wider value (a Float32 over
two registers, a string) with a bit tag inside it is refused by :mod:`simulators.spec` as an
overlap, naming both tags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from exchange._values import DataType

WORD_TYPES = (DataType.INT16, DataType.UINT16)
WORD_TYPE_NAMES = " or ".join(t.value for t in WORD_TYPES)


def bit_of(word: int, bit: int) -> bool:
    """Bit ``bit`` (0 the least significant) of a 16-bit ``word`` (an Int16 as its two's complement)."""
    return bool(((int(word) & 0xFFFF) >> bit) & 1)


def with_bit(word: int, bit: int, on: bool, data_type: DataType) -> int:
    """``word`` with bit ``bit`` set to ``on``, as a value of ``data_type`` (Int16 or UInt16)."""
    raw = int(word) & 0xFFFF
    raw = raw | (1 << bit) if on else raw & ~(1 << bit) & 0xFFFF
    return raw - 0x10000 if data_type is DataType.INT16 and raw & 0x8000 else raw


class RegisterGroups:
    """The word and bit points that share one register, by point id (:mod:`simulators.spec`'s ids).

    ``word_of``: bit point -> the word point of its register. ``bits``: point id -> its bit number,
    for every bit point (with or without a word).
    """

    def __init__(self, word_of: Mapping[str, str], bits: Mapping[str, int]) -> None:
        self.word_of = dict(word_of)
        self.bit = dict(bits)
        self.bits_of: dict[str, list[str]] = {}
        for bit_id, word_id in self.word_of.items():
            self.bits_of.setdefault(word_id, []).append(bit_id)

    def word(self, point_id: str) -> str | None:
        """The word of ``point_id``'s register group (the point itself for a word with bits), or None."""
        if point_id in self.bits_of:
            return point_id
        return self.word_of.get(point_id)

    def group(self, point_id: str) -> list[str]:
        """Every point of ``point_id``'s register group, the word first; ``[point_id]`` alone without one."""
        word = self.word(point_id)
        return [point_id] if word is None else [word, *self.bits_of[word]]

    def spread(self, point_id: str, values: Mapping[str, Any], word_type: DataType) -> dict[str, Any]:
        """The values of ``point_id``'s partners after it took ``values[point_id]``: a bit changes
        its word, a word its bits. Only the partners whose value differs are returned."""
        word = self.word(point_id)
        if word is None:
            return {}
        changed: dict[str, Any] = {}
        word_value = values[word]
        if point_id != word:
            word_value = with_bit(word_value, self.bit[point_id], bool(values[point_id]), word_type)
            if word_value != values[word]:
                changed[word] = word_value
        for bit_id in self.bits_of[word]:
            if bit_id != point_id and bit_of(word_value, self.bit[bit_id]) != values[bit_id]:
                changed[bit_id] = bit_of(word_value, self.bit[bit_id])
        return changed


def reconcile_initials(points: dict[str, Any], groups: RegisterGroups, followers: Iterable[str]) -> list[str]:
    """Make each register group start consistent, in place on ``points`` (point id -> PointSpec).

    A word's ``initial`` (given in ``[simulation.tags]``) gives its bits theirs; a bit's given initial,
    or the one its ``follows`` gave it, sets that bit of a word that has none given. A bit whose given
    initial contradicts its word's is an error (returned, naming both tags).
    """
    errors: list[str] = []
    following = set(followers)
    for word_id, bit_ids in groups.bits_of.items():
        word = points[word_id]
        value = int(word.initial)
        kept: list[str] = []  # bits whose given initial contradicts the word's: kept to be named again
        for bit_id in bit_ids:
            bit = points[bit_id]
            number = groups.bit[bit_id]
            if word.initial_given:
                if bit.initial_given and bool(bit.initial) != bit_of(value, number):
                    errors.append(f"tag {bit.paths[0]!r} (device {bit.device!r}, address {bit.address!r}): starts "
                                  f"at {bit.initial!r}, but it is bit {number} of tag {word.paths[0]!r}, which "
                                  f"starts at {word.initial!r}")
                    kept.append(bit_id)
                continue
            if bit.initial_given or bit_id in following:
                value = with_bit(value, number, bool(bit.initial), word.data_type)
        points[word_id] = replace(word, initial=value)
        for bit_id in bit_ids:
            if bit_id not in kept:
                points[bit_id] = replace(points[bit_id], initial=bit_of(value, groups.bit[bit_id]))
    return errors
