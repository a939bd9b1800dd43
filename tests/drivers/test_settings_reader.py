"""The shared ``[devices.NAME]`` reader: values come back typed, bad ones name the device, key and value."""

from __future__ import annotations

from typing import Any

import pytest

from exchange._config import DeviceConfig
from exchange._drivers.settings_reader import SettingsReader
from exchange.errors import ConfigError

KEYS = {"host", "port", "retries", "fast", "mode", "label", "wait_ms"}


def reader(dotted: bool = True, **settings: Any) -> SettingsReader:
    return SettingsReader(DeviceConfig("plc", "demo", {"driver": "demo", **settings}), KEYS, "demo", dotted=dotted)


def test_values_and_defaults_come_back_typed() -> None:
    read = reader(host=" 10.0.0.5 ", port=1502, fast=False, mode="Fast")
    read.check_unknown()  # "driver" is always known
    assert read.host(bare=True) == "10.0.0.5"
    assert (read.port(502), read.integer("retries", 3, 0, 9)) == (1502, 3)
    assert (read.boolean("fast", True), read.boolean("absent", True)) == (False, True)
    assert read.choice("mode", ("Slow", "Fast"), "Slow") == "Fast"
    assert (read.string("label"), read.positive_int("wait_ms", 0, allow_zero=True)) == (None, 0)


@pytest.mark.parametrize(
    ("settings", "call", "message"),
    [
        ({"hots": "x", "zz": 1}, lambda r: r.check_unknown(),
         "devices.plc: unknown demo key(s) hots, zz; did you mean 'host'? "
         "(known: comm_timeout_s, fast, host, label, mode, port, retries, wait_ms)"),
        ({}, lambda r: r.host(), "devices.plc.host must be a non-empty string, got None"),
        ({"host": "h:44818"}, lambda r: r.host(bare=True),
         "devices.plc.host must be a host name or IPv4 address, got 'h:44818'"),
        ({"port": True}, lambda r: r.port(502), "devices.plc.port must be an integer from 1 to 65535, got True"),
        ({"retries": 10}, lambda r: r.integer("retries", 3, 0, 9),
         "devices.plc.retries must be an integer from 0 to 9, got 10"),
        ({"wait_ms": 0}, lambda r: r.positive_int("wait_ms", 5),
         "devices.plc.wait_ms must be a positive integer (milliseconds), got 0"),
        ({"fast": "yes"}, lambda r: r.boolean("fast", True), "devices.plc.fast must be true or false, got 'yes'"),
        ({"mode": "medium"}, lambda r: r.choice("mode", ("slow", "fast"), "slow"),
         "devices.plc.mode must be one of slow, fast, got 'medium'"),
        ({"mode": "Fast"}, lambda r: r.choice("mode", ("slow", "fast"), "slow"),
         "devices.plc.mode must be one of slow, fast, got 'Fast' (write 'fast')"),
        ({"mode": "fast "}, lambda r: r.choice("mode", ("slow", "fast"), "slow"),
         "devices.plc.mode must be one of slow, fast, got 'fast ' (write 'fast')"),
        ({"label": ""}, lambda r: r.string("label"), "devices.plc.label must be a non-empty string"),
        ({}, lambda r: r.check_at_least("wait_ms", 100, "retries", 500),
         "devices.plc.wait_ms must be >= retries (500), got 100"),
    ],
)
def test_bad_values_name_the_device_key_and_value(settings: dict[str, Any], call: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        call(reader(**settings))
    assert str(caught.value) == message


def test_labelled_style_names_the_device_and_protocol_first() -> None:
    with pytest.raises(ConfigError) as caught:
        reader(dotted=False, hots="x").check_unknown()
    assert str(caught.value).startswith(
        "device 'plc' (demo): unknown setting(s) hots; did you mean 'host'? (known: comm_timeout_s, fast, host,"
    )
    with pytest.raises(ConfigError) as caught:
        reader(dotted=False, port=0).port(4840)
    assert str(caught.value) == "device 'plc' (demo): port must be an integer from 1 to 65535, got 0"
