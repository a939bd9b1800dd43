"""The tag table: every configured tag validated once, at load."""

from __future__ import annotations

from typing import Any

import pytest

from exchange._config import Config, DeviceConfig, TagConfig, config_from_dict
from exchange._tags.table import TagTable
from exchange._values import DataType
from exchange.errors import (
    ConfigError,
    ReadOnlyTag,
    TagPathError,
    TagRangeError,
    TagTypeError,
    UnknownDevice,
    UnknownTag,
)


def config(tags: dict[str, dict[str, Any]], **device: Any) -> Config:
    settings = {"driver": "modbus", "host": "127.0.0.1", "port": 5020, **device}
    return config_from_dict({"devices": {"plc": settings}, "tags": tags}, env={})


def test_tags_are_validated_into_definitions() -> None:
    table = TagTable.from_config(
        config(
            {
                "[plant]Tank/Level": {"device": "plc", "address": "HRF1", "access": "ro"},
                "[plant]Tank/Setpoint": {"device": "plc", "address": "HR3", "type": "REAL", "min": 0, "max": 100},
                "[plant]Tank/Inflow": {"device": "plc", "address": "IR1"},
                "[plant]Valve/Cmd": {"device": "plc", "address": "C1"},
            }
        )
    )
    level = table.get("[PLANT]tank/level")
    assert (level.path, level.device, level.address, level.access) == ("[plant]Tank/Level", "plc", "HRF1", "ro")
    assert level.data_type is DataType.FLOAT32
    setpoint = table.get("[plant]Tank/Setpoint")
    assert setpoint.data_type is DataType.FLOAT32 and (setpoint.min_value, setpoint.max_value) == (0, 100)
    assert table.get("[plant]Valve/Cmd").data_type is DataType.BOOLEAN
    inflow = table.get("[plant]Tank/Inflow")
    assert inflow.access == "rw" and not inflow.writable
    with pytest.raises(ReadOnlyTag, match="cannot be written over its protocol"):
        inflow.check_writable()
    with pytest.raises(ReadOnlyTag, match='read-only \\(access = "ro"\\)'):
        level.check_writable()
    assert len(table) == 4


def test_unknown_and_malformed_lookups() -> None:
    table = TagTable.from_config(config({"[plant]Tank/Level": {"device": "plc", "address": "HRF1"}}))
    with pytest.raises(UnknownTag, match="did you mean '\\[plant\\]Tank/Level'"):
        table.get("[plant]Tank/Levle")
    with pytest.raises(TagPathError):
        table.get("Tank/Level")


@pytest.mark.parametrize(
    ("tag", "fragment"),
    [
        ({"device": "plc", "address": "HRX1"}, "'HRX1' is not valid"),
        ({"device": "plc", "address": "HRF1", "type": "Int16"}, "is Float32 but the tag's type is Int16"),
        ({"device": "plc", "address": "HR0"}, "numbers start at 1"),
        ({"device": "plc", "address": "HR1", "type": "Complex"}, "unknown data type 'Complex'"),
        ({"device": "plc", "address": "HR1", "min": 10, "max": 5}, "min 10 is above max 5"),
    ],
)
def test_bad_tags_are_config_errors_naming_tag_device_and_address(tag: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        TagTable.from_config(config({"[plant]Tank/Level": tag}))
    message = str(caught.value)
    assert fragment in message
    assert "[plant]Tank/Level" in message


def test_zero_based_device_accepts_address_zero() -> None:
    table = TagTable.from_config(config({"[p]A": {"device": "plc", "address": "HR0"}}, zero_based=True))
    assert table.get("[p]A").address == "HR0"


def test_malformed_path_duplicate_case_and_unknown_device() -> None:
    with pytest.raises(ConfigError, match="must start with a \\[provider\\]"):
        TagTable.from_config(config({"Tank/Level": {"device": "plc", "address": "HR1"}}))
    with pytest.raises(ConfigError, match="same path"):
        TagTable.from_config(
            config({"[p]Tank": {"device": "plc", "address": "HR1"}, "[P]tank": {"device": "plc", "address": "HR2"}})
        )
    devices = {"plc": DeviceConfig("plc", "modbus", {"driver": "modbus", "host": "127.0.0.1"})}
    tags = {"[p]A": TagConfig("[p]A", "nowhere", "HR1")}
    with pytest.raises(UnknownDevice, match="device 'nowhere' is not configured \\(devices: plc\\)"):
        TagTable.from_config(Config(devices=devices, tags=tags))


def test_an_untyped_tag_with_a_range_refuses_text_it_could_not_hold_to_the_range() -> None:
    """OPC UA tags without ``type`` are converted by the device's type later: text like "150" would
    pass ``max = 100`` unchecked, so a tag with min/max takes numbers only."""
    table = TagTable.from_config(config_from_dict({
        "devices": {"ua": {"driver": "opcua", "url": "opc.tcp://127.0.0.1:4840/"}},
        "tags": {"[p]Speed": {"device": "ua", "address": "ns=2;s=Speed", "max": 100}},
    }, env={}))
    tag = table.get("[p]Speed")
    assert tag.data_type is None
    with pytest.raises(TagTypeError, match="has a min/max, so it takes a number, got the text '150'"):
        tag.convert("150")
    with pytest.raises(TagRangeError, match="above the tag's max 100"):
        tag.convert(150)
    assert tag.convert(50) == 50
