"""Value conversion before writes and value comparison for waits and confirms."""

from __future__ import annotations

from typing import Any

import pytest

from exchange._tags.convert import check_bounds, coerce_value, values_equal
from exchange._values import DataType
from exchange.errors import TagRangeError, TagTypeError

T = DataType


@pytest.mark.parametrize(
    ("value", "data_type", "expected"),
    [
        (True, T.BOOLEAN, True),
        (" TRUE ", T.BOOLEAN, True),
        ("off", T.BOOLEAN, False),
        (5, T.INT16, 5),
        (5.0, T.INT16, 5),
        ("42", T.INT16, 42),
        ("-3.0", T.INT32, -3),
        (32767, T.INT16, 32767),
        (-32768, T.INT16, -32768),
        (65535, T.UINT16, 65535),
        (2**63 - 1, T.INT64, 2**63 - 1),
        (3, T.FLOAT32, 3.0),
        ("2.5", T.FLOAT64, 2.5),
        (-1e38, T.FLOAT32, -1e38),
        ("text", T.STRING, "text"),
        (7, None, 7),
        ("x", None, "x"),
    ],
)
def test_values_that_convert(value: Any, data_type: DataType | None, expected: Any) -> None:
    result = coerce_value(value, data_type, "tag '[p]X'")
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("value", "data_type", "error", "fragment"),
    [
        ("abc", T.INT16, TagTypeError, "'abc' is not a number"),
        (70000, T.INT16, TagRangeError, "outside the Int16 range -32768..32767"),
        (-1, T.UINT16, TagRangeError, "outside the UInt16 range"),
        (2.5, T.INT32, TagTypeError, "not a whole number"),
        (float("nan"), T.INT32, TagRangeError, "not a finite number"),
        (float("inf"), T.FLOAT64, TagRangeError, "not a finite number"),
        (1e39, T.FLOAT32, TagRangeError, "outside the Float32 range"),
        (True, T.FLOAT32, TagTypeError, "is a boolean"),
        (True, T.INT16, TagTypeError, "True is a boolean, not a number (the tag is Int16; set bool_numbers"),
        (False, T.UINT16, TagTypeError, "is a boolean, not a number"),
        (0, T.BOOLEAN, TagTypeError, "0 is a number, not a boolean"),
        (1.0, T.BOOLEAN, TagTypeError, "is a number, not a boolean"),
        (10**400, T.FLOAT64, TagRangeError, "outside the Float64 range"),
        ("1e999", T.FLOAT64, TagRangeError, "not a finite number"),
        (2, T.BOOLEAN, TagTypeError, "not a boolean"),
        ("maybe", T.BOOLEAN, TagTypeError, "not a boolean"),
        (None, T.INT16, TagTypeError, "not a number"),
        ([1], T.FLOAT32, TagTypeError, "not a number"),
        (5, T.STRING, TagTypeError, "not a string"),
        (None, None, TagTypeError, "not a boolean, number or string"),
        ({"a": 1}, None, TagTypeError, "not a boolean, number or string"),
    ],
)
def test_values_that_are_refused(value: Any, data_type: DataType | None, error: type, fragment: str) -> None:
    with pytest.raises(error) as caught:
        coerce_value(value, data_type, "tag '[p]X'")
    assert fragment in str(caught.value)
    assert "tag '[p]X'" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "data_type", "expected"),
    [(True, T.INT16, 1), (False, T.FLOAT32, 0.0), (0, T.BOOLEAN, False), (1.0, T.BOOLEAN, True)],
)
def test_bool_numbers_converts_booleans_and_numbers(value: Any, data_type: DataType, expected: Any) -> None:
    result = coerce_value(value, data_type, "tag '[p]X'", bool_numbers=True)
    assert result == expected and type(result) is type(expected)


def test_a_boolean_written_as_a_number_keeps_to_min_and_max() -> None:
    with pytest.raises(TagRangeError, match="True is below the tag's min 5"):
        check_bounds(True, 5.0, 10.0, "t", bools_are_numbers=True)


def test_min_and_max() -> None:
    check_bounds(10.0, 0.0, 10.0, "t")
    check_bounds(True, 5.0, 10.0, "t")  # booleans have no range
    with pytest.raises(TagRangeError, match="10.5 is above the tag's max 10"):
        check_bounds(10.5, 0.0, 10.0, "t")
    with pytest.raises(TagRangeError, match="-1 is below the tag's min 0"):
        check_bounds(-1, 0.0, None, "t")


@pytest.mark.parametrize(
    ("actual", "expected", "data_type", "equal"),
    [
        (0.10000000149011612, 0.1, T.FLOAT32, True),  # Float32 round trip of 0.1
        (12.300000190734863, 12.3, None, True),
        (12.31, 12.3, T.FLOAT32, False),
        (1e-7, 0.0, T.FLOAT32, True),
        (0.1 + 1e-12, 0.1, T.FLOAT64, True),
        (0.1 + 1e-6, 0.1, T.FLOAT64, False),
        (5, 5.0, T.INT16, True),
        (5, "5", T.INT16, True),
        (5, 6, T.INT16, False),
        (True, 1, T.BOOLEAN, True),
        (False, "false", T.BOOLEAN, True),
        (1, True, None, True),
        (True, "abc", None, False),
        ("on", "on", T.STRING, True),
        (None, 0, T.INT16, False),
        (None, None, None, True),
    ],
)
def test_values_equal(actual: Any, expected: Any, data_type: DataType | None, equal: bool) -> None:
    assert values_equal(actual, expected, data_type) is equal


def test_explicit_tolerance_overrides_the_default() -> None:
    assert values_equal(50.2, 50.0, T.FLOAT32, tolerance=0.5)
    assert not values_equal(50.2, 50.0, T.FLOAT32)
