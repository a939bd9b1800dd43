"""The simulated plant served over real protocol servers, with a ticker and fault injection.

:class:`PlantServers` starts one server per protocol that serves a plant area (see
:mod:`simulators.protocol_map` for the split and the addresses), then a ticker thread (10 Hz by
default) that, under one lock, does a sync step:

1. reads every command point (``rw``) from its server (``get``): clients write commands there;
2. advances the model by the real elapsed time (capped at ``max_tick_seconds``);
3. writes every process value (``ro``) back to its server (``set``) when it changed, and all of them
   once per second regardless, so a stray client write to a process value does not stick.

Commands belong to clients, process values to the plant: the ticker never writes a command, so a
client's write is never overwritten. After a server (re)start the plant pushes its current commands
back into it (a PLC keeps its retentive memory across a restart).

A server that fails during a step (its process died) is skipped with one warning and the rest of the
plant runs on; it is synced again as soon as it answers.

Modbus is served on the transport chosen (``modbus_transport``: TCP, RTU over TCP, or RTU on a serial
line made of a pty pair); OPC UA, when it serves the mixer, also serves an array and a method
(:mod:`simulators.opcua_extras`). The printed config reaches each as served.

Faults for tests: stop/start/restart a server, drop its connections, freeze a point (the ticker neither
reads nor writes it; a frozen process value keeps whatever the server holds), inject a mixer fault.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from simulators.config_text import render_config
from simulators.opcua_extras import PROFILE_ADDRESS, PROFILE_INITIAL, mixer_extras
from simulators.plant import POINTS, POINTS_BY_PATH, Plant, PlantPoint
from simulators.protocol_map import (
    MODBUS_UNIT_ID,
    OPCUA_ENDPOINT_PATH,
    OPCUA_NAMESPACE_URI,
    PROTOCOLS,
    address,
    assign_areas,
    points_served,
)
from simulators.servers.base import SimPoint, SimServer

logger = logging.getLogger(__name__)

ServerFactory = Callable[[str, list[SimPoint], str, int], SimServer]
FULL_REFRESH_SECONDS = 1.0


def default_server_factory(protocol: str, points: list[SimPoint], host: str, port: int, *,
                           modbus_transport: str = "tcp") -> SimServer:
    """Build the real server for ``protocol`` (imported here: only chosen protocols are loaded)."""
    if protocol == "modbus":
        from simulators.servers.modbus import ModbusSimServer

        return ModbusSimServer(points, host=host, port=port, unit_id=MODBUS_UNIT_ID, zero_based=False,
                               word_order="big", transport=modbus_transport)
    if protocol == "opcua":
        from simulators.servers.opcua import OpcUaSimServer

        extra_points, methods = mixer_extras(points)
        return OpcUaSimServer([*points, *extra_points], host=host, port=port, namespace_uri=OPCUA_NAMESPACE_URI,
                              endpoint_path=OPCUA_ENDPOINT_PATH, methods=methods)
    if protocol == "enip":
        from simulators.servers.enip import EnipSimServer

        return EnipSimServer(points, host=host, port=port)
    raise ValueError(f"unknown protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")


def sim_points(protocol: str, points: Sequence[PlantPoint], plant: Plant) -> list[SimPoint]:
    """The server-side description of ``points`` on ``protocol``, initialised from the plant's state."""
    return [SimPoint(address(protocol, p.path), p.data_type, plant.read(p.path), p.writable) for p in points]


class PlantServers:
    """One plant, its servers and its ticker; a context manager (``with PlantServers() as ps:``).

    ``ports`` maps protocol → port (0 or missing: a free port; the real one is in :attr:`ports` after
    :meth:`start`). ``modbus_transport``: ``"tcp"``, ``"rtu-over-tcp"`` or ``"serial"`` (the default
    server factory only). Thread-safe: the ticker and callers share :attr:`lock`.
    """

    def __init__(
        self,
        plant: Plant | None = None,
        *,
        protocols: Sequence[str] = PROTOCOLS,
        host: str = "127.0.0.1",
        ports: Mapping[str, int] | None = None,
        tick_hz: float = 10.0,
        max_tick_seconds: float = 0.5,
        server_factory: ServerFactory = default_server_factory,
        modbus_transport: str = "tcp",
    ) -> None:
        if not tick_hz > 0:
            raise ValueError(f"tick_hz must be > 0, got {tick_hz!r}")
        if modbus_transport != "tcp":
            if server_factory is not default_server_factory:
                raise ValueError("modbus_transport is for the default server factory")
            server_factory = functools.partial(default_server_factory, modbus_transport=modbus_transport)
        self.plant = plant or Plant()
        self.host = host
        self.assignment = assign_areas(protocols)
        self.protocols = tuple(p for p in PROTOCOLS if p in self.assignment.values())
        self.tick_interval_seconds = 1.0 / tick_hz
        self.max_tick_seconds = max_tick_seconds
        self.lock = threading.RLock()
        self.servers: dict[str, SimServer] = {}
        self._requested_ports = dict(ports or {})
        self._factory = server_factory
        self._served = {proto: points_served(proto, self.assignment) for proto in self.protocols}
        self._stopped: set[str] = set()
        self._frozen: dict[str, Any] = {}  # path -> the value it is frozen at (None: as the server has it)
        self._pushed: dict[str, Any] = {}
        self._since_full_push_seconds = 0.0
        self._warnings: dict[str, str] = {}  # what failed -> its last message (each logged once)
        self._ticker: threading.Thread | None = None
        self._stop_ticker = threading.Event()
        self.config_path: Path | None = None

    # -- life cycle ---------------------------------------------------------------------------------

    def start(self, *, ticker: bool = True) -> Self:
        """Start every server (free ports where 0), push the plant's state, then the ticker.

        With ``ticker=False`` nothing advances until :meth:`sync_step` is called (deterministic tests).
        A server that fails to start stops the ones already started and the error propagates.
        """
        try:
            for proto in self.protocols:
                server = self._factory(proto, sim_points(proto, self._served[proto], self.plant), self.host,
                                       int(self._requested_ports.get(proto, 0)))
                self.servers[proto] = server
                server.start()
                logger.info("simulated plant: %s server on %s:%s", proto, self.host, server.port)
        except BaseException:
            self.stop()
            raise
        with self.lock:
            self._push_all()
        if ticker:
            self._stop_ticker.clear()
            self._ticker = threading.Thread(target=self._run_ticker, name="plant-ticker", daemon=True)
            self._ticker.start()
        return self

    def stop(self) -> None:
        """Stop the ticker, then every server (errors while stopping are logged, not raised)."""
        self._stop_ticker.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5.0)
            self._ticker = None
        with self.lock:
            for proto, server in list(self.servers.items())[::-1]:
                try:
                    getattr(server, "close", server.stop)()  # close: also what stop keeps (a pty pair)
                except Exception:
                    logger.warning("simulated plant: stopping the %s server failed", proto, exc_info=True)
            self.servers.clear()
            self._stopped.clear()

    def __enter__(self) -> Self:
        return self.start() if not self.servers else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def ports(self) -> dict[str, int]:
        """Protocol → the real port each running server listens on."""
        return {proto: int(server.port) for proto, server in self.servers.items()}

    @property
    def config_text(self) -> str:
        """An Exchange config (TOML) with one device per served protocol and one tag per plant point.

        Tag paths are ``[plant]Line1/...``; :func:`simulators.config_text.render_config` takes another
        provider.
        """
        settings = {proto: server.client_settings() for proto, server in self.servers.items()
                    if hasattr(server, "client_settings")}
        return render_config(self.host, self.ports, self.assignment, device_settings=settings)

    def write_config(self, path: str | Path) -> Path:
        """Write :attr:`config_text` to ``path`` (parents created) and remember it as :attr:`config_path`."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.config_text, encoding="utf-8")
        self.config_path = target
        return target

    # -- by plant path ------------------------------------------------------------------------------

    # Paths may carry a tag provider ("[plant]Line1/Tank/Level") or not ("Line1/Tank/Level").

    def served_by(self, path: str) -> str:
        """The protocol serving plant point ``path``."""
        return self.assignment[self._point(path).area]

    def address_of(self, path: str) -> str:
        """The address of ``path`` on the server that serves it (as in the printed config)."""
        return address(self.served_by(path), self._point(path).path)

    def read(self, path: str) -> Any:
        """The value the serving server holds for ``path`` (what a client would read)."""
        proto, addr = self.served_by(path), self.address_of(path)
        with self.lock:
            return self._server(proto).get(addr)

    def write(self, path: str, value: Any) -> None:
        """Set ``path`` on its server as a client write would (server-side, not counted as a write)."""
        proto, addr = self.served_by(path), self.address_of(path)
        with self.lock:
            self._server(proto).set(addr, value)
            self._pushed.pop(self._point(path).path, None)

    # -- faults -------------------------------------------------------------------------------------

    def freeze(self, path: str, value: Any = None) -> None:
        """Stop syncing ``path``: the ticker neither reads nor writes it. ``value``: set it first.

        A frozen process value keeps the server's value while the model goes on; a frozen command
        makes the plant ignore what clients write to it. On a stopped server the value is set when it
        starts again.
        """
        point = self._point(path)
        proto = self.served_by(path)
        with self.lock:
            if value is not None:
                if point.writable:
                    self.plant.write(point.path, value)
                if self.is_running(proto):
                    self._server(proto).set(self.address_of(path), value)
            self._frozen[point.path] = value

    def unfreeze(self, path: str | None = None) -> None:
        """Resume syncing ``path`` (or every frozen point); the next tick brings it up to date."""
        with self.lock:
            for item in [self._point(path).path] if path is not None else list(self._frozen):
                self._frozen.pop(item, None)
                self._pushed.pop(item, None)

    @property
    def frozen(self) -> frozenset[str]:
        return frozenset(self._frozen)

    def set_mixer_fault(self, on: bool) -> None:
        with self.lock:
            self.plant.mixer_fault = on

    def stop_server(self, protocol: str) -> None:
        """Stop one server (clients see the connection refused); the rest of the plant runs on."""
        with self.lock:
            server = self._server(protocol)
            self._stopped.add(protocol)
            server.stop()

    def start_server(self, protocol: str) -> None:
        """Start a stopped server again on the same port, with the plant's current values."""
        with self.lock:
            server = self._server(protocol)
            if protocol not in self._stopped:
                return
            server.start()
            self._stopped.discard(protocol)
            self._push_protocol(protocol)

    def restart_server(self, protocol: str) -> None:
        """Stop and start a server on the same port (clients see their connection drop)."""
        with self.lock:
            server = self._server(protocol)
            self._stopped.add(protocol)
            server.restart()
            self._stopped.discard(protocol)
            self._push_protocol(protocol)

    def drop_connections(self, protocol: str) -> None:
        with self.lock:
            self._server(protocol).drop_connections()

    def is_running(self, protocol: str) -> bool:
        return protocol in self.servers and protocol not in self._stopped

    def reset(self) -> None:
        """Initial plant state everywhere: model reset, faults cleared, every point pushed to its server."""
        with self.lock:
            self._frozen.clear()
            self._warnings.clear()
            self.plant.reset()
            for proto in list(self._stopped):
                self._server(proto).start()
                self._stopped.discard(proto)
            self._push_all()
            opcua = self.servers.get("opcua")
            if opcua is not None and self.assignment["Mixer"] == "opcua":
                opcua.set(PROFILE_ADDRESS, list(PROFILE_INITIAL))

    # -- the sync step ------------------------------------------------------------------------------

    def sync_step(self, dt_seconds: float) -> None:
        """One ticker step: pull commands, advance the model by ``dt_seconds``, push process values."""
        with self.lock:
            self._pull_commands()
            self.plant.tick(dt_seconds)
            self._since_full_push_seconds += dt_seconds
            if self._since_full_push_seconds >= FULL_REFRESH_SECONDS:
                self._since_full_push_seconds = 0.0
                self._pushed.clear()
            self._push_process_values()

    def _run_ticker(self) -> None:
        last = time.monotonic()
        while not self._stop_ticker.wait(self.tick_interval_seconds):
            now = time.monotonic()
            dt = min(now - last, self.max_tick_seconds)
            last = now
            try:
                self.sync_step(dt)
            except Exception as exc:  # noqa: BLE001 - a server mid-restart must not kill the ticker
                self._warn_once("step", f"sync step failed: {type(exc).__name__}: {exc}")

    def _warn_once(self, key: str, message: str) -> None:
        """Log ``message`` unless ``key`` already failed the same way (a 10 Hz ticker would flood the log)."""
        if self._warnings.get(key) != message:
            logger.warning("simulated plant: %s", message)
            self._warnings[key] = message

    def _recovered(self, key: str) -> None:
        """``key`` works again: its next failure is logged."""
        if key in self._warnings:
            del self._warnings[key]
            logger.info("simulated plant: %s works again", key)

    # A failing server (its process died, it is mid-restart) is skipped for this step with a warning:
    # the rest of the plant keeps running, as the other PLCs of a real line would.

    def _pull_commands(self) -> None:
        for proto in self._live_protocols():
            wanted = [p for p in self._served[proto] if p.writable and p.path not in self._frozen]
            try:
                values = _get_values(self.servers[proto], [address(proto, p.path) for p in wanted])
            except Exception as exc:  # noqa: BLE001 - isolated per server, reported once
                self._warn_once(f"pull {proto}", f"reading commands from the {proto} server failed: "
                                f"{type(exc).__name__}: {exc}")
                continue
            self._recovered(f"pull {proto}")
            for point, value in zip(wanted, values):
                try:
                    self.plant.write(point.path, value)
                except ValueError as exc:  # e.g. NaN written to a setpoint: the plant keeps the last one
                    self._warn_once(point.path, str(exc))

    def _push_process_values(self) -> None:
        for proto in self._live_protocols():
            changes: dict[str, Any] = {}
            for point in self._served[proto]:
                if point.writable or point.path in self._frozen:
                    continue
                value = self.plant.read(point.path)
                if point.path not in self._pushed or self._pushed[point.path] != value:
                    changes[point.path] = value
            try:
                _set_values(self.servers[proto], {address(proto, path): v for path, v in changes.items()})
            except Exception as exc:  # noqa: BLE001 - isolated per server, retried next step
                self._warn_once(f"push {proto}", f"updating the {proto} server failed: {type(exc).__name__}: {exc}")
                continue
            if changes:
                self._recovered(f"push {proto}")
            self._pushed.update(changes)

    def _live_protocols(self) -> list[str]:
        return [p for p in self.protocols if p in self.servers and p not in self._stopped]

    def _push_protocol(self, protocol: str) -> None:
        """Every point of ``protocol`` from the model to its server (after a start or a reset).

        Frozen process values get the value they were frozen at, if any.
        """
        values: dict[str, Any] = {}
        for point in self._served[protocol]:
            if point.writable or point.path not in self._frozen:
                values[point.path] = self.plant.read(point.path)
            elif self._frozen[point.path] is not None:
                values[point.path] = self._frozen[point.path]
        _set_values(self.servers[protocol], {address(protocol, path): v for path, v in values.items()})
        self._pushed.update({path: v for path, v in values.items() if path not in self._frozen
                             and not POINTS_BY_PATH[path].writable})

    def _push_all(self) -> None:
        self._pushed.clear()
        for proto in self._live_protocols():
            self._push_protocol(proto)

    def _server(self, protocol: str) -> SimServer:
        try:
            return self.servers[protocol]
        except KeyError:
            raise ValueError(
                f"simulated plant has no {protocol!r} server (serving: {', '.join(self.servers) or 'none'})"
            ) from None

    @staticmethod
    def _point(path: str) -> PlantPoint:
        plain = path.split("]", 1)[1] if path.startswith("[") and "]" in path else path
        try:
            return POINTS_BY_PATH[plain]
        except KeyError:
            known = ", ".join(p.path for p in POINTS)
            raise KeyError(f"simulated plant has no point {path!r} (known: {known})") from None


def _get_values(server: SimServer, addresses: list[str]) -> list[Any]:
    """Several server-side values, in one round trip where the server offers ``get_many``."""
    get_many = getattr(server, "get_many", None)
    if get_many is not None and addresses:
        found = get_many(addresses)
        return [found[a] for a in addresses]
    return [server.get(a) for a in addresses]


def _set_values(server: SimServer, values: Mapping[str, Any]) -> None:
    """Several server-side changes, in one round trip where the server offers ``set_many``."""
    set_many = getattr(server, "set_many", None)
    if set_many is not None:
        if values:
            set_many(dict(values))
        return
    for addr, value in values.items():
        server.set(addr, value)
