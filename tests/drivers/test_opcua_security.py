"""OPC UA security against real asyncua servers that demand it.

One server offers ONLY Basic256Sha256 SignAndEncrypt, requires a user name and password and trusts
only one client certificate; a second offers only Basic256Sha256 Sign. Certificates and keys are
generated at test time (nothing secret is committed).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._drivers.base import Driver, Point
from exchange._values import DataType, Quality
from exchange.errors import ConfigError, DeviceError
from simulators.servers.base import SimPoint
from simulators.servers.opcua import OpcUaSimSecurity, OpcUaSimServer, write_self_signed_certificate

USERS = {"operator": "s3cret"}
LEVEL = Point("[test]Secure/Level", "ns=2;s=Secure.Level", None)
SPEED = Point("[test]Secure/Speed", "ns=2;s=Secure.Speed", None)


@dataclass
class Pki:
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path


@dataclass
class SecureServers:
    pki: Pki
    encrypt: OpcUaSimServer  # Basic256Sha256 SignAndEncrypt only, user+password, one trusted client
    sign: OpcUaSimServer  # Basic256Sha256 Sign only, user+password


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureServers]:
    folder = tmp_path_factory.mktemp("pki")
    server_cert, server_key = write_self_signed_certificate(
        folder / "server.der", folder / "server.pem", "urn:exchange:simulator:opcua", server=True
    )
    client_cert, client_key = write_self_signed_certificate(
        folder / "client.der", folder / "client.pem", "urn:exchange:test:client", server=False
    )
    stranger_cert, stranger_key = write_self_signed_certificate(
        folder / "stranger.der", folder / "stranger.pem", "urn:exchange:test:stranger", server=False
    )
    pki = Pki(server_cert, server_key, client_cert, client_key, stranger_cert, stranger_key)
    points = [SimPoint(LEVEL.address, DataType.FLOAT32, 42.5), SimPoint(SPEED.address, DataType.INT16, 0)]
    encrypt = OpcUaSimServer(points, security=OpcUaSimSecurity(
        certificate=server_cert, private_key=server_key, policies=("Basic256Sha256_SignAndEncrypt",),
        users=USERS, trusted_client_certificates=(client_cert,),
    ))
    sign = OpcUaSimServer(points, security=OpcUaSimSecurity(
        certificate=server_cert, private_key=server_key, policies=("Basic256Sha256_Sign",), users=USERS,
    ))
    encrypt.start()
    try:
        sign.start()
        try:
            yield SecureServers(pki, encrypt, sign)
        finally:
            sign.stop()
    finally:
        encrypt.stop()


def client_settings(server: OpcUaSimServer, pki: Pki, **overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "driver": "opcua",
        "url": server.url,
        "timeout_ms": 3000,
        "security_policy": "Basic256Sha256",
        "security_mode": "SignAndEncrypt",
        "certificate": str(pki.client_cert),
        "private_key": str(pki.client_key),
        "username": "operator",
        "password": USERS["operator"],
    }
    settings.update(overrides)
    return {k: v for k, v in settings.items() if v is not None}


@pytest.fixture
def connect() -> Iterator[Any]:
    made: list[Driver] = []

    def factory(settings: dict[str, Any]) -> Driver:
        driver = registry.create_driver(DeviceConfig("secplc", "opcua", settings))
        made.append(driver)
        return driver

    yield factory
    for driver in made:
        driver.close()


def test_sign_and_encrypt_with_user_and_password_reads_and_writes(secure: SecureServers, connect: Any) -> None:
    driver = connect(client_settings(secure.encrypt, secure.pki, server_certificate=str(secure.pki.server_cert)))
    assert driver.read([LEVEL])[0].value == 42.5
    driver.write([(SPEED, 1200)])
    assert secure.encrypt.get(SPEED.address) == 1200
    assert driver.read([SPEED])[0].value == 1200


def test_sign_only_endpoint_reads_and_writes(secure: SecureServers, connect: Any) -> None:
    driver = connect(client_settings(secure.sign, secure.pki, security_mode="Sign"))
    driver.write([(SPEED, -5)])
    assert secure.sign.get(SPEED.address) == -5
    assert driver.read([LEVEL, SPEED])[1].value == -5


def test_wrong_password_is_a_clear_error_and_fails_fast(secure: SecureServers, connect: Any) -> None:
    driver = connect(client_settings(secure.encrypt, secure.pki, password="not-the-password"))
    before = secure.encrypt.write_count()
    reading = driver.read([LEVEL])[0]
    assert reading.quality is Quality.BAD_ACCESS_DENIED and reading.value is None
    with pytest.raises(DeviceError) as caught:
        driver.write([(SPEED, 1)])
    message = str(caught.value)
    assert "'secplc'" in message and "user 'operator'" in message and "BadUserAccessDenied" in message
    assert "check username and password" in message
    assert "not-the-password" not in message
    assert secure.encrypt.write_count() == before
    started = time.monotonic()
    for _ in range(10):
        assert driver.read([LEVEL])[0].quality is Quality.BAD_ACCESS_DENIED
    assert time.monotonic() - started < 0.5, "a refused login must not be retried on every call"
    with pytest.raises(DeviceError, match="BadUserAccessDenied"):
        driver.subscribe(LEVEL, lambda value: None)


def test_anonymous_login_is_refused_with_a_hint(secure: SecureServers, connect: Any) -> None:
    driver = connect(client_settings(secure.encrypt, secure.pki, username=None, password=None))
    with pytest.raises(DeviceError, match=r"refused an anonymous login \(BadIdentityTokenRejected\).*username"):
        driver.write([(SPEED, 1)])


def test_mode_the_server_does_not_offer_is_named(secure: SecureServers, connect: Any) -> None:
    driver = connect(client_settings(secure.encrypt, secure.pki, security_mode="Sign"))
    with pytest.raises(DeviceError, match="no endpoint with security_policy 'Basic256Sha256' and security_mode 'Sign'"):
        driver.write([(SPEED, 1)])


def test_no_security_against_a_secured_server_is_named(secure: SecureServers, connect: Any) -> None:
    settings = client_settings(secure.encrypt, secure.pki, security_policy=None, security_mode=None,
                               certificate=None, private_key=None)
    driver = connect(settings)
    with pytest.raises(DeviceError, match=r"no endpoint without security \(security_policy 'None'\)"):
        driver.write([(SPEED, 1)])


def test_untrusted_client_certificate_is_refused(secure: SecureServers, connect: Any) -> None:
    driver = connect(client_settings(secure.encrypt, secure.pki, certificate=str(secure.pki.stranger_cert),
                                     private_key=str(secure.pki.stranger_key)))
    with pytest.raises(DeviceError, match=r"refused the secure channel \(BadCertificateUntrusted\)"):
        driver.write([(SPEED, 1)])


def test_key_that_does_not_belong_to_the_certificate_is_a_config_error(secure: SecureServers) -> None:
    settings = client_settings(secure.encrypt, secure.pki, private_key=str(secure.pki.stranger_key))
    with pytest.raises(ConfigError, match="'secplc'.*private_key does not belong to certificate"):
        registry.create_driver(DeviceConfig("secplc", "opcua", settings))
