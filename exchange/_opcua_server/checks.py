"""What would stop the OPC UA server of runs from starting, checked without asyncua.

A gateway serves the runs over OPC UA only after it resumed them: importing asyncua and building the
address space take seconds. What can be known before (the address is free and this machine's, the
certificate and key belong together) is checked before the first run is resumed, so a mistake there
still stops the gateway before it runs anything.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from exchange._config import OpcuaServerConfig, parse_opcua_listen
from exchange.errors import ConfigError


def pem_or_der(data: bytes) -> str:
    """The encoding of a certificate or key file's bytes."""
    return "pem" if data.startswith(b"-----") else "der"


def check_pair(cert: Any, key: Any, cert_path: str, key_path: str) -> None:
    """ValueError naming both files unless ``key`` is the private key of ``cert``'s public key."""
    from cryptography.hazmat.primitives import serialization

    form = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*form) != key.public_key().public_bytes(*form):
        raise ValueError(f"[opcua_server] key {key_path} is not the private key of the certificate {cert_path}: "
                         "the two files do not belong together")


def check_pair_files(cert_path: str, key_path: str) -> None:
    """OSError or ValueError unless both files can be read (PEM or DER) and belong together."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert_bytes, key_bytes = Path(cert_path).read_bytes(), Path(key_path).read_bytes()
    cert = (x509.load_pem_x509_certificate(cert_bytes) if pem_or_der(cert_bytes) == "pem"
            else x509.load_der_x509_certificate(cert_bytes))
    key = (serialization.load_pem_private_key(key_bytes, password=None) if pem_or_der(key_bytes) == "pem"
           else serialization.load_der_private_key(key_bytes, password=None))
    check_pair(cert, key, cert_path, key_path)


def check_address_free(host: str, port: int) -> None:
    """OSError unless every address ``host`` names can be bound at ``port`` now (a port in use, or
    an address that is not this machine's). Port 0 takes a free port: nothing to check."""
    if port == 0:
        return
    for family, kind, proto, _name, address in dict.fromkeys(
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)):
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncua binds
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            probe.bind(address)


def check_can_start(settings: OpcuaServerConfig, listen: str) -> None:
    """ConfigError, worded as :meth:`~exchange._opcua_server.server.RunsServer.start` words it, when
    the server could not listen at ``listen`` or its certificate cannot be used."""
    host, port, _path = parse_opcua_listen(listen, "opcua_server listen")
    try:
        check_address_free(host, port)
        if settings.cert is not None and settings.key is not None:
            check_pair_files(settings.cert, settings.key)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the OPC UA server could not start on {host}:{port}: {exc}") from exc
