"""The OPC UA server of runs on its own event-loop thread in the gateway process.

Every ``refresh_ms`` one store query reads the runs to show (unfinished, and finished within
``finished_minutes``) and the address space is brought up to date: new runs get nodes, changed
values are written, runs no longer shown lose theirs. Without a certificate the server offers only
the unsecured endpoint (for a closed control network); with ``cert`` and ``key`` it adds
Basic256Sha256 Sign and SignAndEncrypt (a key that is not the certificate's stops the start, naming
both files); without them on an address other machines reach, a warning says that passwords cross
the network in clear. Anonymous sessions read; users of the API write commands.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from asyncua import ua
from asyncua.server.server import Server

from exchange._auth.accounts import Accounts
from exchange._config import OpcuaServerConfig, is_loopback, parse_opcua_listen
from exchange._drivers.opcua.loop import LoopThread
from exchange._engine import HELD_STATE, Runtime, held_text
from exchange._opcua_server.checks import check_pair, pem_or_der
from exchange._opcua_server.nodes import NAMESPACE_URI, RunNodes, phase_text
from exchange._opcua_server.users import ExchangeUsers, ReadOnlyAnonymous, use_peer_sessions
from exchange._opcua_server.writes import REASON, GuardedAttributes
from exchange.errors import ConfigError

log = logging.getLogger(__name__)

START_TIMEOUT_SECONDS = 60.0
RUNS_SHOWN_MAX = 2000
APPLICATION_URI = "urn:exchange:gateway"


class RunsServer:
    """Serve ``runtime``'s runs at ``listen`` (``opc.tcp://HOST:PORT/PATH``; port 0: a free one)."""

    def __init__(self, runtime: Runtime, settings: OpcuaServerConfig, listen: str) -> None:
        self.host, self.port, self.path = parse_opcua_listen(listen, "opcua_server listen")
        self.runtime = runtime
        self.settings = settings
        self.users = ExchangeUsers(Accounts(runtime.store.accounts, roles=runtime.roles))
        self._cert_and_key = ((settings.cert, settings.key) if settings.cert is not None and settings.key is not None
                              else None)
        self._thread: LoopThread | None = None
        self._server: Server | None = None
        self._refresh: asyncio.Task[None] | None = None
        self.nodes: RunNodes | None = None
        self.url: str | None = None

    def start(self) -> str:
        """Listen and show the runs; returns the endpoint URL. ConfigError when it cannot listen
        or a certificate cannot be loaded (the gateway then stops before running anything)."""
        thread = LoopThread("exchange-opcua-server")
        try:
            thread.run(self._build(), START_TIMEOUT_SECONDS)
        except (OSError, ValueError) as exc:
            thread.stop()
            raise ConfigError(f"the OPC UA server could not start on {self.host}:{self.port}: {exc}") from exc
        except BaseException:
            thread.stop()
            raise
        self._thread = thread
        self.url = f"opc.tcp://{self.host}:{self.port}{self.path}"
        log.info("OPC UA server of runs listening on %s", self.url)
        if self._cert_and_key is None and not is_loopback(self.host):
            log.warning("the OPC UA server on %s offers only its unsecured endpoint: user names and passwords "
                        "cross the network in clear text; set [opcua_server] cert and key, or keep it on a "
                        "closed control network", self.url)
        return self.url

    def stop(self) -> None:
        if self._thread is None:
            return
        try:
            self._thread.run(self._shutdown(), 15.0)
        except Exception:  # stopping must not keep the gateway from stopping
            log.exception("stopping the OPC UA server failed")
        finally:
            self._thread.stop()
            self._thread = None

    async def _build(self) -> None:
        server = Server(user_manager=self.users)
        server.disable_clock()
        await server.init()
        server.set_endpoint(f"opc.tcp://{self.host}:{self.port}{self.path}")
        server.set_server_name("Exchange")
        await server.set_application_uri(APPLICATION_URI)
        use_peer_sessions(server.iserver)  # sign-ins are throttled per user and peer address
        if self._cert_and_key is not None:
            cert_path, key_path = self._cert_and_key
            cert, key = Path(cert_path).read_bytes(), Path(key_path).read_bytes()
            await server.load_certificate(cert, format=pem_or_der(cert))
            await server.load_private_key(key, format=pem_or_der(key))
            check_pair(server.iserver.certificate, server.iserver.private_key, cert_path, key_path)
            server.set_security_policy([ua.SecurityPolicyType.NoSecurity,
                                        ua.SecurityPolicyType.Basic256Sha256_Sign,
                                        ua.SecurityPolicyType.Basic256Sha256_SignAndEncrypt],
                                       permission_ruleset=ReadOnlyAnonymous())
        else:
            server.set_security_policy([ua.SecurityPolicyType.NoSecurity], permission_ruleset=ReadOnlyAnonymous())
        server.set_identity_tokens([ua.AnonymousIdentityToken, ua.UserNameIdentityToken])
        namespace = await server.register_namespace(NAMESPACE_URI)
        nodes = RunNodes(server, namespace)
        await nodes.build(sorted(self.runtime.config.units.units))
        guarded = GuardedAttributes(server.iserver.attribute_service, nodes, self.users, self._send)
        server.iserver.attribute_service = guarded  # type: ignore[assignment]  # same methods, Command writes checked
        await self._sync(nodes)
        await server.start()
        assert server.bserver is not None
        self.port = server.bserver.port
        self._server, self.nodes = server, nodes
        self._refresh = asyncio.get_running_loop().create_task(self._refresh_loop(nodes), name="opcua-runs-refresh")

    def _send(self, run_id: str, cmd: str, actor: str) -> None:
        self.runtime.send_command(run_id, cmd, REASON, actor=actor, strict=True)

    def _visible(self) -> tuple[list[Any], dict[str, dict[str, str]], dict[str, str | None]]:
        """The runs to show, and per run what it needs from people: the prompt it waits on, the
        failed step it is held on (a query for those only when a run is HELD), the phase it
        commands (one query for all of them); and each configured unit's holder (``Runtime.units``:
        two queries, none without units)."""
        lookup = self.runtime.store.lookup
        since = self.runtime.store.clock.now() - self.settings.finished_minutes * 60
        runs = lookup.unfinished_or_finished_since(since, RUNS_SHOWN_MAX)
        extra: dict[str, dict[str, str]] = {}
        for prompt in self.runtime.open_prompts(limit=RUNS_SHOWN_MAX):
            extra.setdefault(prompt["run"], {}).update(PromptKey=prompt["key"], PromptText=prompt["text"])
        held = [run.id for run in runs if run.state == HELD_STATE and not run.finished]
        for run_id, step in lookup.held_steps(held).items():
            extra.setdefault(run_id, {})["HeldOn"] = held_text(step)
        for name, commanding in self.runtime.phase_runs().items():
            extra.setdefault(commanding["run"], {})["Phase"] = phase_text(name, commanding)
        units = self.runtime.units() if self.runtime.config.units.units else []
        return runs, extra, {unit["unit"]: unit["holder"] for unit in units}

    async def _sync(self, nodes: RunNodes) -> None:
        runs, extra, holders = await asyncio.get_running_loop().run_in_executor(None, self._visible)
        await nodes.sync(runs, extra)
        await nodes.show_holders(holders)

    async def _refresh_loop(self, nodes: RunNodes) -> None:
        while True:
            await asyncio.sleep(self.settings.refresh_ms / 1000)
            try:
                await self._sync(nodes)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the store is away: the nodes keep their last values
                log.warning("OPC UA server: refreshing the runs failed, trying again: %s", exc)

    async def _shutdown(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
        if self._server is not None:
            listener = getattr(self._server.bserver, "_server", None)
            if listener is not None:
                listener.close()
            for transport in list(self._server.iserver.asyncio_transports):
                transport.close()
            await self._server.stop()
