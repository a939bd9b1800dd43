"""The simulated plant of an Exchange config: one real protocol server per device, and a ticker.

:class:`SimulatedPlant` serves every device of a config (``simulators.spec`` says what, and refuses
what it cannot serve before anything listens) on the simulator's host: each at its configured port,
or at free ports (``free_ports=True``, or ``ports={"device": 0}``). Every ``tick_ms`` the ticker, under
one lock:

1. reads every point from its server: a value that differs from what the plant last sent is a
   client's write, which the plant takes (:meth:`PlantState.observe`);
2. steps the plant by the real time elapsed (follows, then the model);
3. sends the points the plant changed to their servers.

The plant owns what it writes: a model that sets a level every tick overwrites a client's write to it.
A server that fails (a stopped device, a crashed child) is skipped with one warning; what the plant
changed meanwhile is sent when it answers again, and a device started again gets all its values.

Tests get :meth:`read`/:meth:`write` by tag path, :meth:`advance` (simulated seconds, at once) and the
faults of :mod:`simulators.faults` (stop/start/restart a device, drop its connections, freeze a
point, make it read Bad).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import math
import struct
import threading
import time
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from exchange._config import Config, config_from_dict, load_config
from exchange._values import DataType
from simulators import config_out
from simulators.devices.base import ServedMethod, UnservableError
from simulators.faults import Faults
from simulators.model_loader import function_of, load_module, step_of
from simulators.phases import PhaseMachine
from simulators.ports import check_port_free
from simulators.servers.base import SimPoint, SimServer
from simulators.spec import MethodSpec, PlantSpec, PointSpec, SimulationError, build_spec
from simulators.state import PlantState, PlantView, StepFunction, to_point_value

log = logging.getLogger(__name__)

MAX_STEP_S = 0.5  # a ticker that falls behind (a busy machine) steps at most this much at once
_WILDCARDS = ("", "0.0.0.0", "::")


def served_equal(point: PointSpec, a: Any, b: Any) -> bool:
    """Whether a server holding ``a`` holds ``b`` (a Float32 keeps 24 bits of a float; arrays element
    by element)."""
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(_scalar_equal(point, x, y) for x, y in zip(a, b)))
    return _scalar_equal(point, a, b)


def _scalar_equal(point: PointSpec, a: Any, b: Any) -> bool:
    if point.data_type is DataType.FLOAT32 and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        try:
            return struct.pack("<f", a) == struct.pack("<f", b)
        except (OverflowError, struct.error):
            return bool(a == b)
    return type(a) is type(b) and bool(a == b)


class SimulatedPlant(Faults):
    """The config's devices served, ticking; a context manager (``with SimulatedPlant(...) as sim:``).

    ``model``: a ``step(plant, dt_s)`` used instead of ``[simulation] model``; ``tick_ms`` instead of
    ``[simulation] tick_ms``. ``document``: the config as written (for :attr:`config_text`), else
    the file of ``config.source`` is read again. Thread-safe: the ticker and callers share
    :attr:`lock`.
    """

    def __init__(self, config: Config, *, document: Mapping[str, Any] | None = None, host: str = "127.0.0.1",
                 ports: Mapping[str, int] | None = None, free_ports: bool = False, model: StepFunction | None = None,
                 tick_ms: int | None = None, header: str = "") -> None:
        self.spec: PlantSpec = build_spec(config)
        model_file: str | None = None
        module = None
        if self.spec.model is not None and (model is None or self.spec.methods):
            module = load_module(self.spec.model)
        if model is None and module is not None and self.spec.model is not None:
            model, model_file = step_of(module, self.spec.model)
        # (device, object address, method) -> the model's function answering it
        self._answers: dict[tuple[str, str, str], Callable[..., Any]] = {
            (m.device, m.address, m.name): function_of(module, str(self.spec.model), m.call,
                                                      f"tag {m.path!r} method {m.name}")
            for m in self.spec.methods if module is not None}
        self.state = PlantState(self.spec, model, model_file)
        watchdog = config.watchdog
        self.phases: dict[str, PhaseMachine] = {
            name: PhaseMachine(config.phases[name], simulated, heartbeat=watchdog.tag,
                               heartbeat_period_s=watchdog.period_ms / 1000)
            for name, simulated in config.simulation.phases.items()}
        self.state.machines.extend(self.phases.values())
        self.state.prime_machines()
        self.host = host
        self.tick_ms = tick_ms or self.spec.tick_ms
        self.lock = threading.RLock()
        self._document = dict(document) if document is not None else _read_document(config)
        self._header = header
        self._listen = self._listen_ports(ports or {}, free_ports)
        self._servers: dict[str, SimServer] = self._build_servers()
        self._running: set[str] = set()
        self._view: dict[str, Any] = {pid: point.initial for pid, point in self.spec.points.items()}
        self._unsent: dict[str, set[str]] = {name: set() for name in self.spec.devices}
        self._warned: dict[str, str] = {}
        self._ticker: threading.Thread | None = None
        self._tick_at = time.monotonic()  # when the last tick ran (writes between ticks count from it)
        self._stop_ticker = threading.Event()
        self.config_path: Path | None = None
        Faults.__init__(self)

    @classmethod
    def from_file(cls, path: str | Path, **options: Any) -> SimulatedPlant:
        """The plant of the config file at ``path`` (ConfigError/SimulationError naming what is wrong)."""
        return cls(load_config(path, env=None), **options)

    @classmethod
    def from_document(cls, document: Mapping[str, Any], *, base_dir: str | Path = ".", source: str = "<config>",
                      **options: Any) -> SimulatedPlant:
        """The plant of a config given as a TOML document (a dict as ``tomllib`` gives it)."""
        config = config_from_dict(document, source=source, base_dir=base_dir)
        return cls(config, document=document, **options)

    # -- set-up -------------------------------------------------------------------------------------

    def _listen_ports(self, ports: Mapping[str, int], free: bool) -> dict[str, int]:
        unknown = sorted(set(ports) - set(self.spec.devices))
        if unknown:
            raise SimulationError(f"no device {', '.join(repr(u) for u in unknown)} to give a port "
                                  f"(devices: {', '.join(self.spec.devices) or 'none'})")
        # a device on a serial line listens on no port (its pty pair is its own)
        chosen = {name: 0 if free or device.endpoint.serial_port else int(ports.get(name, device.endpoint.port))
                  for name, device in self.spec.devices.items()}
        owners: dict[int, str] = {}
        for name, port in chosen.items():
            if port and port in owners:
                raise SimulationError(f"devices {owners[port]!r} and {name!r} both listen on port {port}: the "
                                      "simulator serves one device per port (give them different ports, or use "
                                      "free ports)")
            owners.setdefault(port, name)
        return chosen

    def _build_servers(self) -> dict[str, SimServer]:
        servers: dict[str, SimServer] = {}
        errors: list[str] = []
        for name, device in self.spec.devices.items():
            points = [self.spec.points[pid] for pid in device.points]
            sim_points = [SimPoint(p.address, p.data_type, p.initial, p.writable, p.array, p.length) for p in points]
            methods = [ServedMethod(m.address, m.name, tuple((a.name, a.data_type, a.array) for a in m.inputs),
                                    tuple((a.name, a.data_type, a.array) for a in m.outputs),
                                    functools.partial(self._answer, m))
                       for m in device.methods]
            try:
                servers[name] = device.kind.server(device.config, sim_points, self.host, self._listen[name], methods)
            except (UnservableError, ValueError) as exc:
                errors.append(f"  - device {name!r} ({device.config.driver}): {exc}")
        if errors:
            raise SimulationError(f"{self.spec.config.source}: the simulator cannot serve this config:\n"
                                  + "\n".join(errors))
        return servers

    # -- life cycle ---------------------------------------------------------------------------------

    def start(self, *, ticker: bool = True) -> Self:
        """Listen on every device's port, then tick. Fixed ports are checked first, so a port in use
        is an error naming the device before anything listens; a server that fails to start stops
        the others. ``ticker=False``: nothing moves until :meth:`advance` (deterministic tests)."""
        for name, port in self._listen.items():
            if port:
                check_port_free(self.host, port, f"device {name!r} ({self.spec.devices[name].config.driver})")
        failures: dict[str, BaseException] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self._servers))) as pool:
            futures = {name: pool.submit(server.start) for name, server in self._servers.items()}
            for name, future in futures.items():
                try:
                    future.result()
                    self._running.add(name)
                except BaseException as exc:  # noqa: BLE001 - collected, named, and everything stopped
                    failures[name] = exc
        if failures:
            self.stop()
            lines = "\n".join(f"  - device {name!r} on {self.host}:{self._listen[name]}: {type(exc).__name__}: {exc}"
                              for name, exc in failures.items())
            raise SimulationError(f"the simulated plant could not start:\n{lines}")
        for name in self._servers:
            log.info("simulated device %s (%s) on %s", name, self.spec.devices[name].config.driver, self.endpoint(name))
        with self.lock:
            self._push()  # what the plant set before serving (a phase's Idle) is served from the start
        if ticker:
            self._stop_ticker.clear()
            self._ticker = threading.Thread(target=self._run_ticker, name="sim-ticker", daemon=True)
            self._ticker.start()
        return self

    def stop(self) -> None:
        """Stop the ticker, then every server (errors while stopping are logged, not raised); a
        serial device's pty pair is unlinked too (a device stopped as a fault keeps it)."""
        self._stop_ticker.set()
        if self._ticker is not None:
            self._ticker.join(timeout=10.0)
            self._ticker = None
        with self.lock:
            for name in list(self._servers)[::-1]:
                server = self._servers[name]
                if name not in self._running and not hasattr(server, "close"):
                    continue
                try:
                    getattr(server, "close", server.stop)()
                except Exception:  # noqa: BLE001 - the others must stop too
                    log.warning("simulated plant: stopping device %s failed", name, exc_info=True)
            self._running.clear()

    def __enter__(self) -> Self:
        return self if self._running else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def servers(self) -> dict[str, SimServer]:
        """Device -> its server (``write_count``, ``read_count``, ... for tests)."""
        return dict(self._servers)

    @property
    def ports(self) -> dict[str, int]:
        """Device -> the port its server listens on (after :meth:`start`)."""
        return {name: int(server.port) for name, server in self._servers.items()}

    @property
    def client_host(self) -> str:
        """The host clients on this machine use (the loopback when listening everywhere)."""
        return "127.0.0.1" if self.host in _WILDCARDS else self.host

    def endpoint(self, device: str) -> str:
        """Where clients reach ``device``: ``host:port``, or its ``opc.tcp://`` URL."""
        spec = self.spec.devices[self._device(device)]
        server = self._servers[spec.name]
        return spec.endpoint.show(self.client_host, server.port, getattr(server, "serial_port", None))

    @property
    def time_s(self) -> float:
        """Simulated seconds since the start (or the last :meth:`reset`)."""
        return self.state.time_s

    @property
    def model_errors(self) -> list[str]:
        """What the model raised (each different error once, with the model's line and the tag)."""
        with self.lock:
            return list(self.state.model_errors)

    # -- the written config -------------------------------------------------------------------------

    def config_document(self, for_path: str | Path | None = None, *, absolute: bool = False) -> dict[str, Any]:
        """The config pointing at this simulator's servers, as a TOML document (a dict, e.g. for
        ``running_engine``); before :meth:`start`, a device on a free port has its configured port.
        Relative paths are made absolute when ``absolute``, or when ``for_path`` (where it will be
        written) is in another folder than the original config."""
        # a server that has not taken its free port yet (before start) is written with the configured one
        devices = {name: device.kind.device_out(self._document.get("devices", {}).get(name, {}), device.endpoint,
                                                self.client_host, self._servers[name].port or device.endpoint.port,
                                                self._servers[name])
                   for name, device in self.spec.devices.items()}
        tags: dict[str, dict[str, Any]] = {}
        for written, table in self._document.get("tags", {}).items():
            data_type = self.spec.tag_types.get(written)
            device = self.spec.devices.get(table.get("device", ""))
            if data_type is not None and device is not None:
                tags[written] = device.kind.tag_out(table, data_type)
        base = Path(self.spec.config.base_dir)
        moved = absolute or (for_path is not None and Path(for_path).resolve().parent != base)
        return config_out.rewrite(self._document, devices, tags, base_dir=base if moved else None)

    @property
    def config_text(self) -> str:
        """:meth:`config_document` as TOML."""
        return config_out.dumps(self.config_document(), self._header)

    def write_config(self, path: str | Path) -> Path:
        """Write the config pointing at this simulator to ``path`` (its folder must exist); it is
        :attr:`config_path` then."""
        target = Path(path)
        target.write_text(config_out.dumps(self.config_document(target), self._header), encoding="utf-8")
        self.config_path = target
        return target

    # -- values by tag path -------------------------------------------------------------------------

    def phase_state(self, name: str) -> str:
        """The state name the PLC side of phase ``name`` ([simulation.phases]) is in now."""
        with self.lock:
            return self._phase(name).state

    def command_phase(self, name: str, command: str) -> None:
        """The PLC gives phase ``name`` the command ``command`` by itself at the next step: an
        equipment-initiated HOLD, a STOP (the phase failed), an ABORT."""
        with self.lock:
            self._phase(name).command(command)

    def finish_phase(self, name: str) -> None:
        """Phase ``name`` has done its work: it completes at its next running step (now if running,
        once restarted if held), as if ``duration_s`` had passed."""
        with self.lock:
            self._phase(name).finish()

    def phase_commands(self, name: str) -> list[str]:
        """Every command the PLC side of phase ``name`` acted on, in order (a test counts the Starts)."""
        with self.lock:
            return list(self._phase(name).commands_taken)

    def _phase(self, name: str) -> PhaseMachine:
        machine = self.phases.get(name)
        if machine is None:
            raise KeyError(f"no simulated phase {name!r} (simulated: {', '.join(sorted(self.phases)) or 'none'})")
        return machine

    def point(self, path: str) -> PointSpec:
        """The point tag ``path`` names (KeyError naming the path for an unknown one)."""
        return self.spec.points[self.state.resolve(path)]

    def read(self, path: str) -> Any:
        """What a client reads at tag ``path`` now (for a stopped device: what it will serve again)."""
        point = self.point(path)
        with self.lock:
            if point.device in self._running:
                return self._servers[point.device].get(point.address)
            return self.state.shown.get(point.id, self.state.values[point.id])

    def value(self, path: str) -> Any:
        """The plant's own value of tag ``path``: what :meth:`read` gives, except while the point is
        frozen (clients see the frozen value) or its device is stopped."""
        point = self.point(path)
        with self.lock:
            return self.state.values[point.id]

    def write(self, path: str, value: Any) -> None:
        """Set tag ``path`` as the plant: converted to its type (ValueError naming the tag), served at
        once, and the plant's value from now on (a model goes on from it; a follower's source change)."""
        point = self.point(path)
        converted = to_point_value(point, value, f"tag {path!r} ({point.data_type.value})")
        with self.lock:
            late_us = 0
            if self._ticker is not None:  # between two ticks: its followers count from now
                # Capped as the ticker's step is, not at one tick: after a late tick a write can come
                # more than a tick after the time the plant's clock stands at, and its followers must
                # still wait their whole delay (the next step moves the clock at most as far).
                late_us = max(0, min(round((time.monotonic() - self._tick_at) * 1e6), round(self._max_step_s() * 1e6)))
            self.state.set(point.id, converted, late_us=late_us)
            self._push()

    def _answer(self, method: MethodSpec, inputs: list[Any]) -> list[Any]:
        """A client called ``method`` (on the server's worker thread): the model's function gets the
        plant as ``step`` does (what clients wrote so far taken first) and the inputs. Its changes
        apply, and are served, only when it returns: a refusal (``MethodRefused``) or an error changes
        nothing. An error is answered BadInternalError and kept in :attr:`model_errors`."""
        from simulators.servers.opcua_methods import MethodRefused

        function = self._answers[(method.device, method.address, method.name)]
        with self.lock:
            self._pull()
            view = PlantView(self.state, 0.0)
            try:
                result = function(view, *inputs)
            except MethodRefused:
                raise
            except Exception as exc:  # noqa: BLE001 - the engineer's code: named, and the plant serves on
                message = f"method {method.name} of {method.path!r}: {self.state.describe(exc)}"
                self.state.report(message)
                raise MethodRefused("BadInternalError", message) from exc
            for point_id, value in view.staged.items():
                self.state.set(point_id, value)
            self._push()
        count = len(method.outputs)
        if count == 0:
            return []
        if count == 1:
            return [result]
        outputs = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(outputs) != count:
            raise MethodRefused("BadInternalError", f"method {method.name}: the model gave {len(outputs)} "
                                f"output(s), the method declares {count}")
        return outputs

    def advance(self, seconds: float) -> None:
        """Step the plant ``seconds`` of simulated time at once, in steps of ``tick_ms``: follows and
        the model move as if that time had passed; the workflow's clock does not."""
        if not (seconds >= 0 and math.isfinite(seconds)):
            raise ValueError(f"advance takes a finite number of seconds >= 0, got {seconds!r}")
        with self.lock:
            self._pull()
            steps = max(1, math.ceil(round(seconds * 1000 / self.tick_ms, 6)))
            for _ in range(steps):
                self.state.step(seconds / steps)
            self._push()

    def reset(self) -> None:
        """The initial state everywhere: values, time 0, faults undone, stopped devices started."""
        with self.lock:
            self.undo_faults()
            self.state.reset()
            for name in self._servers:
                if name not in self._running:
                    self.start_device(name)
                self._send(name, set(self.spec.devices[name].points), force=True)

    # -- the sync step ------------------------------------------------------------------------------

    def sync_step(self, dt_s: float, at: float | None = None) -> None:
        """One tick: ``dt_s`` has passed; take what clients wrote meanwhile, step the plant, send
        what changed. ``at``: the monotonic time the plant's clock reaches with this tick (default:
        now); a write between this tick and the next counts from it."""
        with self.lock:
            self.state.advance_clock(dt_s)
            # The ticker's own reading, not the time the lock came free: a tick that waited for the
            # lock would otherwise date later writes after the plant's clock, and their followers
            # would move that much early.
            self._tick_at = time.monotonic() if at is None else at
            self._pull()
            self.state.run(dt_s)
            self._push()

    def _max_step_s(self) -> float:
        """The most simulated time one tick moves the plant's clock (a ticker that fell behind)."""
        return max(MAX_STEP_S, 5 * self.tick_ms / 1000.0)

    def _run_ticker(self) -> None:
        interval_s = self.tick_ms / 1000.0
        last = time.monotonic()
        while not self._stop_ticker.wait(interval_s):
            now = time.monotonic()
            dt_s, last = min(now - last, self._max_step_s()), now
            try:
                self.sync_step(dt_s, at=now)
            except Exception as exc:  # noqa: BLE001 - one bad tick must not stop the plant
                self._warn_once("tick", f"a tick failed: {type(exc).__name__}: {exc}")

    def _pull(self) -> None:
        for name in self._live():
            device = self.spec.devices[name]
            wanted = [self.spec.points[pid] for pid in device.points if pid not in self.state.shown]
            try:
                found = _get_values(self._servers[name], [p.address for p in wanted])
            except Exception as exc:  # noqa: BLE001 - isolated per device, said once
                self._warn_once(f"read {name}", f"reading device {name!r} failed: {type(exc).__name__}: {exc}")
                continue
            self._recovered(f"read {name}")
            for point, value in zip(wanted, found):
                if not served_equal(point, value, self._view[point.id]):
                    self._view[point.id] = value
                    self.state.observe(point.id, value)

    def _push(self) -> None:
        changed = self.state.take_changes()
        for name, device in self.spec.devices.items():
            pending = self._unsent[name]
            pending.update(pid for pid in device.points if pid in changed)
            if pending and name in self._live():
                self._send(name, pending)

    def _send(self, name: str, point_ids: set[str], *, force: bool = False) -> None:
        """Send the plant's values of ``point_ids`` (frozen ones: their shown value) to device ``name``."""
        values: dict[str, Any] = {}
        for pid in point_ids:
            point = self.spec.points[pid]
            value = self.state.shown.get(pid, self.state.values[pid])
            if force or not served_equal(point, value, self._view[pid]):
                values[pid] = value
        try:
            _set_values(self._servers[name], {self.spec.points[pid].address: v for pid, v in values.items()})
        except Exception as exc:  # noqa: BLE001 - kept, and sent again at the next tick
            self._unsent[name] |= point_ids
            self._warn_once(f"write {name}", f"updating device {name!r} failed: {type(exc).__name__}: {exc}")
            return
        self._view.update(values)
        self._unsent[name] = set()
        if values:
            self._recovered(f"write {name}")

    def _live(self) -> list[str]:
        return [name for name in self.spec.devices if name in self._running]

    def _warn_once(self, key: str, message: str) -> None:
        if self._warned.get(key) != message:
            log.warning("simulated plant: %s", message)
            self._warned[key] = message

    def _recovered(self, key: str) -> None:
        if self._warned.pop(key, None) is not None:
            log.info("simulated plant: %s works again", key)


def _read_document(config: Config) -> dict[str, Any]:
    """The config file as written (``${VAR}`` not expanded), for the written config."""
    source = Path(config.source)
    if not source.is_file():
        return {}
    return tomllib.loads(source.read_text(encoding="utf-8-sig"))


def _get_values(server: SimServer, addresses: list[str]) -> list[Any]:
    """Several server-side values, in one round trip where the server offers ``get_many``."""
    if not addresses:
        return []
    get_many = getattr(server, "get_many", None)
    if get_many is not None:
        found = get_many(addresses)
        return [found[a] for a in addresses]
    return [server.get(a) for a in addresses]


def _set_values(server: SimServer, values: Mapping[str, Any]) -> None:
    """Several server-side changes, in one round trip where the server offers ``set_many``."""
    if not values:
        return
    set_many = getattr(server, "set_many", None)
    if set_many is not None:
        set_many(dict(values))
        return
    for address, value in values.items():
        server.set(address, value)
