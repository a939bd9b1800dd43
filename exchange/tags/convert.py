"""Converting a value to a tag's data type before a write, and comparing read values.

Write conversion (:func:`coerce_value`) is strict where a surprise could reach the plant:

- Boolean: ``True``/``False`` and the strings true/false/on/off/yes/no/1/0. The numbers 0 and 1 only
  when the tag says ``bool_numbers = true``.
- Integer types: ints; floats only when integral (``5.0`` -> 5, ``2.5`` is refused); numeric strings
  (``"42"``). The value must fit the type (70000 is not an Int16).
- Float types: ints, floats, numeric strings; finite; a Float32 at most 3.4028235e38 in magnitude.
- Booleans are refused for every numeric type (``True`` written to a speed is almost certainly a
  mistake: it would be 1 rpm) unless the tag says ``bool_numbers = true``; then they are 1 and 0.
- String: strings only.
- Unknown type (the device decides, OPC UA): any JSON scalar except None; the driver converts to the
  node's type with the same rules.

:class:`TagTypeError` says a value cannot become the type, :class:`TagRangeError` that it does
not fit the type or the tag's ``min``/``max``. Messages name the tag and the value.
"""

from __future__ import annotations

import math
from typing import Any

from exchange.arguments import shown
from exchange.errors import TagRangeError, TagTypeError
from exchange.tags.model import DataType

FLOAT32_MAX = 3.4028234663852886e38
_TRUE = ("true", "1", "on", "yes")
_FALSE = ("false", "0", "off", "no")


_BOOL_HINT = "set bool_numbers = true on the tag to write booleans as 1/0"


def coerce_value(value: Any, data_type: DataType | None, where: str, *, bool_numbers: bool = False) -> Any:
    """``value`` as the Python value a driver writes for ``data_type``; ``where`` names the tag.

    ``bool_numbers``: the tag's config allows booleans for numbers and 0/1 for a Boolean.
    """
    if data_type is None:
        if isinstance(value, (bool, int, float, str)):
            if isinstance(value, float) and not math.isfinite(value):
                raise TagRangeError(f"{where}: {value!r} is not a finite number")
            return value
        raise TagTypeError(f"{where}: {shown(value)} is not a boolean, number or string")
    if data_type is DataType.BOOLEAN:
        return _to_bool(value, where, numbers=bool_numbers)
    if data_type is DataType.STRING:
        if not isinstance(value, str):
            raise TagTypeError(f"{where}: {shown(value)} is not a string (the tag is String)")
        return value
    if isinstance(value, bool):
        if not bool_numbers:
            raise TagTypeError(
                f"{where}: {value!r} is a boolean, not a number (the tag is {data_type.value}; {_BOOL_HINT})"
            )
        value = int(value)
    if data_type.is_integer:
        return _to_int(value, data_type, where)
    return _to_float(value, data_type, where)


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


def _to_bool(value: Any, where: str, *, numbers: bool = True) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        if numbers:
            return bool(value)
        raise TagTypeError(f"{where}: {value!r} is a number, not a boolean (the tag is Boolean; "
                           "set bool_numbers = true on the tag to write 1/0 as true/false)")
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise TagTypeError(f"{where}: {shown(value)} is not a boolean (true/false)")


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
    raise TagTypeError(f"{where}: {shown(value)} is not a number (the tag is {data_type.value})")


def _to_int(value: Any, data_type: DataType, where: str) -> int:
    number = _to_number(value, data_type, where)
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
    try:
        number = float(_to_number(value, data_type, where))
    except OverflowError:  # an int beyond a double
        raise TagRangeError(f"{where}: {shown(value)} is outside the {data_type.value} range") from None
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
