"""The registry: every driver name of the config maps to its protocol, each imported only when used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from exchange._config import DRIVERS, DeviceConfig
from exchange._drivers import registry
from exchange.errors import ConfigError

# A Modbus-only gateway's start: the tag table, the settings checks and the device's driver.
MODBUS_ONLY = """
import json, sys
from exchange._drivers import registry
before = sorted(m for m in sys.modules if m.startswith("exchange._drivers."))
from exchange._config import config_from_dict
from exchange._tags.service import TagService
config = config_from_dict({"devices": {"plc": {"driver": "modbus", "host": "127.0.0.1"}},
                           "tags": {"[p]A": {"device": "plc", "address": "HR1"}}}, env={})
service = TagService(config)
service.driver("plc")
service.close()
print(json.dumps({
    "before": before,
    "libraries": sorted({m.split(".")[0] for m in sys.modules} & {"asyncua", "pycomm3", "pymodbus"}),
    "protocols": sorted({m.split(".")[2] for m in sys.modules if m.startswith("exchange._drivers.")
                         and m.count(".") >= 2} & {"modbus", "opcua", "enip"}),
}))
"""


def test_every_driver_name_of_the_config_has_its_protocol() -> None:
    assert list(registry.PROTOCOLS) == list(DRIVERS)
    for name in DRIVERS:
        protocol = registry.protocol(DeviceConfig("d", name, {"driver": name}))
        assert protocol.name == name


def test_an_unknown_driver_name_is_a_config_error_naming_the_device() -> None:
    with pytest.raises(ConfigError, match=r"devices\.plc\.driver must be one of opcua, modbus, enip, got 'profibus'"):
        registry.create_driver(DeviceConfig("plc", "profibus", {"driver": "profibus"}))


def test_a_protocol_is_imported_only_when_a_device_uses_it() -> None:
    """A gateway without OPC UA or EtherNet/IP devices never imports asyncua or pycomm3."""
    done = subprocess.run([sys.executable, "-c", MODBUS_ONLY], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == ["exchange._drivers.base", "exchange._drivers.registry"]  # the registry alone: none
    assert seen["libraries"] == ["pymodbus"]
    assert seen["protocols"] == ["modbus"]
