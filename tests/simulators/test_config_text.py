"""The printed config: it parses with Exchange's own loader and maps every plant point exactly once."""

from __future__ import annotations

import tomllib

import pytest

from exchange._config import config_from_dict
from exchange._values import parse_data_type
from simulators.config_text import SERIAL_PORT, render_config
from simulators.plant import POINTS
from simulators.protocol_map import address, assign_areas, parse_protocols

PORTS = {"modbus": 15020, "opcua": 14840, "enip": 14818}


def test_default_split_parses_and_maps_each_area_to_its_protocol() -> None:
    text = render_config("127.0.0.1", PORTS, assign_areas(("modbus", "opcua", "enip")))
    config = config_from_dict(tomllib.loads(text))
    assert set(config.devices) == {"sim_modbus", "sim_opcua", "sim_enip"}
    assert config.devices["sim_modbus"].settings["port"] == 15020
    assert config.devices["sim_opcua"].settings["url"] == "opc.tcp://127.0.0.1:14840/plant/"
    assert config.devices["sim_enip"].settings["upload_tags"] is False
    # every point, and OPC UA's extras with the mixer: an array tag and the object of its method
    extras = {"[plant]Line1/Mixer/Profile", "[plant]Line1/Mixer/Control"}
    assert set(config.tags) == {f"[plant]{p.path}" for p in POINTS} | extras
    profile = config.tags["[plant]Line1/Mixer/Profile"]
    assert (profile.device, profile.address, profile.data_type) == (
        "sim_opcua", "ns=2;s=Line1.Mixer.Profile", "Int16[5]")
    level = config.tags["[plant]Line1/Tank/Level"]
    assert (level.device, level.address, level.access) == ("sim_modbus", "IRF1", "ro")
    speed = config.tags["[plant]Line1/Mixer/Speed"]
    assert (speed.device, speed.address, speed.access) == ("sim_opcua", "ns=2;s=Line1.Mixer.Speed", "rw")
    assert (speed.min_value, speed.max_value) == (0.0, 1500.0)
    setpoint = config.tags["[plant]Line1/Heater/Setpoint"]
    assert (setpoint.device, setpoint.address, setpoint.data_type) == ("sim_enip", "Heater_Setpoint", "REAL")


def test_a_modbus_device_on_a_serial_line_has_the_serial_keys_instead_of_host_and_port() -> None:
    text = render_config("127.0.0.1", PORTS, assign_areas(["modbus"]), modbus_transport="serial")
    settings = dict(config_from_dict(tomllib.loads(text)).devices["sim_modbus"].settings)
    assert {k: settings.get(k) for k in ("transport", "serial_port", "baudrate", "host", "port")} == {
        "transport": "serial", "serial_port": SERIAL_PORT, "baudrate": 19200, "host": None, "port": None}
    gateway = render_config("127.0.0.1", PORTS, assign_areas(["modbus"]), modbus_transport="rtu-over-tcp")
    settings = dict(config_from_dict(tomllib.loads(gateway)).devices["sim_modbus"].settings)
    assert (settings["transport"], settings["port"]) == ("rtu-over-tcp", 15020)
    assert "Mixer/Profile" not in text  # the extras are OPC UA's
    with pytest.raises(ValueError, match="unknown modbus transport 'rtu'"):
        render_config("127.0.0.1", PORTS, assign_areas(["modbus"]), modbus_transport="rtu")


def test_every_enip_tag_carries_a_type_matching_the_point() -> None:
    config = config_from_dict(tomllib.loads(render_config("127.0.0.1", PORTS, assign_areas(["enip"]))))
    assert set(config.devices) == {"sim_enip"}
    for point in POINTS:
        tag = config.tags[f"[plant]{point.path}"]
        assert tag.device == "sim_enip" and tag.data_type is not None
        assert parse_data_type(tag.data_type) is point.data_type
        assert tag.access == ("rw" if point.writable else "ro")


@pytest.mark.parametrize("protocol", ["modbus", "opcua", "enip"])
def test_addresses_are_unique_per_protocol(protocol: str) -> None:
    addresses = [address(protocol, p.path) for p in POINTS]
    assert len(set(addresses)) == len(addresses)


def test_modbus_registers_of_32_bit_values_do_not_overlap() -> None:
    used: dict[tuple[str, int], str] = {}
    for point in POINTS:
        addr = address("modbus", point.path)
        table = "".join(c for c in addr if c.isalpha())
        start = int(addr[len(table):])
        width = 2 if table.endswith("F") else 1
        for reg in range(start, start + width):
            key = (table.rstrip("F"), reg)
            assert key not in used, f"{addr} overlaps {used[key]}"
            used[key] = addr


def test_left_out_protocols_hand_their_areas_to_the_first_chosen() -> None:
    assert assign_areas(["opcua", "modbus"]) == {"Tank": "modbus", "Mixer": "opcua", "Heater": "opcua"}
    assert parse_protocols(" OPCUA, modbus,opcua ") == ("opcua", "modbus")


@pytest.mark.parametrize(("text", "message"), [("modbus,profibus", "unknown protocol 'profibus'"),
                                                (" , ", "no protocol chosen")])
def test_bad_protocol_lists_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_protocols(text)


def test_a_missing_port_is_named() -> None:
    with pytest.raises(ValueError, match="no port for the enip server"):
        render_config("127.0.0.1", {"modbus": 1, "opcua": 2}, assign_areas(("modbus", "opcua", "enip")))


def test_a_wildcard_listen_address_is_printed_as_the_loopback() -> None:
    config = config_from_dict(tomllib.loads(render_config("0.0.0.0", PORTS, assign_areas(["modbus", "opcua"]))))
    assert config.devices["sim_modbus"].settings["host"] == "127.0.0.1"
    assert config.devices["sim_opcua"].settings["url"] == "opc.tcp://127.0.0.1:14840/plant/"
