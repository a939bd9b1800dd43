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


# An OPC UA gateway's start-up checks (the tag table, the device's settings), then its first driver.
OPCUA_CHECKS_FIRST = """
import json, sys
from exchange._config import config_from_dict
from exchange._tags.service import TagService
config = config_from_dict({"devices": {"plc": {"driver": "opcua", "url": "opc.tcp://127.0.0.1:4840/"}},
                           "tags": {"[p]A": {"device": "plc", "address": "ns=2;s=Line1.Tank.Level"},
                                    "[p]B": {"device": "plc", "address": "nsu=urn:plant;i=1001"}}}, env={})
service = TagService(config)
checked = sorted({m.split(".")[0] for m in sys.modules} & {"asyncua", "cryptography"})
service.driver("plc")
driven = sorted({m.split(".")[0] for m in sys.modules} & {"asyncua", "cryptography"})
service.close()
print(json.dumps({"checked": checked, "driven": driven}))
"""


def test_the_start_up_checks_of_an_opc_ua_device_do_not_import_asyncua() -> None:
    """A gateway checks its OPC UA devices' settings and addresses before it recovers its runs: that
    takes no asyncua (over half a second to import); the first driver made brings it."""
    done = subprocess.run([sys.executable, "-c", OPCUA_CHECKS_FIRST], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["checked"] == []
    assert "asyncua" in seen["driven"]


@pytest.mark.parametrize("address", ["ns=2;s=", "ns=70000;i=1", "ns=2;i=4294967296", "ns=1;g=not-a-guid",
                                     "ns=1;b=***", "nsu= ;s=A", "x=1", ""])
def test_a_bad_opc_ua_address_is_refused_at_the_start_up_check(address: str) -> None:
    device = DeviceConfig("plc", "opcua", {"driver": "opcua", "url": "opc.tcp://127.0.0.1:4840/"})
    with pytest.raises(ConfigError, match=r"device 'plc' \(opcua\): .*OPC UA address"):
        registry.validate_address(device, address, None)
