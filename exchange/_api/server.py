"""The API's web server (uvicorn) on a thread of the gateway process.

TLS files are checked before anything listens (a key that is not the certificate's is one line
naming both files); plain HTTP on an address other machines reach is served with a warning."""

from __future__ import annotations

import logging
import ssl
import threading
import time

import uvicorn

from exchange._api.app import create_app
from exchange._config import ApiConfig, is_loopback, parse_listen
from exchange._engine.runtime import Runtime
from exchange.errors import ConfigError

log = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 30.0


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


class ApiServer:
    """Serve the API for ``runtime`` at ``listen`` ("HOST:PORT"; port 0: a free one, see :attr:`url`)."""

    def __init__(self, runtime: Runtime, settings: ApiConfig, listen: str) -> None:
        host, port = parse_listen(listen, "api listen")
        tls = settings.cert is not None
        if settings.cert is not None and settings.key is not None:
            check_tls_files(settings.cert, settings.key)
        app = create_app(runtime, settings=settings, tls=tls)
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="off",
            ssl_certfile=settings.cert, ssl_keyfile=settings.key, server_header=False,
            timeout_graceful_shutdown=2,
            proxy_headers=False,  # X-Forwarded-For is read by exchange._api.peers, from trusted proxies only
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="exchange-api", daemon=True)
        self._scheme = "https" if tls else "http"
        self.url: str | None = None

    def start(self) -> str:
        """Start serving; returns the URL. ConfigError when the address cannot be bound."""
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive():
                raise ConfigError(f"the API could not listen on {self._server.config.host}:"
                                  f"{self._server.config.port} (address in use, or not this machine's?)")
            if time.monotonic() > deadline:
                raise ConfigError("the API did not start within "
                                  f"{START_TIMEOUT_SECONDS:.0f} s")
            time.sleep(0.02)
        sockets = [s for server in self._server.servers for s in server.sockets]
        host, port = sockets[0].getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{self._scheme}://{shown}:{port}"
        log.info("API listening on %s", self.url)
        if self._scheme == "http" and not is_loopback(self._server.config.host):
            log.warning("the API serves plain HTTP on %s, which other machines reach: passwords, session cookies "
                        "and tokens cross the network in clear text; set [api] cert and key (TLS), or listen on "
                        "127.0.0.1 behind a TLS reverse proxy", self.url)
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
