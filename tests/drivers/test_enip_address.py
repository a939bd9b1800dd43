"""Logix addresses, device settings and config-made tag definitions (no server needed)."""

from __future__ import annotations

import re

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._drivers.enip import ENIP as enip
from exchange._drivers.enip.tags import TagDefinitions, parse_logix_address
from exchange._values import DataType
from exchange.errors import ConfigError, TagPathError, TagTypeError


@pytest.mark.parametrize(
    ("address", "base_key", "members"),
    [
        ("Valve_Cmd", "Valve_Cmd", ()),
        ("_x1", "_x1", ()),
        ("Program:MainProgram.Step", "Program:MainProgram.Step", ()),
        ("Program:Main.Motor.Speed", "Program:Main.Motor", ("Speed",)),
        ("Arr[3]", "Arr", ()),
        ("Grid[1,2]", "Grid", ()),
        ("UDT.Member", "UDT", ("Member",)),
        ("Recipes[2].Steps[4].Temp", "Recipes", ("Steps", "Temp")),
    ],
)
def test_valid_addresses_split_the_way_pycomm3_resolves_them(
    address: str, base_key: str, members: tuple[str, ...]
) -> None:
    parsed = parse_logix_address(address)
    assert (parsed.base_key, parsed.member_names) == (base_key, members)
    assert enip.parse_address(address, DataType.FLOAT32) is DataType.FLOAT32
    assert enip.parse_address(address, None) is None


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("", "empty"),
        ("1abc", "invalid name"),
        ("Tag Name", "white space"),
        (" Tag", "white space"),
        ("a..b", "empty name"),
        ("a.", "empty name"),
        ("Arr[", "invalid name"),
        ("Arr[x]", "invalid name"),
        ("Arr[-1]", "invalid name"),
        ("Arr[1,2,3,4]", "invalid name"),
        ("Arr[1]x", "invalid name"),
        ("Flags.3", "bit-of-word"),
        ("program:Main.Step", "spelled 'Program:'"),
        ("Program:Main", "needs a tag"),
        ("Program:1x.Step", "invalid program name"),
        ("Tank-Level", "invalid name"),
        ("A" * 41, "longer than 40"),
    ],
)
def test_malformed_addresses_are_refused_naming_the_address(address: str, reason: str) -> None:
    with pytest.raises(TagPathError) as caught:
        enip.parse_address(address, DataType.INT16)
    assert repr(address) in str(caught.value)
    assert reason in str(caught.value)


def test_the_registry_reports_a_malformed_address_with_the_device() -> None:
    device = DeviceConfig("logix", "enip", {"driver": "enip", "host": "127.0.0.1"})
    with pytest.raises(ConfigError, match=r"device 'logix' \(enip\).*'Arr\[x\]'"):
        registry.validate_address(device, "Arr[x]", DataType.INT16)


def test_without_tag_upload_every_address_needs_a_type() -> None:
    device = DeviceConfig("logix", "enip", {"driver": "enip", "host": "127.0.0.1", "upload_tags": False})
    assert registry.validate_address(device, "Level", DataType.FLOAT32) is DataType.FLOAT32
    with pytest.raises(ConfigError, match=r"'Level' needs `type`.*upload_tags is false"):
        registry.validate_address(device, "Level", None)
    uploading = DeviceConfig("logix", "enip", {"driver": "enip", "host": "127.0.0.1"})
    assert registry.validate_address(uploading, "Level", None) is None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, r"devices\.logix\.host"),
        ({"host": "127.0.0.1:44818"}, r"devices\.logix\.host"),
        ({"host": "127.0.0.1", "port": 0}, r"devices\.logix\.port"),
        ({"host": "127.0.0.1", "port": "44818"}, r"devices\.logix\.port"),
        ({"host": "127.0.0.1", "slot": -1}, r"devices\.logix\.slot"),
        ({"host": "127.0.0.1", "upload_tags": "no"}, r"devices\.logix\.upload_tags"),
        ({"host": "127.0.0.1", "timeout": 5}, r"unknown enip key\(s\) timeout"),
        ({"host": "127.0.0.1", "reconnect_min_ms": 500, "reconnect_max_ms": 100}, r"reconnect_max_ms"),
    ],
)
def test_bad_settings_name_the_key(settings: dict[str, object], message: str) -> None:
    device = DeviceConfig("logix", "enip", {"driver": "enip", **settings})
    with pytest.raises(ConfigError, match=message):
        registry.validate_settings(device)
    with pytest.raises(ConfigError, match=message):
        registry.create_driver(device)


def test_definitions_give_pycomm3_one_entry_per_base_tag() -> None:
    definitions = TagDefinitions()
    for address, data_type in [
        ("Level", DataType.FLOAT32), ("Arr[2]", DataType.INT32), ("Arr[7]", DataType.INT32),
        ("Program:Main.Step", DataType.INT16), ("Motor.Speed", DataType.FLOAT32),
        ("Motor.Run", DataType.BOOLEAN), ("Cell.Sub.Deep", DataType.UINT8),
    ]:
        definitions.declare(parse_logix_address(address), data_type)
    table = definitions.table
    assert set(table) == {"Level", "Arr", "Program:Main.Step", "Motor", "Cell"}
    assert table["Arr"]["data_type"] == "DINT" and table["Arr"]["tag_type"] == "atomic"
    members = table["Motor"]["data_type"]["internal_tags"]
    assert {name: m["data_type"] for name, m in members.items()} == {"Speed": "REAL", "Run": "BOOL"}
    deep = table["Cell"]["data_type"]["internal_tags"]["Sub"]["data_type"]["internal_tags"]["Deep"]
    assert deep["data_type"] == "USINT"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("Arr[1]", DataType.FLOAT32), ("Arr[2]", DataType.INT32)),
        (("Motor", DataType.FLOAT32), ("Motor.Speed", DataType.FLOAT32)),
        (("Motor.Speed", DataType.FLOAT32), ("Motor", DataType.FLOAT32)),
    ],
)
def test_conflicting_definitions_are_refused_naming_the_address(
    first: tuple[str, DataType], second: tuple[str, DataType]
) -> None:
    definitions = TagDefinitions()
    definitions.declare(parse_logix_address(first[0]), first[1])
    with pytest.raises(TagTypeError, match=re.escape(repr(second[0])) + ".*another tag"):
        definitions.declare(parse_logix_address(second[0]), second[1])


def test_a_missing_type_is_refused_with_upload_tags_false() -> None:
    with pytest.raises(TagTypeError, match="upload_tags = false"):
        TagDefinitions().declare(parse_logix_address("Level"), None)
