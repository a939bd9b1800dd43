"""A written value as an OPC UA Variant of exactly the node's type, learned from the node on connect.

Servers refuse a write whose variant type differs from the node's (BadTypeMismatch), so every value
goes out as the node's own variant type. :func:`to_variant` picks one of two paths:

- The tag has a ``type`` and it is the node's type: the tag layer already converted the value by
  Exchange's rules (:mod:`exchange._values.convert`), so :func:`encode` only wraps it. It still refuses
  a value that cannot be encoded at all (a last guard: such a value would otherwise fail while the
  request is built, after the write counts as sent).
- The tag has no ``type`` (only the device knows it), or another type than the node: the value is
  converted here, by those same rules, for the node's type (:func:`coerce`). Nothing else could: the
  type is learned from the node.

Either raises TagTypeError/TagRangeError naming ``where`` (device and address) before anything is
sent. Node types Exchange has no :class:`DataType` for (DateTime, ByteString, ...) take the value as
given (a DateTime also from ISO text); the server judges it.

Arrays: a node's ValueRank (learned with its type) says whether it holds one value (-1), an array
(1; 0: one or more dimensions), or either (-2, -3). A list goes only to a node that may hold an
array, a single value only to one that may hold a scalar; each element is encoded as above and the
whole list goes out as one Variant array of the node's type. A one-dimensional node whose
ArrayDimensions declares a length (a PLC's fixed array; OPC UA calls it the maximum) takes a list of
exactly that length: a server may take a longer or shorter list and write part of the array, or
resize it. Arrays of more than one dimension are refused (a list of lists).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from asyncua import ua

from exchange._arguments import shown
from exchange._values import DataType
from exchange._values.convert import FLOAT32_MAX, coerce_value
from exchange.errors import TagRangeError, TagTypeError

__all__ = ["ANY", "DATA_TYPES", "SCALAR", "coerce", "encode", "to_variant"]

# the node types that are an Exchange data type (the same ranges and meaning)
DATA_TYPES: dict[ua.VariantType, DataType] = {
    ua.VariantType.Boolean: DataType.BOOLEAN,
    ua.VariantType.SByte: DataType.INT8,
    ua.VariantType.Byte: DataType.UINT8,
    ua.VariantType.Int16: DataType.INT16,
    ua.VariantType.UInt16: DataType.UINT16,
    ua.VariantType.Int32: DataType.INT32,
    ua.VariantType.UInt32: DataType.UINT32,
    ua.VariantType.Int64: DataType.INT64,
    ua.VariantType.UInt64: DataType.UINT64,
    ua.VariantType.Float: DataType.FLOAT32,
    ua.VariantType.Double: DataType.FLOAT64,
    ua.VariantType.String: DataType.STRING,
}


SCALAR, ANY, SCALAR_OR_ONE_DIMENSION, ONE_OR_MORE_DIMENSIONS, ONE_DIMENSION = -1, -2, -3, 0, 1


def to_variant(
    value: Any,
    variant_type: ua.VariantType,
    data_type: DataType | None,
    where: str,
    *,
    bool_numbers: bool = False,
    value_rank: int = ANY,
    length: int | None = None,
) -> ua.Variant:
    """``value`` for a node of ``variant_type`` and ``value_rank`` (``length``: the elements a fixed
    array holds); ``data_type`` is the tag's (what the value was converted to), ``bool_numbers`` its
    setting. See the module doc for the paths."""
    if isinstance(value, (list, tuple)):
        if length is not None and len(value) != length:
            raise TagRangeError(f"{where}: the node holds {length} elements (its ArrayDimensions), got a list of "
                                f"{len(value)}")
        if value_rank == SCALAR:
            raise TagTypeError(f"{where}: the node holds one {variant_type.name}, not an array; got a list of "
                               f"{len(value)}")
        if value_rank > ONE_DIMENSION:
            raise TagTypeError(f"{where}: the node is an array of {value_rank} dimensions; only one-dimensional "
                               "arrays are written")
        items = [_element(item, variant_type, data_type, f"{where} element [{index}]", bool_numbers)
                 for index, item in enumerate(value)]
        return ua.Variant(items, variant_type, is_array=True)
    if value_rank in (ONE_DIMENSION, ONE_OR_MORE_DIMENSIONS) or value_rank > ONE_DIMENSION:
        raise TagTypeError(f"{where}: the node holds an array of {variant_type.name}; write a list, got "
                           f"{shown(value)}")
    return ua.Variant(_element(value, variant_type, data_type, where, bool_numbers), variant_type)


def _element(value: Any, variant_type: ua.VariantType, data_type: DataType | None, where: str,
             bool_numbers: bool) -> Any:
    if isinstance(value, (list, tuple, dict)):
        raise TagTypeError(f"{where}: {shown(value)} is not one value (arrays are one dimension)")
    if data_type is not None and DATA_TYPES.get(variant_type) is data_type:
        return encode(value, variant_type, where).Value
    return coerce(value, variant_type, where, bool_numbers=bool_numbers).Value


def coerce(value: Any, variant_type: ua.VariantType, where: str, *, bool_numbers: bool = False) -> ua.Variant:
    """Convert ``value`` for a node of ``variant_type`` by Exchange's rules, and wrap it.

    The rules are :func:`exchange._values.convert.coerce_value`'s, with messages naming the node and
    its OPC UA type (``the node is Int16``, ``outside the Double range``). Raises TagTypeError or
    TagRangeError; nothing has been sent then. (The simulator uses it for the values it serves.)
    """
    data_type = DATA_TYPES.get(variant_type)
    if data_type is not None:
        converted = coerce_value(value, data_type, where, bool_numbers=bool_numbers, subject="node",
                                 type_name=variant_type.name)
        return ua.Variant(converted, variant_type)
    if variant_type == ua.VariantType.DateTime and isinstance(value, str):
        try:
            return ua.Variant(datetime.fromisoformat(value), variant_type)
        except ValueError:
            raise TagTypeError(f"{where}: {value!r} is not an ISO date and time") from None
    return ua.Variant(value, variant_type)


def encode(value: Any, variant_type: ua.VariantType, where: str) -> ua.Variant:
    """Wrap a value already converted to ``variant_type``'s data type; no conversion, no policy.

    Refuses only what the type cannot carry at all: a Python value of another kind (TagTypeError) or
    a number outside the type (TagRangeError).
    """
    data_type = DATA_TYPES.get(variant_type)
    if data_type is None:
        return ua.Variant(value, variant_type)
    if data_type is DataType.BOOLEAN:
        fits = isinstance(value, bool)
    elif data_type is DataType.STRING:
        fits = isinstance(value, str)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        fits = False
    elif data_type.is_integer:
        if not isinstance(value, int):
            fits = False
        else:
            low, high = data_type.integer_range()
            if not low <= value <= high:
                raise TagRangeError(f"{where}: {value!r} is outside the {variant_type.name} range {low}..{high}")
            fits = True
    else:  # Float or Double: an int is encoded as the float it equals
        try:
            value = float(value)
        except OverflowError:
            raise TagRangeError(f"{where}: {shown(value)} is outside the {variant_type.name} range") from None
        if data_type is DataType.FLOAT32 and math.isfinite(value) and abs(value) > FLOAT32_MAX:
            raise TagRangeError(f"{where}: {value!r} is outside the {variant_type.name} range")
        fits = True
    if not fits:
        raise TagTypeError(f"{where}: {shown(value)} cannot be encoded as {variant_type.name}")
    return ua.Variant(value, variant_type)
