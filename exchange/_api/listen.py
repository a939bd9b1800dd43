"""The API's listening sockets and TLS files, checked and bound with the standard library only.

A gateway binds its API address before it resumes any run (a port in use stops it first, with one
line) but imports FastAPI and uvicorn, about 0.7 s of imports, only after: connections made in
between wait in the socket's backlog and are answered once :class:`exchange._api.server.ApiServer`
serves on these sockets.
"""

from __future__ import annotations

import logging
import socket
import ssl

from exchange._config import ApiConfig, is_loopback, parse_listen
from exchange.errors import ConfigError

log = logging.getLogger(__name__)

BACKLOG = 2048  # uvicorn's default: connections made before the API serves wait here


def check_tls_files(cert: str, key: str) -> None:
    """ConfigError naming the files unless ``cert`` and ``key`` can be read and belong together
    (checked before anything listens: uvicorn would fail later, on its own thread, with a traceback)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except FileNotFoundError as exc:
        raise ConfigError(f"[api] TLS: {exc.filename or cert} does not exist") from exc
    except ssl.SSLError as exc:
        what = ("the key is not the certificate's: the two files do not belong together"
                if "KEY_VALUES_MISMATCH" in str(exc)
                else f"they cannot be read as a PEM certificate and its key ({exc})")
        raise ConfigError(f"[api] TLS: cert {cert} and key {key}: {what}") from exc
    except OSError as exc:
        raise ConfigError(f"[api] TLS: cert {cert} and key {key} cannot be read: {exc}") from exc


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening TCP sockets on every address ``host`` names (as asyncio's ``create_server`` binds
    them); ConfigError naming ``host:port`` when one cannot be bound (none is left open then)."""
    sockets: list[socket.socket] = []
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # an IPv6 socket next to an IPv4 one on the same port
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ConfigError(f"the API could not listen on {host}:{port} (address in use, or not this machine's?): "
                          f"{exc.strerror or exc}") from exc
    return sockets


class ApiListener:
    """The API's address, checked and bound (see the module docstring); :attr:`url` says where."""

    def __init__(self, settings: ApiConfig, listen: str) -> None:
        self.settings = settings
        self.host, port = parse_listen(listen, "api listen")
        self.tls = settings.cert is not None
        if settings.cert is not None and settings.key is not None:
            check_tls_files(settings.cert, settings.key)
        self.sockets = bind(self.host, port)
        host, bound_port = self.sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{'https' if self.tls else 'http'}://{shown}:{bound_port}"
        log.info("API listening on %s", self.url)
        if not self.tls and not is_loopback(self.host):
            log.warning("the API serves plain HTTP on %s, which other machines reach: passwords, session cookies "
                        "and tokens cross the network in clear text; set [api] cert and key (TLS), or listen on "
                        "127.0.0.1 behind a TLS reverse proxy", self.url)

    def close(self) -> None:
        """Close the sockets (a gateway that stops before it served the API)."""
        for sock in self.sockets:
            sock.close()
