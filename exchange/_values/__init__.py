"""The values drivers and tags share: data types, qualities, qualified values, conversion rules.

This package is the bottom of the device stack: :mod:`exchange._drivers` and :mod:`exchange._tags`
both import it and it imports neither (nor anything else of Exchange but the leaf modules
:mod:`exchange.errors`, :mod:`exchange._arguments` and :mod:`exchange._timefmt`), so the drivers need
not know the tag layer to speak of values. ``tests/test_architecture.py`` enforces it.

- :mod:`exchange._values.model`: :class:`DataType`, :class:`Quality`, :class:`QualifiedValue`,
  :func:`parse_data_type`.
- :mod:`exchange._values.convert`: what a value may be for each data type (the write conversion
  rules, applied by the tag layer; see its docstring).
"""

from __future__ import annotations

from exchange._values.model import DataType, QualifiedValue, Quality, parse_data_type

__all__ = ["DataType", "QualifiedValue", "Quality", "parse_data_type"]
