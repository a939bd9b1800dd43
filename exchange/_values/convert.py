"""What a value may be for each data type: the one set of conversion rules for a write.

The tag layer applies these rules to every write before anything is sent (with the tag's type, its
``bool_numbers`` and, on top, its ``min``/``max``: :meth:`exchange._tags.table.TagDef.convert`). A
driver applies them only where the type is known to the device alone (an OPC UA tag without
``type``: the node's type is learned on connect), and then these same rules, not a copy. Drivers
otherwise only encode a value already converted.

The rules are strict where a surprise could reach the plant:

- Boolean: ``True``/``False`` and the strings true/false/on/off/yes/no/1/0. The numbers 0 and 1 only
  with ``bool_numbers`` (the tag says ``bool_numbers = true``).
- Integer types: ints; floats only when integral (``5.0`` -> 5, ``2.5`` is refused); numeric strings
  (``"42"``). The value must fit the type (70000 is not an Int16).
- Float types: ints, floats, numeric strings; finite; a Float32 at most 3.4028235e38 in magnitude.
- Booleans are refused for every numeric type (``True`` written to a speed is almost certainly a
  mistake: it would be 1 rpm) unless ``bool_numbers``; then they are 1 and 0.
- String: strings only.
- No type (the device decides): any boolean, number or string; a float must be finite.

:class:`TagTypeError` says a value cannot become the type, :class:`TagRangeError` that it does not fit
the type. Messages start with ``where`` (the tag, or the device's node) and name the value; they call
the type by ``type_name`` (the device's own name for it, e.g. OPC UA's ``Double``) or by its
:class:`DataType` name, and the thing written by ``subject`` (``tag`` or ``node``).
"""

from __future__ import annotations

import math
from typing import Any

from exchange._arguments import shown
from exchange._values.model import DataType
from exchange.errors import TagRangeError, TagTypeError

__all__ = ["FLOAT32_MAX", "coerce_value", "to_bool", "to_number"]

FLOAT32_MAX = 3.4028234663852886e38
_TRUE = ("true", "1", "on", "yes")
_FALSE = ("false", "0", "off", "no")
_BOOL_HINT = "set bool_numbers = true on the tag to write booleans as 1/0"
_NUMBER_HINT = "set bool_numbers = true on the tag to write 1/0 as true/false"


def coerce_value(
    value: Any,
    data_type: DataType | None,
    where: str,
    *,
    bool_numbers: bool = False,
    subject: str = "tag",
    type_name: str | None = None,
) -> Any:
    """``value`` as the Python value a driver encodes for ``data_type`` (rules in the module doc).

    ``where`` starts every message; ``subject`` and ``type_name`` only change how messages name the
    thing written and its type (see the module doc). Raises TagTypeError or TagRangeError.
    """
    if data_type is None:
        if isinstance(value, (bool, int, float, str)):
            if isinstance(value, float) and not math.isfinite(value):
                raise TagRangeError(f"{where}: {value!r} is not a finite number")
            return value
        raise TagTypeError(f"{where}: {shown(value)} is not a boolean, number or string")
    name = type_name or data_type.value
    if data_type is DataType.BOOLEAN:
        return to_bool(value, where, numbers=bool_numbers, subject=subject, type_name=type_name)
    if data_type is DataType.STRING:
        if not isinstance(value, str):
            raise TagTypeError(f"{where}: {shown(value)} is not a string (the {subject} is {name})")
        return value
    if isinstance(value, bool):
        if not bool_numbers:
            raise TagTypeError(f"{where}: {value!r} is a boolean, not a number (the {subject} is {name}; {_BOOL_HINT})")
        value = int(value)
    if data_type.is_integer:
        return _to_int(value, data_type, where, subject, name)
    return _to_float(value, data_type, where, subject, name)


def to_bool(
    value: Any, where: str, *, numbers: bool = True, subject: str = "tag", type_name: str | None = None
) -> bool:
    """``value`` as a boolean (true/false/on/off/yes/no/1/0 as text; 0 and 1 only with ``numbers``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        if numbers:
            return bool(value)
        # a device's own type name reads as the noun ("not a Boolean"); a tag's says "boolean"
        noun = type_name or "boolean"
        raise TagTypeError(f"{where}: {value!r} is a number, not a {noun} "
                           f"(the {subject} is {type_name or 'Boolean'}; {_NUMBER_HINT})")
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise TagTypeError(f"{where}: {shown(value)} is not a boolean (true/false)")


def to_number(value: Any, where: str, *, subject: str = "tag", type_name: str = "Float64") -> int | float:
    """An int or float from a number or numeric text (booleans refused); TagTypeError otherwise."""
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
    raise TagTypeError(f"{where}: {shown(value)} is not a number (the {subject} is {type_name})")


def _to_int(value: Any, data_type: DataType, where: str, subject: str, name: str) -> int:
    number = to_number(value, where, subject=subject, type_name=name)
    if isinstance(number, float):
        if not math.isfinite(number):
            raise TagRangeError(f"{where}: {value!r} is not a finite number")
        if not number.is_integer():
            raise TagTypeError(f"{where}: {value!r} is not a whole number (the {subject} is {name})")
        number = int(number)
    low, high = data_type.integer_range()
    if not low <= number <= high:
        raise TagRangeError(f"{where}: {value!r} is outside the {name} range {low}..{high}")
    return number


def _to_float(value: Any, data_type: DataType, where: str, subject: str, name: str) -> float:
    try:
        number = float(to_number(value, where, subject=subject, type_name=name))
    except OverflowError:  # an int beyond a double
        raise TagRangeError(f"{where}: {shown(value)} is outside the {name} range") from None
    if not math.isfinite(number):
        raise TagRangeError(f"{where}: {value!r} is not a finite number")
    if data_type is DataType.FLOAT32 and abs(number) > FLOAT32_MAX:
        raise TagRangeError(f"{where}: {value!r} is outside the {name} range")
    return number
