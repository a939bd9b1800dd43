"""What a security campaign broke in the HTTP sign-in, against real gateway processes and real HTTP
requests: failed sign-ins count per user name and client address, so nobody locks out another user,
nor the same user at another address; X-Forwarded-For is believed from ``[api] trusted_proxies``
only; TLS files that do not belong together stop the gateway with one line naming them, before it
listens; plain HTTP (and an OPC UA server without certificate) on an address other machines reach
is served with a warning."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.api.conftest import APP, PASSWORD, ApiGateway, start_api_gateway
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until


def _sign_in(api: ApiGateway, user: str, password: str = PASSWORD,
             forwarded_for: str | None = None) -> requests.Response:
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
    return requests.post(f"{api.url}/api/v1/session", json={"user": user, "password": password}, headers=headers,
                         timeout=20)


def test_x_forwarded_for_from_a_peer_that_is_no_trusted_proxy_is_ignored(api: ApiGateway) -> None:
    for n in range(5):  # one machine pretending to be five
        assert _sign_in(api, "engineer-user", f"guess {n}", forwarded_for=f"203.0.113.{n}").status_code == 401
    waits = _sign_in(api, "engineer-user", forwarded_for="203.0.113.99")
    assert waits.status_code == 429, waits.text  # the fifth failure of (engineer-user, 127.0.0.1): it waits
    log = api.gateway.log_text()
    assert "sign-in of 'engineer-user' from 127.0.0.1 refused: wrong user name or password" in log
    assert "203.0.113." not in log
    wait_until(lambda: _sign_in(api, "engineer-user").status_code == 200, 20, interval_s=0.5,
               message="the right password after the wait")


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ApiGateway]:
    """A gateway behind a reverse proxy on this machine: 127.0.0.0/8 is a trusted proxy."""
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("api-proxied")), zygote=exchange_zygote)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write('\n[api]\ntrusted_proxies = ["127.0.0.0/8", "10.99.0.1"]\n')
    yield from start_api_gateway(env)


def test_failed_sign_ins_of_one_user_never_lock_out_another_at_the_same_address(proxied: ApiGateway) -> None:
    for n in range(8):
        refused = _sign_in(proxied, "mallory", f"guess {n}", forwarded_for="10.0.0.1")
        assert refused.status_code == (401 if n < 5 else 429), (n, refused.text)
    assert _sign_in(proxied, "operator-user", forwarded_for="10.0.0.1").status_code == 200


def test_many_addresses_failing_for_one_user_lock_out_only_themselves(proxied: ApiGateway) -> None:
    for peer in range(1, 5):
        for n in range(5):
            assert _sign_in(proxied, "viewer-user", f"guess {n}", forwarded_for=f"10.0.1.{peer}").status_code == 401
    assert _sign_in(proxied, "viewer-user", forwarded_for="10.0.1.9").status_code == 200  # another address: at once
    waits = _sign_in(proxied, "viewer-user", forwarded_for="10.0.1.4")  # its fifth failure was just now
    assert waits.status_code == 429 and 1 <= int(waits.headers["retry-after"]) <= 5, waits.text
    assert "sign-in of 'viewer-user' from 10.0.1.4 refused: too many failed sign-ins" in proxied.gateway.log_text()


def test_the_client_is_read_from_the_right_past_the_trusted_proxies(proxied: ApiGateway) -> None:
    # 198.51.100.7 is what the client itself wrote; 10.20.0.3 is who connected to the trusted proxy 10.99.0.1
    _sign_in(proxied, "admin-user", "wrong", forwarded_for="198.51.100.7, 10.20.0.3, 10.99.0.1")
    _sign_in(proxied, "admin-user", "wrong", forwarded_for="not an address")
    log = proxied.gateway.log_text()
    assert "sign-in of 'admin-user' from 10.20.0.3 refused" in log
    assert "sign-in of 'admin-user' from 127.0.0.1 refused" in log  # a malformed header: the proxy itself
    assert "198.51.100.7" not in log


def test_a_sign_in_from_another_sites_page_is_refused(api: ApiGateway) -> None:
    """Login CSRF over the API: a browser says where the request came from (Sec-Fetch-Site); a
    form of another site cannot send JSON (a text/plain body that looks like it is not read as JSON)."""
    for site in ("cross-site", "same-site"):
        refused = requests.post(f"{api.url}/api/v1/session", json={"user": "viewer-user", "password": PASSWORD},
                                headers={"Sec-Fetch-Site": site}, timeout=20)
        assert refused.status_code == 403 and "another site" in refused.json()["error"], (site, refused.text)
        assert "exchange_session" not in refused.headers.get("set-cookie", "")
    as_form_text = requests.post(f"{api.url}/api/v1/session", headers={"Content-Type": "text/plain"},
                                 data=f'{{"user": "viewer-user", "password": "{PASSWORD}"}}', timeout=20)
    assert as_form_text.status_code in (400, 415, 422) and "set-cookie" not in as_form_text.headers, as_form_text.text
    same = requests.post(f"{api.url}/api/v1/session", json={"user": "viewer-user", "password": PASSWORD},
                         headers={"Sec-Fetch-Site": "same-origin"}, timeout=20)
    assert same.status_code == 200, same.text  # the console's own page, and programs (no header), sign in


# ----- TLS and plain HTTP ------------------------------------------------------------------------------
def _certificate(folder: Path, name: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / f"{name}.pem", folder / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def test_a_tls_key_that_is_not_the_certificates_stops_the_gateway_with_one_line(
        tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    env.write_app("api_app", APP)
    cert, _ = _certificate(tmp_path, "gateway")
    _, other_key = _certificate(tmp_path, "other")
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write(f'\n[api]\nlisten = "127.0.0.1:0"\ncert = "{cert}"\nkey = "{other_key}"\n')
    gateway = env.gateway()
    gateway.spawn()
    assert gateway.proc is not None
    assert gateway.proc.wait(60) == 1
    log = gateway.log_text()
    assert (f"error: [api] TLS: cert {cert} and key {other_key}: the key is not the certificate's: the two files "
            "do not belong together") in log
    assert "Traceback" not in log and "address in use" not in log and "listening" not in log


def test_plain_http_and_opc_ua_without_certificate_on_the_network_are_served_with_a_warning(
        tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    env.write_app("api_app", APP)
    with env.gateway("--api", "0.0.0.0:0", "--opcua-server", "opc.tcp://0.0.0.0:0/exchange/") as gateway:
        gateway.start(timeout_s=60)
        log = gateway.log_text()
    assert re.search(r"WARNING .*the API serves plain HTTP on http://0\.0\.0\.0:\d+, which other machines reach: "
                     r"passwords, session cookies and tokens cross the network in clear text", log), log
    assert re.search(r"WARNING .*the OPC UA server on opc\.tcp://0\.0\.0\.0:\d+/exchange/ offers only its unsecured "
                     r"endpoint: user names and passwords cross the network in clear text", log), log


def test_on_this_machine_only_plain_http_is_served_without_a_warning(api: ApiGateway) -> None:
    assert "plain HTTP" not in api.gateway.log_text()
