"""The gateway's operator surfaces, the HTTP API and the OPC UA server of runs, started around recovery.

Recovery needs neither. A gateway first does what could stop it and costs little: it binds the API's
address and prints where it listens (a connection made from then on waits in the socket's backlog
until the API serves), and checks that the OPC UA server's address is free and its certificate and
key belong together. Then it resumes its runs, and only then imports FastAPI and uvicorn (about
0.7 s) and asyncua (0.6 s, and seconds more to build the address space) and serves. A mistake in
either surface's settings still stops the gateway before it runs anything.

A standby starts both before it waits for the node lock: it serves while it waits, and it has loaded
everything by the time it takes over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from exchange._api.listen import ApiListener
    from exchange._api.server import ApiServer
    from exchange._engine import Runtime
    from exchange._opcua_server.server import RunsServer


class Surfaces:
    """The API at ``api_listen`` and the OPC UA server at ``opcua_listen`` (None: not served)."""

    def __init__(self, runtime: Runtime, api_listen: str | None, opcua_listen: str | None) -> None:
        self.runtime = runtime
        self.api_listen = api_listen
        self.opcua_listen = opcua_listen
        self.listener: ApiListener | None = None
        self.api: ApiServer | None = None
        self.opcua: RunsServer | None = None

    def check(self) -> None:
        """Bind the API's address and check the OPC UA server's (ConfigError, one line, otherwise);
        imports neither web nor OPC UA library."""
        if self.api_listen is not None:
            from exchange._api.listen import ApiListener

            self.listener = ApiListener(self.runtime.config.api, self.api_listen)
            click.echo(f"gateway API listening on {self.listener.url}", err=True)
        if self.opcua_listen is not None:
            from exchange._opcua_server.checks import check_can_start

            check_can_start(self.runtime.config.opcua_server, self.opcua_listen)

    def start(self) -> None:
        """Serve both (after :meth:`check`); ConfigError when one cannot start."""
        if self.listener is not None and self.api is None:
            from exchange._api.server import ApiServer

            self.api = ApiServer(self.runtime, self.runtime.config.api, self.listener)
            self.api.start()
        if self.opcua_listen is not None and self.opcua is None:
            from exchange._opcua_server.server import RunsServer

            self.opcua = RunsServer(self.runtime, self.runtime.config.opcua_server, self.opcua_listen)
            click.echo(f"gateway OPC UA server listening on {self.opcua.start()}", err=True)

    def stop(self) -> None:
        if self.api is not None:
            self.api.stop()
        elif self.listener is not None:
            self.listener.close()
        if self.opcua is not None:
            self.opcua.stop()
