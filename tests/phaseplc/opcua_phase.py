"""A PLC serving phases over OPC UA: a real asyncua server on a free port of 127.0.0.1.

Built on asyncua directly (not on ``simulators/``). Each phase ``R1/Charge`` has, in the namespace
``urn:exchange:test:phaseplc`` (index 2):

- ``ns=2;s=R1.Charge.Command``, ``.State``, ``.Owner``: Int32; State is read-only for clients;
- ``ns=2;s=R1.Charge.Param.NAME`` and ``.Report.NAME``: Double (reports read-only);
- one ``ns=2;s=Exchange.Heartbeat`` (Int32) for all phases, the watchdog's tag.

The server sees every client write as it happens (asyncua's PostWrite callback), so two writes of the
same command number are two commands, and steps each phase's :class:`~tests.phaseplc.logic.PhaseLogic`
every ``scan_ms`` on its own loop, writing back the values that changed (reports first, the
command's 0 before the state, as a PLC that takes and clears the command at the top of its scan):
a subscription sees each change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from asyncua import Server, ua
from asyncua.common.callback import CallbackType, ServerItemCallback

from exchange._drivers.opcua.loop import LoopThread
from tests.phaseplc.logic import PhaseLogic
from tests.phaseplc.plant import PLANT_DEVICE, phase_toml

log = logging.getLogger(__name__)

NAMESPACE = "urn:exchange:test:phaseplc"
HEARTBEAT_NODE = "Exchange.Heartbeat"
_PUBLISH_ORDER = ("report:", "param:", "owner", "heartbeat", "command", "state")


def node_name(phase: str, key: str) -> str:
    """``R1/Charge`` + ``param:target_l`` -> ``R1.Charge.Param.target_l`` (string NodeId)."""
    if key == "heartbeat":
        return HEARTBEAT_NODE
    base = phase.replace("/", ".")
    kind, _, name = key.partition(":")
    return f"{base}.{kind.capitalize()}.{name}" if name else f"{base}.{kind.capitalize()}"


def _order(key: str) -> int:
    return next(i for i, prefix in enumerate(_PUBLISH_ORDER) if key.startswith(prefix))


class OpcUaPhasePlc:
    """:meth:`start` (about 1.5 s: asyncua loads its address space), then :attr:`url`; :meth:`phase`
    gives a phase's logic; :meth:`reset` puts every phase back to a PLC just powered on (cheap, for
    a server shared by a module's tests); :meth:`stop` ends the server and its thread."""

    def __init__(self, phases: Sequence[PhaseLogic], *, scan_ms: float = 2.0) -> None:
        if not phases or len({p.name for p in phases}) != len(phases):
            raise ValueError("OpcUaPhasePlc needs one or more phases of distinct names")
        self.phases = {p.name: p for p in phases}
        self.scan_ms = scan_ms
        self.port = 0
        self._thread: LoopThread | None = None
        self._server: Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._index = 2
        # node id -> (phase, key); key -> what the clients last saw
        self._keys: dict[ua.NodeId, list[tuple[PhaseLogic, str]]] = {}
        self._shown: dict[tuple[str, str], float] = {}
        self.scans = 0

    @property
    def url(self) -> str:
        return f"opc.tcp://127.0.0.1:{self.port}/phaseplc/"

    def phase(self, name: str = "R1/Charge") -> PhaseLogic:
        return self.phases[name]

    def start(self) -> OpcUaPhasePlc:
        self._thread = LoopThread("phaseplc-opcua")
        try:
            self._server = self._thread.run(self._build(), 30.0)
        except BaseException:
            self._thread.stop()
            self._thread = None
            raise
        return self

    def stop(self) -> None:
        thread, server, self._thread, self._server = self._thread, self._server, None, None
        if thread is None:
            return
        try:
            if server is not None:
                thread.run(self._shutdown(server), 10.0)
        finally:
            thread.stop()

    def reset(self) -> None:
        """Every phase Idle with its tags at 0 and its counters empty, published before this returns."""
        assert self._thread is not None, "the server is not started"
        self._thread.run(self._reset(), 10.0)

    def config_toml(self, *, device: str = PLANT_DEVICE, owner_id: int = 1, watchdog_period_ms: int | None = None,
                    start_timeout_s: float = 5.0, command_timeout_s: float = 5.0) -> str:
        """The ``[devices]``, ``[tags]``, ``[phases]`` (and ``[watchdog]``) text of this PLC."""
        device_toml = (f'[devices.{device}]\ndriver = "opcua"\nurl = "{self.url}"\ntimeout_ms = 2000\n'
                       "reconnect_min_ms = 20\nreconnect_max_ms = 200\n")
        return phase_toml(self.phases.values(), device, device_toml,
                          lambda phase, key: f"ns=2;s={node_name(phase, key)}",
                          owner_id=owner_id, watchdog_period_ms=watchdog_period_ms,
                          start_timeout_s=start_timeout_s, command_timeout_s=command_timeout_s)

    # --- on the server's loop --------------------------------------------------------------

    async def _build(self) -> Server:
        server = Server()
        server.disable_clock()
        await server.init()
        server.set_endpoint("opc.tcp://127.0.0.1:0/phaseplc/")
        self._index = await server.register_namespace(NAMESPACE)
        objects = server.nodes.objects
        for phase in self.phases.values():
            for key, value in phase.values().items():
                name = node_name(phase.name, key)
                node_id = ua.NodeId(name, self._index)
                if node_id not in self._keys:
                    variant = ua.VariantType.Double if ":" in key else ua.VariantType.Int32
                    node = await objects.add_variable(node_id, ua.QualifiedName(name, self._index),
                                                      ua.Variant(_typed(value, variant), variant))
                    if key != "state" and not key.startswith("report:"):
                        await node.set_writable()
                self._keys.setdefault(node_id, []).append((phase, key))
                self._shown[(phase.name, key)] = value
        server.iserver.subscribe_server_callback(CallbackType.PostWrite, self._on_write)
        await server.start()
        assert server.bserver is not None
        self.port = server.bserver.port
        self._server = server
        self._task = asyncio.get_running_loop().create_task(self._scan_forever())
        return server

    async def _shutdown(self, server: Server) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await server.stop()

    async def _on_write(self, event: ServerItemCallback, _dispatcher: Any) -> None:
        if not event.is_external:
            return  # the PLC's own writes
        for item, status in zip(event.request_params.NodesToWrite, event.response_params or []):
            if item.AttributeId != ua.AttributeIds.Value or not status.is_good():
                continue
            for phase, key in self._keys.get(item.NodeId, []):
                value = item.Value.Value.Value
                phase.written(key, value)
                self._shown[(phase.name, key)] = value

    async def _scan_forever(self) -> None:
        while True:
            try:
                await self._scan(time.monotonic())
            except asyncio.CancelledError:
                raise
            except Exception:  # a test's PLC must not die silently
                log.exception("phase PLC scan failed")
            await asyncio.sleep(self.scan_ms / 1000)

    async def _scan(self, now_s: float) -> None:
        for phase in self.phases.values():
            phase.step(now_s)
        await self._publish()
        self.scans += 1

    async def _publish(self) -> None:
        changed: list[tuple[int, ua.NodeId, str, float]] = []
        for node_id, users in self._keys.items():
            phase, key = users[0]
            value = phase.values()[key]
            if self._shown.get((phase.name, key)) != value:
                changed.append((_order(key), node_id, key, value))
        for _, node_id, key, value in sorted(changed, key=lambda c: c[0]):
            variant = ua.VariantType.Double if ":" in key else ua.VariantType.Int32
            await self._write(node_id, ua.Variant(_typed(value, variant), variant))
            for phase, _key in self._keys[node_id]:
                self._shown[(phase.name, key)] = value

    async def _write(self, node_id: ua.NodeId, variant: ua.Variant) -> None:
        assert self._server is not None
        await self._server.write_attribute_value(node_id, ua.DataValue(variant, SourceTimestamp=datetime.now(UTC)))

    async def _reset(self) -> None:
        for phase in self.phases.values():
            phase.reset_all()
        await self._publish()


def _typed(value: float, variant: ua.VariantType) -> float | int:
    return float(value) if variant == ua.VariantType.Double else int(value)
