"""The ``[devices.NAME]`` settings of an OPC UA device, validated once when the driver is created.

Keys (only ``url`` is required)::

    url = "opc.tcp://127.0.0.1:4840/plant/"
    timeout_ms = 5000                  # each request, and the whole connect
    security_policy = "None"           # or "Basic256Sha256" (also Aes128Sha256RsaOaep, Aes256Sha256RsaPss)
    security_mode = "SignAndEncrypt"   # or "Sign"; only with a security policy
    certificate = "pki/client.der"     # this client's application certificate (PEM or DER) ...
    private_key = "pki/client.pem"     # ... and its private key; both required with a policy
    private_key_password = "..."       # when the key file is encrypted
    server_certificate = "pki/server.der"   # pin the server's certificate (default: take the endpoint's)
    application_uri = "urn:..."        # default: the URI in the certificate, else urn:exchange:<device>
    username = "operator"              # user name login; password required with it
    password = "${OPCUA_PASSWORD}"
    publishing_interval_ms = 0         # subscriptions: 0 publishes each change at once
    session_timeout_ms = 30000
    reconnect_min_ms = 100             # backoff after a lost connection, doubling up to max
    reconnect_max_ms = 5000

Certificate and key files are read and checked here, so a wrong path or a key that does not belong to
the certificate is a :class:`ConfigError` at start-up, not a connection failure later.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from exchange._config import DeviceConfig
from exchange._drivers.settings_reader import SettingsReader
from exchange.errors import ConfigError

if TYPE_CHECKING:
    from cryptography import x509

POLICIES = ("None", "Basic256Sha256", "Aes128Sha256RsaOaep", "Aes256Sha256RsaPss")
MODES = ("Sign", "SignAndEncrypt")
_KEYS = {
    "url", "timeout_ms", "security_policy", "security_mode", "certificate", "private_key",
    "private_key_password", "server_certificate", "application_uri", "username", "password",
    "publishing_interval_ms", "session_timeout_ms", "reconnect_min_ms", "reconnect_max_ms",
}


@dataclass(frozen=True)
class PemOrDer:
    """File content plus its encoding (asyncua needs to be told which)."""

    content: bytes
    extension: str  # "pem" | "der"


@dataclass(frozen=True)
class OpcUaSettings:
    device: str
    url: str
    timeout_ms: int = 5000
    security_policy: str = "None"
    security_mode: str = "SignAndEncrypt"
    certificate: PemOrDer | None = None
    private_key: PemOrDer | None = None
    private_key_password: str | None = None
    server_certificate: PemOrDer | None = None
    application_uri: str = ""
    username: str | None = None
    password: str | None = None
    publishing_interval_ms: int = 0
    session_timeout_ms: int = 30_000
    reconnect_min_ms: int = 100
    reconnect_max_ms: int = 5000

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000.0

    @property
    def secured(self) -> bool:
        return self.security_policy != "None"


def parse_settings(device: DeviceConfig, base_dir: str | Path = ".") -> OpcUaSettings:
    """Validate ``device.settings``; every error is a ConfigError naming the device and the key."""
    read = SettingsReader(device, _KEYS, "opcua", dotted=False)
    read.check_unknown()
    raw, where = read.raw, read.where
    url = raw.get("url")
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{where}: url is required, e.g. \"opc.tcp://127.0.0.1:4840/plant/\"")
    url = url.strip()
    try:
        parsed = urlparse(url)
        port = parsed.port
    except ValueError as exc:
        raise ConfigError(f"{where}: url {url!r} is not valid: {exc}") from exc
    if parsed.scheme != "opc.tcp" or not parsed.hostname:
        raise ConfigError(f"{where}: url {url!r} must look like opc.tcp://HOST:PORT/PATH")
    if port is None:
        url = url.replace(parsed.netloc, f"{parsed.netloc}:4840", 1)  # the OPC UA default port

    policy = read.choice("security_policy", POLICIES, "None")
    mode = read.choice("security_mode", MODES, "SignAndEncrypt")
    if policy == "None" and "security_mode" in raw:
        raise ConfigError(f"{where}: security_mode needs a security_policy other than \"None\"")
    username = read.string("username")
    password = read.string("password")
    if password is not None and username is None:
        raise ConfigError(f"{where}: password is set but username is not")
    if username is not None and password is None:
        raise ConfigError(f"{where}: username {username!r} needs a password")

    base = Path(base_dir)
    certificate = _file(read, "certificate", base)
    private_key = _file(read, "private_key", base)
    key_password = read.string("private_key_password")
    server_certificate = _file(read, "server_certificate", base)
    if policy != "None" and (certificate is None or private_key is None):
        missing = " and ".join(k for k in ("certificate", "private_key") if raw.get(k) is None)
        raise ConfigError(f"{where}: security_policy {policy!r} needs {missing} (file paths)")
    if (certificate is None) != (private_key is None):
        raise ConfigError(f"{where}: certificate and private_key must be given together")
    cert_uri = ""
    if certificate is not None and private_key is not None:
        cert_uri = _check_pair(certificate, private_key, key_password, where)
    if server_certificate is not None:
        _load_certificate(server_certificate, "server_certificate", where)
    application_uri = read.string("application_uri") or cert_uri or f"urn:exchange:{device.name}"

    values = {
        key: read.positive_int(key, default, allow_zero=key == "publishing_interval_ms")
        for key, default in (
            ("timeout_ms", 5000), ("publishing_interval_ms", 0), ("session_timeout_ms", 30_000),
            ("reconnect_min_ms", 100), ("reconnect_max_ms", 5000),
        )
    }
    read.check_at_least("reconnect_max_ms", values["reconnect_max_ms"], "reconnect_min_ms", values["reconnect_min_ms"])
    return OpcUaSettings(
        device=device.name, url=url, security_policy=policy, security_mode=mode,
        certificate=certificate, private_key=private_key, private_key_password=key_password,
        server_certificate=server_certificate, application_uri=application_uri,
        username=username, password=password, **values,
    )


def _file(read: SettingsReader, key: str, base: Path) -> PemOrDer | None:
    value = read.raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{read.at(key)} must be a file path")
    path = Path(value) if Path(value).is_absolute() else base / value
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{read.at(key)} file {str(path)!r} cannot be read: {exc.strerror}") from exc
    return PemOrDer(content, "pem" if content.lstrip().startswith(b"-----BEGIN") else "der")


def _load_certificate(item: PemOrDer, key: str, where: str) -> x509.Certificate:
    from cryptography import x509  # only with certificates configured: a gateway starts faster without

    try:
        if item.extension == "pem":
            return x509.load_pem_x509_certificate(item.content)
        return x509.load_der_x509_certificate(item.content)
    except ValueError as exc:
        raise ConfigError(f"{where}: {key} is not an X.509 certificate: {exc}") from exc


def _check_pair(certificate: PemOrDer, key: PemOrDer, password: str | None, where: str) -> str:
    """Check that the key belongs to the certificate; return the certificate's application URI."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = _load_certificate(certificate, "certificate", where)
    secret = password.encode() if password is not None else None
    try:
        if key.extension == "pem":
            private = serialization.load_pem_private_key(key.content, password=secret)
        else:
            private = serialization.load_der_private_key(key.content, password=secret)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: private_key cannot be loaded: {exc}") from exc
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if private.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        raise ConfigError(f"{where}: private_key does not belong to certificate")
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        uris = names.get_values_for_type(x509.UniformResourceIdentifier)
    except x509.ExtensionNotFound:
        uris = []
    return uris[0] if uris else ""
