"""Logix symbolic addresses, and the tag definitions pycomm3 needs when it cannot upload them.

Address grammar (what a tag's ``address`` may say for an ``enip`` device)::

    address  := [ "Program:" NAME "." ] member ( "." member )*
    member   := NAME [ "[" INDEX ( "," INDEX ){0,2} "]" ]
    NAME     := letter or "_", then letters, digits, "_" (at most 40 characters)

Examples: ``Valve_Cmd``, ``Program:MainProgram.Step``, ``Arr[3]``, ``Motor.Speed``, ``Recipes[2].Temp``.
Bit-of-word addresses (``Flags.3``) are refused: their type and write semantics (read-modify-write)
need the controller's tag list, and a BOOL tag says the same thing plainly.

pycomm3 keeps its knowledge of the controller in ``LogixDriver._tags``: one entry per base tag (the
first name, with its program prefix, without index), each a dict with ``tag_type`` ``atomic`` or
``struct``. When the controller cannot list its tags (``upload_tags = false``: cpppo, some gateways),
:class:`TagDefinitions` builds those entries from the data types the config gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pycomm3.cip import DataTypes

from exchange._values import DataType
from exchange.errors import TagPathError, TagTypeError

_NAME_MAX = 40
_MEMBER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[([0-9]+(?:,[0-9]+){0,2})\])?")
_PROGRAM = "Program:"

# Logix atomic type for each Exchange data type; STRING is the CIP STRING (what cpppo serves).
LOGIX_TYPES: dict[DataType, str] = {
    DataType.BOOLEAN: "BOOL",
    DataType.INT8: "SINT",
    DataType.UINT8: "USINT",
    DataType.INT16: "INT",
    DataType.UINT16: "UINT",
    DataType.INT32: "DINT",
    DataType.UINT32: "UDINT",
    DataType.INT64: "LINT",
    DataType.UINT64: "ULINT",
    DataType.FLOAT32: "REAL",
    DataType.FLOAT64: "LREAL",
    DataType.STRING: "STRING",
}


@dataclass(frozen=True)
class Member:
    name: str
    indices: tuple[int, ...] = ()


@dataclass(frozen=True)
class LogixAddress:
    """A validated symbolic address, split the way pycomm3 resolves it."""

    text: str
    program: str | None
    members: tuple[Member, ...]

    @property
    def base_key(self) -> str:
        """The key of the base tag in pycomm3's tag table: ``Program:P.Tag`` or ``Tag``, no index."""
        first = self.members[0].name
        return f"{_PROGRAM}{self.program}.{first}" if self.program else first

    @property
    def member_names(self) -> tuple[str, ...]:
        """Structure members below the base tag, without indices."""
        return tuple(m.name for m in self.members[1:])


def _malformed(address: str, reason: str) -> TagPathError:
    return TagPathError(f"malformed Logix address {address!r}: {reason}")


@lru_cache(maxsize=4096)
def parse_logix_address(address: str) -> LogixAddress:
    """Validate ``address`` (grammar in the module docstring); raise TagPathError naming it if malformed."""
    if not isinstance(address, str) or not address:
        raise _malformed(str(address), "empty")
    if address != address.strip() or any(c.isspace() for c in address):
        raise _malformed(address, "contains white space")
    program: str | None = None
    rest = address
    if rest.lower().startswith(_PROGRAM.lower()):
        if not rest.startswith(_PROGRAM):
            raise _malformed(address, f"the program scope prefix is spelled {_PROGRAM!r}")
        head, dot, rest = rest[len(_PROGRAM):].partition(".")
        if not dot or not rest:
            raise _malformed(address, "a program-scoped address needs a tag after the program name")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", head) or len(head) > _NAME_MAX:
            raise _malformed(address, f"invalid program name {head!r}")
        program = head
    members: list[Member] = []
    for part in rest.split("."):
        if not part:
            raise _malformed(address, "empty name between dots")
        if part.isdigit():
            raise _malformed(
                address, "bit-of-word addresses (Tag.3) are not supported; address a BOOL tag instead"
            )
        match = _MEMBER.fullmatch(part)
        if match is None:
            raise _malformed(address, f"invalid name {part!r} (letters, digits, _; optional [index])")
        name, indices = match.group(1), match.group(2)
        if len(name) > _NAME_MAX:
            raise _malformed(address, f"name {name!r} is longer than {_NAME_MAX} characters")
        members.append(Member(name, tuple(int(i) for i in indices.split(",")) if indices else ()))
    return LogixAddress(address, program, tuple(members))


def _atomic(name: str, logix_type: str) -> dict[str, Any]:
    entry = _entry(name, "atomic", logix_type, logix_type)
    entry["type_class"] = DataTypes.get(logix_type)  # type: ignore[no-untyped-call]
    return entry


def _struct(name: str) -> dict[str, Any]:
    # Only the members the config names are known; pycomm3 resolves a member's type through
    # data_type.internal_tags and never needs the rest of the structure to read or write one member.
    type_name = f"{name}:config"
    return _entry(name, "struct", {"name": type_name, "internal_tags": {}, "attributes": []}, type_name)


def _entry(name: str, tag_type: str, data_type: str | dict[str, Any], type_name: str) -> dict[str, Any]:
    """One pycomm3 tag-list entry: a scalar (``dim`` 0), read/write, not an alias."""
    return {
        "tag_name": name,
        "tag_type": tag_type,
        "dim": 0,
        "dimensions": [0, 0, 0],
        "alias": False,
        "external_access": "Read/Write",
        "data_type": data_type,
        "data_type_name": type_name,
    }


class TagDefinitions:
    """pycomm3 tag table entries built from config types, for controllers that cannot list tags.

    An array element (``Arr[3]``) is declared as an atomic tag of the element's type: pycomm3 then
    requests exactly one element at the index the address carries, which is all Exchange asks for.
    """

    def __init__(self) -> None:
        self.table: dict[str, dict[str, Any]] = {}  # handed to pycomm3 as LogixDriver._tags
        self._declared: dict[str, str] = {}  # address -> Logix type, to make re-declaring cheap

    def declare(self, address: LogixAddress, data_type: DataType | None) -> None:
        """Add the definition ``address`` needs; TagTypeError if no type or one conflicting with another."""
        if data_type is None:
            raise TagTypeError(
                f"Logix address {address.text!r} has no type; with upload_tags = false every enip tag "
                "needs `type` in the config"
            )
        logix_type = LOGIX_TYPES[data_type]
        if self._declared.get(address.text) == logix_type:
            return
        names = address.member_names
        if not names:
            self._put(self.table, address.base_key, logix_type, address)
        else:
            node = self._node(self.table, address.base_key, address)
            for member in names[:-1]:
                node = self._node(node["data_type"]["internal_tags"], member, address)
            self._put(node["data_type"]["internal_tags"], names[-1], logix_type, address)
        self._declared[address.text] = logix_type

    @staticmethod
    def _node(table: dict[str, dict[str, Any]], key: str, address: LogixAddress) -> dict[str, Any]:
        entry = table.setdefault(key, _struct(key))
        if entry["tag_type"] != "struct":
            raise TagTypeError(
                f"Logix address {address.text!r} uses {key!r} as a structure, but another tag declares "
                f"it as {entry['data_type']}"
            )
        return entry

    @staticmethod
    def _put(table: dict[str, dict[str, Any]], key: str, logix_type: str, address: LogixAddress) -> None:
        entry = table.get(key)
        if entry is not None and (entry["tag_type"] != "atomic" or entry["data_type"] != logix_type):
            known = entry["data_type"] if entry["tag_type"] == "atomic" else "a structure"
            raise TagTypeError(
                f"Logix address {address.text!r} declares {key!r} as {logix_type}, but another tag "
                f"declares it as {known}"
            )
        table[key] = _atomic(key, logix_type)
