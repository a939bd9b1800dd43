"""The values drivers and tags share: data types, qualities, qualified values, conversion rules.

This package is the bottom of the device stack: :mod:`exchange.drivers` and :mod:`exchange.tags`
both import it and it imports neither (nor anything else of Exchange but the leaf modules
:mod:`exchange.errors`, :mod:`exchange.arguments` and :mod:`exchange.timefmt`), so the drivers need
not know the tag layer to speak of values. ``tests/test_architecture.py`` enforces it.

- :mod:`exchange.values.model`: :class:`DataType`, :class:`Quality`, :class:`QualifiedValue`,
  :func:`parse_data_type`.
- :mod:`exchange.values.convert`: what a value may be for each data type (the write conversion
  rules, applied by the tag layer; see its docstring).
"""

from __future__ import annotations

from exchange.values.model import DataType, QualifiedValue, Quality, parse_data_type

__all__ = ["DataType", "QualifiedValue", "Quality", "parse_data_type"]
