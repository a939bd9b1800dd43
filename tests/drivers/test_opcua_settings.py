"""OPC UA addresses and device settings: bad input gets a clear error naming what is wrong."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._drivers.opcua import OPCUA as opcua
from exchange._drivers.opcua.encode import coerce
from exchange._drivers.opcua.settings import parse_settings
from exchange._drivers.opcua.values import parse_node_id, quality_of, tidy_float32
from exchange._values import DataType, Quality
from exchange.errors import ConfigError, TagPathError, TagRangeError, TagTypeError
from simulators.servers.opcua import write_self_signed_certificate


@pytest.mark.parametrize(
    ("address", "identifier", "index"),
    [
        ("ns=2;s=Line1.Tank.Level", "Line1.Tank.Level", 2),
        ("ns=2;i=1001", 1001, 2),
        ("i=2258", 2258, 0),
        ("ns=3;s=with;semicolon", "with;semicolon", 3),
        (" ns=2;s=Padded ", "Padded", 2),
    ],
)
def test_valid_node_ids(address: str, identifier: Any, index: int) -> None:
    parsed = parse_node_id(address)
    assert (parsed.node_id.Identifier, parsed.node_id.NamespaceIndex) == (identifier, index)
    assert opcua.parse_address(address, None) is None
    assert opcua.parse_address(address, DataType.INT16) is DataType.INT16


def test_namespace_uri_address_keeps_the_uri() -> None:
    parsed = parse_node_id("nsu=urn:exchange:plant;s=Tank.Level")
    assert parsed.namespace_uri == "urn:exchange:plant"
    assert parsed.resolve(["http://opcfoundation.org/UA/", "urn:server", "urn:exchange:plant"]) is not None
    assert parsed.resolve(["http://opcfoundation.org/UA/"]) is None


@pytest.mark.parametrize(
    ("address", "fault"),
    [
        ("Line1.Tank.Level", "is not a NodeId"),
        ("ns=x;s=Level", "namespace index 'x' is not a number"),
        ("ns=70000;s=Level", "namespace index '70000'"),
        ("ns=2;s=", "empty identifier"),
        ("ns=2;i=abc", "numeric identifier 'abc'"),
        ("ns=2;g=not-a-guid", "is not a GUID"),
        ("ns=2;b=@@@", "is not base64"),
        ("nsu=;s=Level", "needs a namespace URI"),
        ("ns=2;x=Level", "is not a NodeId"),
    ],
)
def test_malformed_node_ids_name_the_address(address: str, fault: str) -> None:
    with pytest.raises(TagPathError) as caught:
        opcua.parse_address(address, None)
    assert repr(address) in str(caught.value) and fault in str(caught.value)


def test_registry_names_device_and_address_for_a_malformed_node_id() -> None:
    device = DeviceConfig("line", "opcua", {"driver": "opcua", "url": "opc.tcp://127.0.0.1:4840/"})
    with pytest.raises(ConfigError, match=r"device 'line' \(opcua\).*'ns=2;q=1'"):
        registry.validate_address(device, "ns=2;q=1", None)


def device(**settings: Any) -> DeviceConfig:
    return DeviceConfig("line", "opcua", {"driver": "opcua", **settings})


@pytest.mark.parametrize(
    ("settings", "fault"),
    [
        ({}, "url is required"),
        ({"url": "http://127.0.0.1:4840/"}, "must look like opc.tcp://HOST:PORT/PATH"),
        ({"url": "opc.tcp://127.0.0.1:99999/"}, "is not valid"),
        ({"url": "opc.tcp://h/", "timeout_ms": 0}, "timeout_ms must be a positive integer"),
        ({"url": "opc.tcp://h/", "timeout_ms": "5s"}, "timeout_ms must be a positive integer"),
        ({"url": "opc.tcp://h/", "security_policy": "Basic128"}, "security_policy must be one of"),
        ({"url": "opc.tcp://h/", "security_mode": "Sign"}, "security_mode needs a security_policy"),
        ({"url": "opc.tcp://h/", "security_policy": "Basic256Sha256"}, "needs certificate and private_key"),
        ({"url": "opc.tcp://h/", "security_policy": "basic256sha256"},
         "security_policy must be one of None, Basic256Sha256, Aes128Sha256RsaOaep, Aes256Sha256RsaPss, got "
         "'basic256sha256' (write 'Basic256Sha256')"),
        ({"url": "opc.tcp://h/", "username": "op"}, "username 'op' needs a password"),
        ({"url": "opc.tcp://h/", "password": "x"}, "password is set but username is not"),
        ({"url": "opc.tcp://h/", "certificate": "/nonexistent/client.der", "private_key": "/nonexistent/k.pem"},
         "certificate file '/nonexistent/client.der' cannot be read"),
        ({"url": "opc.tcp://h/", "reconnect_min_ms": 500, "reconnect_max_ms": 100}, "reconnect_max_ms must be"),
        ({"url": "opc.tcp://h/", "secuirty_policy": "None"}, "unknown setting(s) secuirty_policy"),
    ],
)
def test_bad_settings_name_the_device_and_the_key(settings: dict[str, Any], fault: str) -> None:
    with pytest.raises(ConfigError) as caught:
        opcua.create(device(**settings))
    assert "device 'line' (opcua)" in str(caught.value) and fault in str(caught.value)
    with pytest.raises(ConfigError):
        opcua.validate_settings(device(**settings))


def test_defaults_and_certificate_uri(tmp_path: Path) -> None:
    plain = parse_settings(device(url="opc.tcp://plc.local/plant/"))
    assert plain.url == "opc.tcp://plc.local:4840/plant/"  # the OPC UA default port
    assert (plain.timeout_ms, plain.publishing_interval_ms, plain.security_policy) == (5000, 0, "None")
    assert plain.application_uri == "urn:exchange:line"
    cert, key = write_self_signed_certificate(tmp_path / "c.der", tmp_path / "k.pem", "urn:acme:gw", server=False)
    secured = parse_settings(device(url="opc.tcp://h:4840/", security_policy="Basic256Sha256",
                                    certificate=str(cert), private_key=str(key)))
    assert secured.security_policy == "Basic256Sha256" and secured.security_mode == "SignAndEncrypt"
    assert secured.application_uri == "urn:acme:gw"  # taken from the certificate
    assert secured.certificate is not None and secured.certificate.extension == "der"
    assert secured.private_key is not None and secured.private_key.extension == "pem"


@pytest.mark.parametrize(
    ("value", "variant", "error", "fragment"),
    [
        (True, "Int16", TagTypeError, "True is a boolean, not a number (the node is Int16"),
        (False, "Double", TagTypeError, "is a boolean, not a number"),
        (1, "Boolean", TagTypeError, "1 is a number, not a Boolean"),
        (10**400, "Double", TagRangeError, "outside the Double range"),
        ("nan", "Float", TagRangeError, "not a finite number"),
    ],
)
def test_coerce_refuses_what_would_surprise_the_plant(value: Any, variant: str, error: type, fragment: str) -> None:
    from asyncua import ua

    with pytest.raises(error, match=re.escape(fragment)):
        coerce(value, getattr(ua.VariantType, variant), "x")


def test_status_codes_map_to_ignition_qualities() -> None:
    assert quality_of(0) is Quality.GOOD
    assert quality_of(0x80340000) is Quality.BAD_NOT_FOUND  # BadNodeIdUnknown
    assert quality_of(0x801F0000) is Quality.BAD_ACCESS_DENIED  # BadUserAccessDenied
    assert quality_of(0x80740000) is Quality.ERROR_TYPE_CONVERSION  # BadTypeMismatch
    assert quality_of(0x808A0000) is Quality.BAD_NOT_CONNECTED  # BadNotConnected
    assert quality_of(0x40000000) is Quality.UNCERTAIN
    assert quality_of(0x80000000) is Quality.BAD


def test_float32_values_read_back_as_written() -> None:
    import struct

    for written in (0.1, 1.1, -12.5, 3.4e38, 1e-7):
        stored = struct.unpack("<f", struct.pack("<f", written))[0]
        assert tidy_float32(stored) == written


def test_coerce_accepts_what_converts_exactly() -> None:
    from asyncua import ua

    assert coerce(5.0, ua.VariantType.Int16, "x").Value == 5
    assert coerce("12", ua.VariantType.Int32, "x").Value == 12
    assert coerce(1, ua.VariantType.Boolean, "x", bool_numbers=True).Value is True
    assert coerce(True, ua.VariantType.Int16, "x", bool_numbers=True).Value == 1
    assert coerce(False, ua.VariantType.Double, "x", bool_numbers=True).Value == 0.0
    assert coerce(3, ua.VariantType.Float, "x").Value == 3.0
    assert coerce(3, ua.VariantType.Float, "x").VariantType == ua.VariantType.Float
