"""The tag layer's part of converting a write, and comparing read values for waits and confirms.

A write's value is converted by the rules of :mod:`exchange._values.convert` (:func:`coerce_value`,
re-exported here): what a value may be for the tag's data type, with its ``bool_numbers``. On top of
the type the tag may set ``min``/``max``: :func:`check_bounds`. Both run once per write, in the tag
layer (:meth:`exchange._tags.table.TagDef.convert`), before anything is sent; the drivers only encode.

:func:`values_equal` decides whether a value read back equals the one expected (floats with a
tolerance by type), for ``wait_for_value``, ``write_confirm`` and the read-back of a write in doubt.
"""

from __future__ import annotations

import math
from typing import Any

from exchange._values import DataType
from exchange._values.convert import FLOAT32_MAX, coerce_value, to_bool, to_number
from exchange.errors import TagRangeError, TagTypeError

__all__ = ["FLOAT32_MAX", "check_bounds", "coerce_value", "default_tolerance", "values_equal"]


def check_bounds(
    value: Any, min_value: float | None, max_value: float | None, where: str, *, bools_are_numbers: bool = False
) -> None:
    """TagRangeError when a numeric ``value`` is outside the tag's ``min``/``max``. A boolean has no
    range unless ``bools_are_numbers`` (it will be written to a number as 1/0)."""
    if not isinstance(value, (int, float)) or (isinstance(value, bool) and not bools_are_numbers):
        return
    if min_value is not None and value < min_value:
        raise TagRangeError(f"{where}: {value!r} is below the tag's min {_num(min_value)}")
    if max_value is not None and value > max_value:
        raise TagRangeError(f"{where}: {value!r} is above the tag's max {_num(max_value)}")


def _num(bound: float) -> int | float:
    return int(bound) if bound.is_integer() else bound


def default_tolerance(data_type: DataType | None) -> float:
    """Relative and absolute tolerance for float comparisons: Float32 keeps ~7 digits."""
    if data_type is DataType.FLOAT64:
        return 1e-9
    return 1e-6


def values_equal(
    actual: Any, expected: Any, data_type: DataType | None = None, tolerance: float | None = None
) -> bool:
    """Whether a read ``actual`` equals ``expected`` for a wait or a confirm.

    Floats compare with ``tolerance`` (absolute and relative; default by type, see
    :func:`default_tolerance`) so a Float32 round trip of 0.1 still equals 0.1. Booleans compare by
    truth with 0/1 and true/false strings; numbers compare by value (5 equals 5.0). Arrays (lists)
    are equal when they have the same length and every element is equal by these rules.
    """
    if actual is None or expected is None:
        return actual is expected
    if isinstance(actual, (list, tuple)) or isinstance(expected, (list, tuple)):
        if not (isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple))):
            return False
        return len(actual) == len(expected) and all(
            values_equal(a, e, data_type, tolerance) for a, e in zip(actual, expected, strict=True)
        )
    if data_type is DataType.BOOLEAN or isinstance(expected, bool) or isinstance(actual, bool):
        try:
            return to_bool(actual, "") == to_bool(expected, "")
        except TagTypeError:
            return False
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float, str)):
        try:
            wanted = to_number(expected, "")
        except TagTypeError:
            return False
        if isinstance(actual, int) and isinstance(wanted, int):
            return actual == wanted
        tol = default_tolerance(data_type) if tolerance is None else tolerance
        return math.isclose(float(actual), float(wanted), rel_tol=tol, abs_tol=tol)
    return bool(actual == expected)
