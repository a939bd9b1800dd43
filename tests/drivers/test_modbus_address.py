"""Ignition-style Modbus addresses, the register codec and the request planner."""

from __future__ import annotations

import pytest

from exchange._drivers.modbus.address import decode, encode, parse_address, parse_modbus_address
from exchange._drivers.modbus.plan import plan_reads, plan_writes
from exchange._values import DataType
from exchange.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "table", "data_type", "offset", "width"),
    [
        ("C1", "C", DataType.BOOLEAN, 0, 1),
        ("DI16", "DI", DataType.BOOLEAN, 15, 1),
        ("HR1", "HR", DataType.INT16, 0, 1),
        ("hrus7", "HR", DataType.UINT16, 6, 1),
        ("HRI10", "HR", DataType.INT32, 9, 2),
        ("HRUI3", "HR", DataType.UINT32, 2, 2),
        ("HRF1", "HR", DataType.FLOAT32, 0, 2),
        ("HRD100", "HR", DataType.FLOAT64, 99, 4),
        ("HRI641", "HR", DataType.INT32, 640, 2),  # as in Ignition: Int32 at 641, not Int64 at 1
        ("HRI_645", "HR", DataType.INT64, 4, 4),
        ("HRUI_641", "HR", DataType.UINT64, 0, 4),
        ("IR2", "IR", DataType.INT16, 1, 1),
        ("IRF2", "IR", DataType.FLOAT32, 1, 2),
        ("IRUS65536", "IR", DataType.UINT16, 65535, 1),
    ],
)
def test_one_based_addresses(text: str, table: str, data_type: DataType, offset: int, width: int) -> None:
    addr = parse_modbus_address(text)
    assert (addr.table, addr.data_type, addr.offset, addr.width) == (table, data_type, offset, width)


def test_zero_based_numbering_is_the_protocol_address() -> None:
    assert parse_modbus_address("HR0", zero_based=True).offset == 0
    assert parse_modbus_address("HRF10", zero_based=True).offset == 10
    assert parse_modbus_address("C65535", zero_based=True).offset == 65535


@pytest.mark.parametrize(
    ("text", "zero_based", "fragment"),
    [
        ("HRX1", False, "is not valid"),
        ("R1", False, "is not valid"),
        ("HR", False, "is not valid"),
        ("HR-1", False, "is not valid"),
        ("CF1", False, "takes no type suffix"),
        ("HR0", False, "numbers start at 1"),
        ("HR65537", False, "beyond the last Modbus address"),
        ("HRF65536", False, "beyond the last Modbus address"),
        ("HRD65533", True, "beyond the last Modbus address"),
    ],
)
def test_malformed_addresses_are_refused_naming_the_address(text: str, zero_based: bool, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_modbus_address(text, zero_based=zero_based)
    assert repr(text) in str(caught.value)
    assert fragment in str(caught.value)


def test_configured_type_refines_a_bare_register_and_conflicts_are_refused() -> None:
    assert parse_modbus_address("HR5", DataType.FLOAT32).data_type is DataType.FLOAT32
    assert parse_modbus_address("HR5", DataType.FLOAT32).width == 2
    assert parse_modbus_address("HRF5", DataType.FLOAT32).data_type is DataType.FLOAT32
    assert parse_modbus_address("C5", DataType.BOOLEAN).data_type is DataType.BOOLEAN
    with pytest.raises(ConfigError, match="'HRF5' is Float32 but the tag's type is Int16"):
        parse_modbus_address("HRF5", DataType.INT16)
    with pytest.raises(ConfigError, match="is Boolean, not Int16"):
        parse_modbus_address("C5", DataType.INT16)
    with pytest.raises(ConfigError, match="String"):
        parse_modbus_address("HR5", DataType.STRING)
    assert parse_address("HRUI1", None) is DataType.UINT32


@pytest.mark.parametrize(
    ("address", "value", "big", "little"),
    [
        ("HR1", -2, [0xFFFE], [0xFFFE]),
        ("HRI1", 0x00010002, [0x0001, 0x0002], [0x0002, 0x0001]),
        ("HRUI1", 0xDEADBEEF, [0xDEAD, 0xBEEF], [0xBEEF, 0xDEAD]),
        ("HRF1", 1.0, [0x3F80, 0x0000], [0x0000, 0x3F80]),
        ("HRD1", 1.0, [0x3FF0, 0, 0, 0], [0, 0, 0, 0x3FF0]),
        ("HRI_641", -1, [0xFFFF] * 4, [0xFFFF] * 4),
        ("HRI_641", 0x0001000200030004, [1, 2, 3, 4], [4, 3, 2, 1]),
        ("HRUI_641", 2**64 - 2, [0xFFFF, 0xFFFF, 0xFFFF, 0xFFFE], [0xFFFE, 0xFFFF, 0xFFFF, 0xFFFF]),
    ],
)
def test_word_order(address: str, value: object, big: list[int], little: list[int]) -> None:
    addr = parse_modbus_address(address)
    assert encode(addr, value, "big") == big
    assert encode(addr, value, "little") == little
    assert decode(addr, big, "big") == value
    assert decode(addr, little, "little") == value


def test_reads_are_planned_into_the_fewest_blocks() -> None:
    addrs = [parse_modbus_address(f"HRF{n}") for n in range(1, 200, 2)]  # 100 floats, 200 registers
    blocks = plan_reads(addrs)
    assert [(b.start, b.count) for b in blocks] == [(0, 124), (124, 76)]  # 62 floats fit in 125
    assert sorted(m for b in blocks for m in b.members) == list(range(100))
    spread = [parse_modbus_address(a) for a in ("HR1", "HR100", "HR300", "C1", "C2000", "C2001")]
    planned = {(b.table, b.start, b.count) for b in plan_reads(spread)}
    assert planned == {("HR", 0, 100), ("HR", 299, 1), ("C", 0, 2000), ("C", 2000, 1)}
    no_gaps = plan_reads([parse_modbus_address(a) for a in ("HR1", "HR2", "HR4")], span_gaps=False)
    assert [(b.start, b.count) for b in no_gaps] == [(0, 2), (3, 1)]


def test_writes_merge_only_strictly_adjacent_values_in_caller_order() -> None:
    items = [
        (parse_modbus_address("HR1"), [1]),
        (parse_modbus_address("HRF2"), [2, 3]),
        (parse_modbus_address("C1"), [True]),
        (parse_modbus_address("HR10"), [4]),
        (parse_modbus_address("HR9"), [5]),
    ]
    blocks = plan_writes(items)  # type: ignore[arg-type]
    assert [(b.table, b.start, b.values) for b in blocks] == [
        ("HR", 0, [1, 2, 3]),
        ("C", 0, [True]),
        ("HR", 9, [4]),
        ("HR", 8, [5]),
    ]
