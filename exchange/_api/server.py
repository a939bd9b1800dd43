"""The API's web server (uvicorn) on a thread of the gateway process.

TLS files are checked and the address bound before anything is served (:mod:`exchange._api.listen`:
a key that is not the certificate's is one line naming both files); plain HTTP on an address other
machines reach is served with a warning."""

from __future__ import annotations

import logging
import threading
import time

import uvicorn

from exchange._api.app import create_app
from exchange._api.listen import ApiListener
from exchange._config import ApiConfig
from exchange._engine import Runtime
from exchange.errors import ConfigError

log = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 30.0


class ApiServer:
    """Serve the API for ``runtime`` at ``listen`` ("HOST:PORT"; port 0: a free one, see :attr:`url`)."""

    def __init__(self, runtime: Runtime, settings: ApiConfig, listen: str | ApiListener) -> None:
        """``listen``: "HOST:PORT", or the :class:`ApiListener` a gateway bound before it resumed its runs."""
        self.listener = listen if isinstance(listen, ApiListener) else ApiListener(settings, listen)
        app = create_app(runtime, settings=settings, tls=self.listener.tls)
        config = uvicorn.Config(
            app, host=self.listener.host, log_level="warning", access_log=False, lifespan="off",
            ssl_certfile=settings.cert, ssl_keyfile=settings.key, server_header=False,
            timeout_graceful_shutdown=2,
            proxy_headers=False,  # X-Forwarded-For is read by exchange._api.peers, from trusted proxies only
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": self.listener.sockets},
                                        name="exchange-api", daemon=True)
        self.url = self.listener.url

    def start(self) -> str:
        """Start serving on the listener's sockets; returns the URL. ConfigError when uvicorn cannot."""
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive():
                raise ConfigError(f"the API could not be served on {self.url}")
            if time.monotonic() > deadline:
                raise ConfigError("the API did not start within "
                                  f"{START_TIMEOUT_SECONDS:.0f} s")
            time.sleep(0.02)
        return self.url

    def stop(self) -> None:
        if not self._thread.is_alive():  # never served (uvicorn closes the sockets it served on)
            self.listener.close()
            return
        self._server.should_exit = True
        self._thread.join(timeout=5)
