"""HttpClient against a real HTTP server on 127.0.0.1: answers, classification, Retry-After, keys."""

from __future__ import annotations

import datetime as dt
import email.utils
import ipaddress
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange._config import config_from_dict
from exchange._engine.execution.retry import RetryPolicy
from exchange._integrations.http import (
    RETRY_AFTER_LIMIT_SECONDS,
    HttpClient,
    HttpRequestError,
    HttpRetryableStatus,
    parse_retry_after,
)
from exchange.errors import CommunicationError, FatalError, HttpStatusError, RetryableError
from exchange.workflows.steps.http import HTTP_STEP_OPTIONS
from tests.conftest import free_port
from tests.integrations.http_server import Reply, ScriptedHttpServer


@pytest.fixture
def client() -> Iterator[HttpClient]:
    http = HttpClient.from_config(config_from_dict({}))
    yield http
    http.close()


def test_get_json(client: HttpClient, http_server: ScriptedHttpServer) -> None:
    http_server.script("/recipe", Reply(200, {"id": 7, "target_kg": 12.5}, {"X-Trace": "abc"}))
    answer = client.request(
        "GET", http_server.url("/recipe"), params={"line": "L1"}, headers={"Accept": "application/json"}
    )
    assert answer["status"] == 200
    assert answer["json"] == {"id": 7, "target_kg": 12.5}
    assert json.loads(answer["text"]) == answer["json"]
    assert answer["headers"]["x-trace"] == "abc" and answer["headers"]["content-type"] == "application/json"
    (seen,) = http_server.received("/recipe")
    assert seen.method == "GET" and seen.query == {"line": ["L1"]}
    assert seen.header("Idempotency-Key") is None  # GET needs none
    json.dumps(answer, allow_nan=False)


def test_text_body_has_no_json(client: HttpClient, http_server: ScriptedHttpServer) -> None:
    http_server.script("/plain", Reply(200, '{"looks": "like json"}'))
    answer = client.request("GET", http_server.url("/plain"))
    assert answer["json"] is None and answer["text"] == '{"looks": "like json"}'


def test_post_json_body_carries_an_idempotency_key(client: HttpClient, http_server: ScriptedHttpServer) -> None:
    http_server.script("/batches", Reply(201, {"created": True}))
    answer = client.request("POST", http_server.url("/batches"), json_body={"code": "B-1"}, idempotency_key="key-1")
    assert answer["status"] == 201
    (seen,) = http_server.received("/batches")
    assert json.loads(seen.body) == {"code": "B-1"}
    assert seen.header("Idempotency-Key") == "key-1"


def test_without_a_key_each_non_get_call_gets_a_fresh_random_one(
    client: HttpClient, http_server: ScriptedHttpServer
) -> None:
    http_server.script("/x", Reply(200, {}))
    client.request("PUT", http_server.url("/x"), data={"a": "1"})
    client.request("DELETE", http_server.url("/x"))
    client.request("PATCH", http_server.url("/x"), headers={"idempotency-key": "mine"})
    keys = [r.header("Idempotency-Key") for r in http_server.received("/x")]
    assert keys[0] and keys[1] and keys[0] != keys[1]
    assert keys[2] == "mine"  # the caller's own header wins, case-insensitively


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_retryable_statuses(client: HttpClient, http_server: ScriptedHttpServer, status: int) -> None:
    http_server.script("/flaky", Reply(status, "busy, try later"))
    with pytest.raises(HttpRetryableStatus) as info:
        client.request("POST", http_server.url("/flaky"), json_body={})
    assert isinstance(info.value, RetryableError) and not isinstance(info.value, FatalError)
    assert info.value.status == status
    assert f"POST http://127.0.0.1:{http_server.port}/flaky: HTTP {status}" in str(info.value)
    assert "busy, try later" in str(info.value)


def test_400_is_fatal_with_status_and_body_excerpt(client: HttpClient, http_server: ScriptedHttpServer) -> None:
    http_server.script("/orders", Reply(400, {"error": "quantity must be positive " + "x" * 1000}))
    with pytest.raises(HttpStatusError) as info:
        client.request("POST", http_server.url("/orders?token=secret"), json_body={"qty": -1})
    assert info.value.status == 400
    text = str(info.value)
    assert "HTTP 400" in text and "quantity must be positive" in text
    assert len(text) < 500 and "secret" not in text  # an excerpt, and no query string (API keys)
    assert RetryPolicy.from_options(HTTP_STEP_OPTIONS, "http.request").delay_after(1, info.value) is None


def test_429_retry_after_seconds(client: HttpClient, http_server: ScriptedHttpServer) -> None:
    http_server.script("/limited", Reply(429, "slow down", {"Retry-After": "7"}))
    with pytest.raises(HttpRetryableStatus) as info:
        client.request("GET", http_server.url("/limited"))
    assert info.value.retry_after == 7.0
    # the step's retry policy waits what the server asked, not its own backoff
    assert RetryPolicy.from_options(HTTP_STEP_OPTIONS, "http.request").delay_after(1, info.value) == 7.0


def test_503_retry_after_http_date(client: HttpClient, http_server: ScriptedHttpServer) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    http_server.script("/maint", Reply(503, "maintenance", {"Retry-After": when}))
    with pytest.raises(HttpRetryableStatus) as info:
        client.request("GET", http_server.url("/maint"))
    assert info.value.retry_after is not None and 27 <= info.value.retry_after <= 30


def test_retry_after_parsing_edges() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("0") == 0.0
    assert parse_retry_after("7200") == 7200.0  # as said: shortening it would retry too soon
    assert parse_retry_after("9" * 400) == RETRY_AFTER_LIMIT_SECONDS  # kept finite
    assert parse_retry_after("\u00b2") is None  # a digit to str.isdigit, not to float()
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: go now


def test_a_retry_after_longer_than_the_policy_allows_ends_the_retries() -> None:
    """A Retry-After past ``retry_after_max_seconds`` (an hour for http.request unless a call says
    otherwise) gives up at once instead of retrying before the server's time."""
    policy = RetryPolicy.from_options(HTTP_STEP_OPTIONS, "http.request")
    late = HttpRetryableStatus("GET /x: HTTP 429", 429, parse_retry_after("7200"))
    assert policy.delay_after(1, late) is None
    assert policy.delay_after(1, HttpRetryableStatus("GET /x: HTTP 429", 429, 3600.0)) == 3600.0
    patient = RetryPolicy.from_options({"retry_after_max_seconds": 7200}, "http.request", base=policy)
    assert patient.delay_after(1, late) == 7200.0


def test_timeout_is_a_communication_error(client: HttpClient, http_server: ScriptedHttpServer) -> None:
    release = threading.Event()
    http_server.script("/slow", Reply(200, {}, hold=release))
    started = time.monotonic()
    try:
        with pytest.raises(CommunicationError, match="timed out after 200 ms"):
            client.request("POST", http_server.url("/slow"), json_body={}, timeout_ms=200)
    finally:
        release.set()
    assert time.monotonic() - started < 5


def test_connection_refused_is_a_communication_error(client: HttpClient) -> None:
    url = f"http://127.0.0.1:{free_port()}/nobody"
    with pytest.raises(CommunicationError) as info:
        client.request("GET", url)
    assert "cannot connect" in str(info.value) and "refused" in str(info.value).lower()
    assert url in str(info.value)


@pytest.mark.parametrize(
    ("method", "url", "kwargs", "message"),
    [
        ("FETCH", "http://127.0.0.1/", {}, "HTTP method 'FETCH' is not one of"),
        ("GET", "ftp://127.0.0.1/", {}, "must start with http:// or https://"),
        ("POST", "http://127.0.0.1/", {"data": "a", "json_body": {}}, "pass data or json_body, not both"),
        ("GET", "http://127.0.0.1/", {"timeout_ms": 0}, "timeout_ms must be positive"),
    ],
)
def test_bad_requests_are_fatal(
    client: HttpClient, method: str, url: str, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(HttpRequestError, match=message):
        client.request(method, url, **kwargs)  # type: ignore[arg-type]


def test_cookies_from_one_call_never_reach_the_next(client: HttpClient, http_server: ScriptedHttpServer) -> None:
    http_server.script("/login", Reply(200, {}, {"Set-Cookie": "session=run-a; Path=/"}))
    http_server.script("/other", Reply(200, {}))
    client.request("GET", http_server.url("/login"))
    client.request("GET", http_server.url("/other"))
    assert http_server.received("/other")[0].header("Cookie") is None


def _self_signed(folder: Path) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_file), str(key_file)


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_is_verified_by_default_and_a_bad_certificate_is_fatal(tmp_path: Path) -> None:
    server = ScriptedHttpServer(tls=_self_signed(tmp_path))
    server.script("/secure", Reply(200, {"ok": True}))
    strict = HttpClient.from_config(config_from_dict({}))
    relaxed = HttpClient.from_config(config_from_dict({"http": {"verify_tls": False}}))
    try:
        with pytest.raises(HttpRequestError, match="TLS failed"):
            strict.request("POST", server.url("/secure"), json_body={})
        assert server.received("/secure") == []  # nothing was sent over the unverified channel
        assert relaxed.request("GET", server.url("/secure"))["json"] == {"ok": True}
    finally:
        strict.close()
        relaxed.close()
        server.close()
