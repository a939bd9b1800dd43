"""What the ``exchange tags`` commands share: the tag service they open, and how values look.

Values are shown as JSON literals (``true``, ``42``, ``12.5``, ``"text"``: a string is quoted, so an
empty one or one with spaces is visible); a Float32 tag's value with the 7 significant digits the
type holds (``12.3``, not ``12.300000190734863``); a value that is not Good as ``-``. Every text
line goes through :func:`~exchange._cli.render.printable`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from exchange._cli.common import Context
from exchange._cli.render import printable
from exchange._tags.results import PathReading
from exchange._tags.service import TagService
from exchange._tags.table import TagDef
from exchange._timefmt import iso_utc
from exchange._values import DataType, QualifiedValue

__all__ = ["open_service", "reading_dict", "reading_line", "type_name", "value_text"]


@contextmanager
def open_service(obj: Context) -> Iterator[TagService]:
    """The config's tag service (its devices and tags checked first), closed at the end."""
    service = TagService.from_config(obj.config)
    try:
        yield service
    finally:
        service.close()


def type_name(tag: TagDef) -> str:
    """The tag's data type as the config writes it (``Int16[5]``), or ``(device)`` when only the
    device knows it."""
    return tag.type_name or "(device)"


def value_text(tag: TagDef, value: Any) -> str:
    """``value`` of ``tag`` as the terminal shows it (see the module doc)."""
    if value is None:
        return "-"
    if isinstance(value, float) and tag.data_type is DataType.FLOAT32:
        return format(value, ".7g")
    if isinstance(value, list) and tag.data_type is DataType.FLOAT32:
        return "[" + ", ".join(value_text(tag, item) for item in value) + "]"
    try:
        return printable(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):  # a device type JSON has no form for (a date, bytes)
        return printable(repr(value))


def reading_dict(tag: TagDef, reading: QualifiedValue) -> PathReading:
    """One reading as ``--json`` prints it: ``path``, ``value``, ``quality``, ``timestamp`` (and
    ``error`` when the quality says something went wrong)."""
    return {"path": tag.path, **reading.to_dict()}


def reading_line(tag: TagDef, reading: QualifiedValue, width: int = 0) -> str:
    """``PATH  VALUE  QUALITY  TIMESTAMP  [error]``, the path padded to ``width``."""
    line = (f"{printable(tag.path).ljust(width)}  {value_text(tag, reading.value):<12} "
            f"{reading.quality.value:<18} {iso_utc(reading.timestamp)}")
    if reading.error:
        line += f"  {printable(reading.error)}"
    return line
