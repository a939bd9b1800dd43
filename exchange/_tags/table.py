"""The tag table: every ``[tags."[provider]Path"]`` of the config, validated once into a TagDef.

Validation at load: the path (syntax, no two paths differing only by case), the device (it must be
configured), the data type name, and the address, which the device's driver parses
(:func:`exchange._drivers.registry.validate_address`), so a typo in ``HRF1`` is a startup error and not a
failed write at 3 a.m. Also refused here, where the address's protocol and type are known:
``access = "rw"`` on what the protocol cannot write (Modbus ``IR``/``DI``), and ``min``/``max`` on a
tag whose type has no order (``String``, ``Boolean``), which no write would ever be held to. The
keys' own values (``access``, ``min <= max``, ``on_doubt``, ...) are checked once, by
:mod:`exchange._config`; the device is looked up here too, as a :class:`Config` built in code never
went through that check.

Validation of a write: :meth:`TagDef.check_writable` (``access``, and what the protocol can write) and
:meth:`TagDef.convert` (the value for the tag's type, ``bool_numbers``, ``min``/``max``) are the only
checks a value gets before it is sent; the drivers encode what they are given.

An array tag is ``type = "Float32[]"`` (the node decides its length) or ``type = "Int16[5]"`` (a
fixed length, as a PLC's arrays have): a write of a list of another length is refused here, naming
the tag, both lengths, before anything is sent. (A node that declares its own length in its
ArrayDimensions is held to it by the OPC UA driver, also before sending.)

``on_doubt`` says what a write whose answer was lost does (see :mod:`exchange._tags.delivery`):
``"readback"`` reads the tag and sends again only if it does not hold the value; ``"fail"`` never
sends again (command and pulse bits). Unset, a boolean value is treated as ``"fail"`` (a command bit
pulsed twice is a second command) and any other value as ``"readback"``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from exchange._arguments import shown
from exchange._config import Config, TagConfig
from exchange._drivers import registry
from exchange._drivers.base import Point
from exchange._tags.convert import check_bounds
from exchange._tags.paths import parse_tag_path
from exchange._values import DataType, parse_data_type
from exchange._values.convert import coerce_value
from exchange.errors import (
    ConfigError,
    ReadOnlyTag,
    TagError,
    TagRangeError,
    TagTypeError,
    UnknownDevice,
    UnknownTag,
)


@dataclass(frozen=True)
class TagDef:
    """One configured tag. ``data_type`` None: the device decides (OPC UA learns it on connect)."""

    path: str
    device: str
    address: str
    access: str = "rw"
    data_type: DataType | None = None
    min_value: float | None = None
    max_value: float | None = None
    writable: bool = True  # False where the protocol cannot write the address (Modbus IR/DI)
    bool_numbers: bool = False  # booleans may be written as 1/0 (and 0/1 to a Boolean)
    on_doubt: str | None = None  # "readback" | "fail"; None: by the value (see the module doc)
    array: bool = False  # ``type = "Float32[]"``: the value is a list of data_type (OPC UA arrays)
    length: int | None = None  # ``type = "Int16[5]"``: an array of exactly that many elements
    options: tuple[tuple[str, Any], ...] = ()  # the tag's protocol keys (Modbus byte_order, ...), sorted

    @cached_property
    def point(self) -> Point:
        return Point(self.path, self.address, self.data_type, self.bool_numbers, self.array, self.options)

    def doubt_policy(self, value: Any) -> str:
        """What a lost answer to a write of ``value`` does: ``"readback"`` or ``"fail"``."""
        if self.on_doubt is not None:
            return self.on_doubt
        return "fail" if isinstance(value, bool) else "readback"

    @cached_property
    def where(self) -> str:
        """How error messages name the tag: path, device and address."""
        return f"tag {self.path!r} (device {self.device!r}, address {self.address!r})"

    def check_writable(self) -> None:
        """ReadOnlyTag when the config or the protocol forbids writing this tag."""
        # config.py admits only "ro" and "rw"; anything but "rw" (a Config built in code) fails closed
        if self.access != "rw":
            raise ReadOnlyTag(f'{self.where} is read-only (access = "{self.access}"); nothing was written')
        if not self.writable:
            raise ReadOnlyTag(f"{self.where} cannot be written over its protocol; nothing was written")

    def convert(self, value: Any) -> Any:
        """``value`` converted for a write: TagTypeError / TagRangeError naming the tag.

        An array tag (``type = "Float32[]"``) takes a list, each element converted and held to
        ``min``/``max``; a scalar tag with a type refuses a list; a tag without a type takes a
        scalar or a list of scalars, and its device checks the shape against the node.
        """
        where = self.where
        if isinstance(value, (list, tuple)):
            if self.data_type is not None and not self.array:
                raise TagTypeError(f"{where} is {self.data_type.value}, one value, but got a list of {len(value)}; "
                                   f'an array tag says type = "{self.data_type.value}[]"')
            if self.length is not None and len(value) != self.length:
                raise TagRangeError(f"{where} holds {self.length} elements ({self.type_text}), got a list of "
                                    f"{len(value)}")
            return [self._convert_one(item, f"{where} element [{index}]") for index, item in enumerate(value)]
        if self.array:
            raise TagTypeError(f"{where} is an array ({self.data_type.value if self.data_type else ''}[]): write a "
                               f"list, got {shown(value)}")
        return self._convert_one(value, where)

    @property
    def type_name(self) -> str | None:
        """The tag's type as the config writes it (``Int16``, ``Float32[]``, ``Int16[5]``); None when
        only the device knows it."""
        if self.data_type is None:
            return None
        return self.data_type.value + (f"[{self.length if self.length is not None else ''}]" if self.array else "")

    @property
    def type_text(self) -> str:
        """``type = "Int16[5]"``, for messages."""
        return f'type = "{self.type_name or ""}"'

    def _convert_one(self, value: Any, where: str) -> Any:
        ranged = self.min_value is not None or self.max_value is not None
        if isinstance(value, (list, tuple, dict)):
            nested = " (arrays are one dimension)" if isinstance(value, (list, tuple)) else ""
            raise TagTypeError(f"{where}: {shown(value)} is not a boolean, number or string{nested}")
        if self.data_type is None and isinstance(value, str) and ranged:
            # Only the device knows an untyped tag's type: a text it would convert later could not be
            # held to min/max here, so a tag with a range takes numbers.
            raise TagTypeError(f"{where} has a min/max, so it takes a number, got the text {value!r}; "
                               "nothing was written")
        converted = coerce_value(value, self.data_type, where, bool_numbers=self.bool_numbers)
        check_bounds(converted, self.min_value, self.max_value, where,
                     bools_are_numbers=self.bool_numbers and self.data_type is not DataType.BOOLEAN)
        return converted


@dataclass(frozen=True)
class TagWrite:
    """One validated write: the tag, the value as sent (converted) and as the caller gave it."""

    tag: TagDef
    value: Any
    requested: Any


_RESOLVED_MAX = 100_000
MAX_ARRAY_LENGTH = 1_000_000  # a declared length past this is a typo, not a PLC's array
_ARRAY_TYPE = re.compile(r"^(?P<name>.*?)\s*\[\s*(?P<length>[^\]]*?)\s*\]$")


class TagTable:
    """The validated tags by case-insensitive path."""

    def __init__(self, tags: Mapping[str, TagDef]) -> None:
        self._by_key: dict[str, TagDef] = {}
        for tag in tags.values():
            self._by_key[parse_tag_path(tag.path).key] = tag
        # spellings already resolved (the canonical ones up front): polls skip parsing
        self._resolved: dict[str, TagDef] = {tag.path: tag for tag in self._by_key.values()}

    @classmethod
    def from_config(cls, config: Config) -> TagTable:
        """Validate every tag of ``config``; ConfigError/UnknownDevice name the tag and the problem."""
        tags: dict[str, TagDef] = {}
        seen: dict[str, str] = {}
        for path, tag_config in config.tags.items():
            tag = _tag_def(config, path, tag_config)
            key = parse_tag_path(tag.path).key
            if key in seen:
                raise ConfigError(f"tags {seen[key]!r} and {path!r} are the same path (paths ignore case)")
            seen[key] = path
            tags[path] = tag
        return cls(tags)

    def get(self, path: Any) -> TagDef:
        """The tag at ``path``: TagPathError when malformed, UnknownTag when not configured."""
        if isinstance(path, str):
            known = self._resolved.get(path)
            if known is not None:
                return known
        parsed = parse_tag_path(path)
        tag = self._by_key.get(parsed.key)
        if tag is None:
            paths = [t.path for t in self._by_key.values()]
            close = difflib.get_close_matches(str(parsed), paths, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UnknownTag(f"unknown tag {str(parsed)!r}: not in the config's [tags]{hint}")
        if len(self._resolved) < _RESOLVED_MAX:
            self._resolved[path] = tag
        return tag

    def __iter__(self) -> Iterator[TagDef]:
        return iter(self._by_key.values())

    def __len__(self) -> int:
        return len(self._by_key)

    def devices(self) -> set[str]:
        return {tag.device for tag in self._by_key.values()}


def _tag_def(config: Config, path: str, tag_config: TagConfig) -> TagDef:
    where = f"tags.{path!r}"
    try:
        canonical = str(parse_tag_path(path))
    except TagError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    device = config.devices.get(tag_config.device)
    if device is None:
        known = ", ".join(sorted(config.devices)) or "none"
        raise UnknownDevice(f"{where}: device {tag_config.device!r} is not configured (devices: {known})")
    data_type = None
    array = False
    length: int | None = None
    if tag_config.data_type is not None:
        type_name = tag_config.data_type.strip()
        shaped = _ARRAY_TYPE.match(type_name)
        if shaped is not None:
            array, type_name = True, shaped.group("name")
            length = _array_length(where, shaped.group("length"))
        try:
            data_type = parse_data_type(type_name)
        except TagError as exc:
            raise ConfigError(f"{where}.type: {exc} (an array is written as e.g. \"Float32[]\", or with its "
                              "length, \"Int16[5]\")") from exc
    low, high = tag_config.min_value, tag_config.max_value
    try:
        effective = registry.validate_address(device, tag_config.address, data_type)
    except ConfigError as exc:
        raise ConfigError(f"{where}.address: {exc}") from exc
    try:
        registry.validate_tag_options(device, tag_config.address, tag_config.options, array)
    except ConfigError as exc:  # the message names the key
        raise ConfigError(f"{where}: {exc}") from exc
    writable = registry.address_writable(device, tag_config.address)
    if tag_config.access == "rw" and not writable:
        raise ConfigError(f'{where}.access = "rw": address {tag_config.address!r} of device {device.name!r} cannot '
                          'be written over its protocol (read-only area); leave access out or write "ro"')
    known_type = effective if effective is not None else data_type
    if (low is not None or high is not None) and known_type is not None and not (
        known_type.is_integer or known_type.is_float
    ):
        key = "min" if low is not None else "max"
        raise ConfigError(f"{where}.{key}: a {known_type.value} tag has no range (min and max apply to numbers); "
                          f"remove {' and '.join(k for k, v in (('min', low), ('max', high)) if v is not None)}")
    return TagDef(
        path=canonical,
        device=device.name,
        address=tag_config.address,
        access=tag_config.access or "rw",
        data_type=known_type,
        min_value=low,
        max_value=high,
        writable=writable,
        bool_numbers=tag_config.bool_numbers,
        on_doubt=tag_config.on_doubt,
        array=array,
        length=length,
        options=tuple(sorted(tag_config.options.items())),
    )


def _array_length(where: str, text: str) -> int | None:
    """The length between an array type's brackets: none (``[]``), or 1 to :data:`MAX_ARRAY_LENGTH`."""
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_ARRAY_LENGTH:
        raise ConfigError(f"{where}.type: an array's length is a whole number from 1 to {MAX_ARRAY_LENGTH}, got "
                          f"{text!r} (\"Int16[5]\"; \"Int16[]\" when the node decides it)")
    return int(text)
