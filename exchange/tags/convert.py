"""Converting a value to a tag's data type before a write, and comparing read values.

Write conversion (:func:`coerce_value`) is strict where a surprise could reach the plant:

- Boolean: ``True``/``False``, the numbers 0 and 1, and the strings true/false/1/0/on/off.
- Integer types: ints; floats only when integral (``5.0`` -> 5, ``2.5`` is refused); bools as 1/0;
  numeric strings (``"42"``). The value must fit the type (70000 is not an Int16).
- Float types: ints, floats, numeric strings; finite; a Float32 at most 3.4028235e38 in magnitude.
  Booleans are refused (a bool written to an analog value is almost certainly a mistake).
- String: strings only.
- Unknown type (the device decides, OPC UA): any JSON scalar except None.

:class:`TagTypeError` says a value cannot become the type, :class:`TagRangeError` that it does
not fit the type or the tag's ``min``/``max``. Messages name the tag and the value.
"""

from __future__ import annotations

import math
from typing import Any

from exchange.errors import TagRangeError, TagTypeError
from exchange.tags.model import DataType

FLOAT32_MAX = 3.4028234663852886e38
_TRUE = ("true", "1", "on", "yes")
_FALSE = ("false", "0", "off", "no")


def coerce_value(value: Any, data_type: DataType | None, where: str) -> Any:
    """``value`` as the Python value a driver writes for ``data_type``; ``where`` names the tag."""
    if data_type is None:
        if isinstance(value, (bool, int, float, str)):
            if isinstance(value, float) and not math.isfinite(value):
                raise TagRangeError(f"{where}: {value!r} is not a finite number")
            return value
        raise TagTypeError(f"{where}: {value!r} is not a boolean, number or string")
    if data_type is DataType.BOOLEAN:
        return _to_bool(value, where)
    if data_type is DataType.STRING:
        if not isinstance(value, str):
            raise TagTypeError(f"{where}: {value!r} is not a string (the tag is String)")
        return value
    if data_type.is_integer:
        return _to_int(value, data_type, where)
    return _to_float(value, data_type, where)


def check_bounds(value: Any, min_value: float | None, max_value: float | None, where: str) -> None:
    """TagRangeError when a numeric ``value`` is outside the tag's configured ``min``/``max``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if min_value is not None and value < min_value:
        raise TagRangeError(f"{where}: {value!r} is below the tag's min {_num(min_value)}")
    if max_value is not None and value > max_value:
        raise TagRangeError(f"{where}: {value!r} is above the tag's max {_num(max_value)}")


def _num(bound: float) -> int | float:
    return int(bound) if bound.is_integer() else bound


def _to_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise TagTypeError(f"{where}: {value!r} is not a boolean (true/false, 1/0)")


def _to_number(value: Any, data_type: DataType, where: str) -> int | float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            return float(text)
        except ValueError:
            pass
    raise TagTypeError(f"{where}: {value!r} is not a number (the tag is {data_type.value})")


def _to_int(value: Any, data_type: DataType, where: str) -> int:
    number: int | float = int(value) if isinstance(value, bool) else _to_number(value, data_type, where)
    if isinstance(number, float):
        if not math.isfinite(number):
            raise TagRangeError(f"{where}: {value!r} is not a finite number")
        if not number.is_integer():
            raise TagTypeError(f"{where}: {value!r} is not a whole number (the tag is {data_type.value})")
        number = int(number)
    low, high = data_type.integer_range()
    if not low <= number <= high:
        raise TagRangeError(f"{where}: {value!r} is outside the {data_type.value} range {low}..{high}")
    return number


def _to_float(value: Any, data_type: DataType, where: str) -> float:
    if isinstance(value, bool):
        raise TagTypeError(f"{where}: {value!r} is a boolean, not a number (the tag is {data_type.value})")
    number = float(_to_number(value, data_type, where))
    if not math.isfinite(number):
        raise TagRangeError(f"{where}: {value!r} is not a finite number")
    if data_type is DataType.FLOAT32 and abs(number) > FLOAT32_MAX:
        raise TagRangeError(f"{where}: {value!r} is outside the Float32 range")
    return number


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
    truth with 0/1 and true/false strings; numbers compare by value (5 equals 5.0).
    """
    if actual is None or expected is None:
        return actual is expected
    if data_type is DataType.BOOLEAN or isinstance(expected, bool) or isinstance(actual, bool):
        try:
            return _to_bool(actual, "") == _to_bool(expected, "")
        except TagTypeError:
            return False
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float, str)):
        try:
            wanted = _to_number(expected, data_type or DataType.FLOAT64, "")
        except TagTypeError:
            return False
        if isinstance(actual, int) and isinstance(wanted, int):
            return actual == wanted
        tol = default_tolerance(data_type) if tolerance is None else tolerance
        return math.isclose(float(actual), float(wanted), rel_tol=tol, abs_tol=tol)
    return bool(actual == expected)
