"""Compatibility: the value types moved to :mod:`exchange.values` (below both tags and drivers).

``from exchange.tags.model import DataType, Quality, QualifiedValue, parse_data_type`` keeps
working for code written against the old path (tests, simulators, user code); Exchange's own
modules import from :mod:`exchange.values`.
"""

from __future__ import annotations

from exchange.values.model import DataType, QualifiedValue, Quality, parse_data_type

__all__ = ["DataType", "QualifiedValue", "Quality", "parse_data_type"]
