"""OPC UA write values: encoded as the node's variant type, converted only where the tag layer could not."""

from __future__ import annotations

import pytest
from asyncua import ua

from exchange._drivers.opcua.encode import encode, to_variant
from exchange._values import DataType
from exchange.errors import TagRangeError, TagTypeError

Int16, Float, Boolean = ua.VariantType.Int16, ua.VariantType.Float, ua.VariantType.Boolean


def test_a_value_the_tag_layer_converted_is_only_encoded() -> None:
    # the tag's type is the node's: the value is already an Int16, nothing converts "12" again
    assert to_variant(12, Int16, DataType.INT16, "x").Value == 12
    with pytest.raises(TagTypeError, match="'12' cannot be encoded as Int16"):
        to_variant("12", Int16, DataType.INT16, "x")


def test_a_value_for_a_type_only_the_node_knows_is_converted_by_the_tag_rules() -> None:
    assert to_variant("12", Int16, None, "x").Value == 12  # no `type` on the tag
    assert to_variant("on", Boolean, None, "x").Value is True
    assert to_variant(1, Boolean, None, "x", bool_numbers=True).Value is True
    with pytest.raises(TagTypeError, match=r"True is a boolean, not a number \(the node is Int16"):
        to_variant(True, Int16, None, "x")
    # a tag typed Int32 on an Int16 node: converted for the node, which is what goes on the wire
    with pytest.raises(TagRangeError, match="outside the Int16 range"):
        to_variant(70_000, Int16, DataType.INT32, "x")


@pytest.mark.parametrize(
    ("value", "variant", "error", "fragment"),
    [
        (70_000, Int16, TagRangeError, "70000 is outside the Int16 range -32768..32767"),
        (1.5, Int16, TagTypeError, "1.5 cannot be encoded as Int16"),
        (True, Int16, TagTypeError, "True cannot be encoded as Int16"),
        (1, Boolean, TagTypeError, "1 cannot be encoded as Boolean"),
        (1e39, Float, TagRangeError, "outside the Float range"),
        (10**400, ua.VariantType.Double, TagRangeError, "outside the Double range"),
        (5, ua.VariantType.String, TagTypeError, "5 cannot be encoded as String"),
    ],
)
def test_the_last_guard_refuses_what_the_type_cannot_carry(
    value: object, variant: ua.VariantType, error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error, match=fragment):
        encode(value, variant, "x")


def test_encode_wraps_exactly_the_node_type() -> None:
    assert encode(3, Float, "x").Value == 3.0 and encode(3, Float, "x").VariantType == Float
    assert encode(False, Boolean, "x").Value is False
    assert encode("2024-01-01", ua.VariantType.ByteString, "x").Value == "2024-01-01"  # not a DataType: as given
