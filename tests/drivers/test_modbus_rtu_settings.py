"""The RTU transports' settings and the tags' layout keys: every refusal names the key and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from exchange._config import DeviceConfig, config_from_dict
from exchange._drivers import registry
from exchange._drivers.modbus.settings import ModbusSettings
from exchange._tags.table import TagTable
from exchange.errors import ConfigError

SERIAL = {"driver": "modbus", "transport": "serial", "serial_port": "/dev/ttyUSB0"}


def settings(**raw: Any) -> ModbusSettings:
    return ModbusSettings.from_device(DeviceConfig("drive7", "modbus", {"driver": "modbus", **raw}))


def test_the_designs_serial_device_is_accepted() -> None:
    s = settings(transport="serial", serial_port="/dev/ttyUSB0", baudrate=19200, unit_id=3, byte_order="little")
    assert (s.transport, s.serial_port, s.baudrate, s.parity, s.stopbits, s.bytesize) == (
        "serial", "/dev/ttyUSB0", 19200, "N", 1, 8)
    assert s.layout.byte_order == "little" and s.endpoint == "/dev/ttyUSB0"
    assert settings(host="gw", transport="rtu-over-tcp", port=4001).endpoint == "gw:4001 (RTU)"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"transport": "rs485", "host": "h"}, "devices.drive7.transport must be one of tcp, rtu-over-tcp, serial"),
        ({"transport": "serial"}, 'devices.drive7.serial_port must be the serial device, e.g. "/dev/ttyUSB0"'),
        ({**SERIAL, "host": "10.0.0.5"}, 'devices.drive7.host is a key of transport = "tcp" or "rtu-over-tcp"'),
        ({"host": "h", "baudrate": 9600}, 'devices.drive7.baudrate is a key of transport = "serial"'),
        ({**SERIAL, "parity": "X"}, "devices.drive7.parity must be one of N, E, O, got 'X'"),
        ({**SERIAL, "stopbits": 3}, "devices.drive7.stopbits must be an integer from 1 to 2"),
        ({**SERIAL, "bytesize": 7}, "devices.drive7.bytesize must be 8: Modbus RTU frames are 8-bit binary"),
        ({**SERIAL, "baudrate": "fast"}, "devices.drive7.baudrate must be an integer"),
        ({**SERIAL, "unit_id": 0}, "devices.drive7.unit_id must be 1 to 247 on an RTU line: 0 is the broadcast"),
        ({**SERIAL, "unit_id": 250}, "devices.drive7.unit_id must be an integer from 1 to 247"),
        ({**SERIAL, "frame_gap_ms": -1}, "devices.drive7.frame_gap_ms must be a number of milliseconds"),
        ({**SERIAL, "byte_order": "middle"}, "devices.drive7.byte_order must be one of big, little"),
        ({**SERIAL, "mask_write": "no"}, "devices.drive7.mask_write must be true or false"),
        ({**SERIAL, "bytes_order": "big"}, "did you mean 'byte_order'"),
        ({**SERIAL, "late_reply_ms": 0}, "devices.drive7.late_reply_ms must be an integer from 1 to 600000"),
        ({"host": "h", "late_reply_ms": 500}, 'devices.drive7.late_reply_ms is a key of transport = "serial"'),
    ],
)
def test_bad_settings_name_the_key(raw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings(**raw)
    assert fragment in str(refused.value)


def test_the_inter_frame_silence_follows_the_line() -> None:
    assert settings(**SERIAL).gap_s == pytest.approx(3.5 * 10 / 19200)  # 8N1: 10 bits a character
    assert settings(**SERIAL, baudrate=9600, parity="E").gap_s == pytest.approx(3.5 * 11 / 9600)
    assert settings(**SERIAL, baudrate=115200).gap_s == pytest.approx(0.00175)  # fixed above 19,200 baud
    assert settings(host="gw", transport="rtu-over-tcp").gap_s == 0  # the gateway times its own line
    assert settings(**SERIAL, frame_gap_ms=12.5).gap_s == pytest.approx(0.0125)


def test_a_lost_reply_is_waited_for_as_long_as_the_timeout_unless_told() -> None:
    assert settings(**SERIAL, timeout_ms=800).late_reply_s == pytest.approx(0.8)
    assert settings(**SERIAL, timeout_ms=800, late_reply_ms=3000).late_reply_s == pytest.approx(3.0)


def test_devices_on_one_serial_port_must_agree_on_its_settings() -> None:
    first = registry.create_driver(DeviceConfig("drive7", "modbus", {**SERIAL, "unit_id": 3}))
    try:
        with pytest.raises(ConfigError, match=r"devices.drive8.baudrate is 9600 but device 'drive7' on the same "
                                              r"serial_port '/dev/ttyUSB0' has 19200"):
            registry.create_driver(DeviceConfig("drive8", "modbus", {**SERIAL, "unit_id": 4, "baudrate": 9600}))
    finally:
        first.close()


def table(tag: dict[str, Any], driver: str = "modbus") -> TagTable:
    device = {"modbus": {"driver": "modbus", "host": "h"}, "opcua": {"driver": "opcua", "url": "opc.tcp://h:4840/"},
              "enip": {"driver": "enip", "host": "h"}}[driver]
    return TagTable.from_config(config_from_dict({"devices": {"d": device}, "tags": {"[t]A": {"device": "d", **tag}}},
                                                 env={}))


@pytest.mark.parametrize(
    ("tag", "driver", "fragment"),
    [
        ({"address": "HRF1", "byte_order": "middle"}, "modbus", "byte_order must be one of big, little, got 'middle'"),
        ({"address": "HR1", "rmw": True}, "modbus", "rmw applies to a bit of a holding register (e.g. HR10.3)"),
        ({"address": "HR1.3", "rmw": "yes"}, "modbus", "rmw must be true or false"),
        ({"address": "HRS1:4", "word_order": "little"}, "modbus", "word_order: 'HRS1:4' is a string"),
        ({"address": "C1", "byte_order": "little"}, "modbus", "a coil ('C1') is one bit, it has no byte_order"),
        ({"address": "HRF1", "type": "Float32[]"}, "modbus", "a Modbus tag holds one value, not an array"),
        ({"address": "HR1.16"}, "modbus", "a register has bits 0 to 15, not 16"),
        ({"address": "HRF1.3"}, "modbus", "a bit of a register takes no type"),
        ({"address": "HRS1"}, "modbus", "a string needs its length in registers, e.g. HRS1:8"),
        ({"address": "HRS1:124"}, "modbus", "a string spans 1 to 123 registers, not 124"),
        ({"address": "HRF1:4"}, "modbus", "only a string (HRS/IRS) takes a length"),
        ({"address": "HR1.3", "type": "Int16"}, "modbus", "a bit of a register is Boolean, not Int16"),
        ({"address": "ns=2;s=A", "byte_order": "little"}, "opcua", "byte_order: only Modbus tags take"),
        ({"address": "Arr", "type": "REAL[]"}, "enip", "an enip tag holds one value, not an array"),
        ({"address": "ns=2;s=A", "type": "Flot32[]"}, "opcua", "unknown data type 'Flot32'"),
    ],
)
def test_bad_tag_layouts_name_the_tag_and_the_key(tag: dict[str, Any], driver: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as refused:
        table(tag, driver)
    assert "tags.'[t]A'" in str(refused.value)
    assert fragment in str(refused.value)


def test_good_tag_layouts_reach_the_driver_as_point_options() -> None:
    tag = table({"address": "HR10.3", "rmw": True, "byte_order": "little"}).get("[t]A")
    assert tag.point.option("rmw") is True and tag.point.option("byte_order") == "little"
    assert tag.data_type is not None and tag.data_type.value == "Boolean"
    array = table({"address": "ns=2;s=A", "type": "Float32[]"}, "opcua").get("[t]A")
    assert array.array and array.point.array and array.data_type is not None
