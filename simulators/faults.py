"""Faults for tests, on a :class:`simulators.engine.SimulatedPlant` (this is one of its bases).

By device (its name in the config; a driver name such as ``"modbus"`` when only one device has it):
:meth:`~Faults.stop_device` (clients get connection refused), :meth:`~Faults.start_device` (back on
the same port, with the plant's current values), :meth:`~Faults.restart_device`,
:meth:`~Faults.drop_connections`. By tag path: :meth:`~Faults.freeze` (clients see a fixed value
while the plant goes on: a stuck sensor, or a command the program ignores), :meth:`~Faults.set_bad`
(reads of the point answer a Bad quality, ``Bad_DeviceError`` through Exchange's drivers).
:meth:`~Faults.undo_faults` ends all of them.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulators.servers.base import SimServer
    from simulators.spec import PlantSpec, PointSpec
    from simulators.state import PlantState


class Faults:
    # provided by SimulatedPlant
    lock: threading.RLock
    _servers: dict[str, SimServer]
    spec: PlantSpec
    state: PlantState
    _running: set[str]
    _view: dict[str, Any]

    def __init__(self) -> None:
        self._bad: set[str] = set()  # point ids answering a Bad quality
        self._stopped: set[str] = set()  # devices stopped as a fault

    def point(self, path: str) -> PointSpec:
        raise NotImplementedError

    def _send(self, name: str, point_ids: set[str], *, force: bool = False) -> None:
        raise NotImplementedError

    def _device(self, name: str) -> str:
        """The device called ``name``, or the one device whose driver is ``name``."""
        if name in self.spec.devices:
            return name
        by_driver = [d for d, spec in self.spec.devices.items() if spec.config.driver == name]
        if len(by_driver) == 1:
            return by_driver[0]
        known = ", ".join(self.spec.devices) or "none"
        raise KeyError(f"the simulated plant has no device {name!r} (devices: {known})")

    # -- devices ------------------------------------------------------------------------------------

    def is_running(self, device: str) -> bool:
        return self._device(device) in self._running

    def stop_device(self, device: str) -> None:
        """Stop one device's server (connection refused); the rest of the plant goes on."""
        name = self._device(device)
        with self.lock:
            if name in self._running:
                self._running.discard(name)
                self._stopped.add(name)
                self._servers[name].stop()

    def start_device(self, device: str) -> None:
        """Start a stopped device again on its port, serving the plant's current values."""
        name = self._device(device)
        with self.lock:
            if name in self._running:
                return
            self._servers[name].start()
            self._running.add(name)
            self._stopped.discard(name)
            self._send(name, set(self.spec.devices[name].points), force=True)

    def restart_device(self, device: str) -> None:
        """Stop and start a device on the same port: every client connection drops."""
        name = self._device(device)
        with self.lock:
            self.stop_device(name)
            self.start_device(name)

    def drop_connections(self, device: str) -> None:
        """Close every client connection to a device; it keeps listening."""
        name = self._device(device)
        with self.lock:
            self._servers[name].drop_connections()

    # -- points -------------------------------------------------------------------------------------

    def freeze(self, path: str, value: Any = None) -> None:
        """Clients see tag ``path`` stuck at ``value`` (default: what they see now) and their writes
        to it are ignored by the plant, which goes on with its own value, until :meth:`unfreeze`.
        A status word and its bits are one register: freezing one freezes them all (a stuck register),
        the others showing what the frozen one's value makes them."""
        from simulators.state import to_point_value

        point = self.point(path)
        with self.lock:
            running = point.device in self._running
            group = self.spec.registers.group(point.id)
            shown = {pid: self.state.shown.get(pid, self._view[pid] if running else self.state.values[pid])
                     for pid in group}
            if value is not None:
                shown[point.id] = to_point_value(point, value, f"tag {path!r} ({point.data_type.value})")
            if len(group) > 1:
                word = self.spec.registers.word(point.id)
                assert word is not None
                shown.update(self.spec.registers.spread(point.id, shown, self.spec.points[word].data_type))
            for pid in group:
                self.state.freeze(pid, shown[pid])
            if running:
                self._send(point.device, set(group))

    def unfreeze(self, path: str | None = None) -> None:
        """End :meth:`freeze` of ``path`` (or of every point; of a word or a bit: of its whole
        register). What a client wrote meanwhile is taken by the plant; otherwise clients see the
        plant's own value again."""
        from simulators.engine import served_equal

        with self.lock:
            ids = self.spec.registers.group(self.point(path).id) if path is not None else list(self.state.shown)
            for pid in ids:
                point = self.spec.points[pid]
                shown = self.state.shown.get(pid)
                self.state.unfreeze(pid)
                if point.device not in self._running:
                    continue
                now = self._servers[point.device].get(point.address)
                if not served_equal(point, now, shown):
                    self._view[pid] = now
                    self.state.observe(pid, now)
                else:
                    self._send(point.device, {pid})

    @property
    def frozen(self) -> frozenset[str]:
        """The tag paths of frozen points (the first tag of each)."""
        with self.lock:
            return frozenset(self.spec.points[pid].paths[0] for pid in self.state.shown)

    def set_bad(self, path: str) -> None:
        """Reads of tag ``path`` answer a Bad quality (a failed sensor) until :meth:`set_good`.
        OPC UA: status BadSensorFailure; Modbus: exception 4 for any request touching the point;
        EtherNet/IP: CIP status 0x1F for the tag. Exchange reads each as ``Bad_DeviceError``."""
        point = self.point(path)
        with self.lock:
            self._servers[point.device].set_bad(point.address)  # type: ignore[attr-defined]
            self._bad.add(point.id)

    def set_good(self, path: str | None = None) -> None:
        """End :meth:`set_bad` of ``path`` (or of every point)."""
        with self.lock:
            ids = [self.point(path).id] if path is not None else list(self._bad)
            for pid in ids:
                point = self.spec.points[pid]
                self._servers[point.device].set_good(point.address)  # type: ignore[attr-defined]
                self._bad.discard(pid)

    @property
    def bad(self) -> frozenset[str]:
        with self.lock:
            return frozenset(self.spec.points[pid].paths[0] for pid in self._bad)

    def undo_faults(self) -> None:
        """Unfreeze every point, end every Bad quality, start every device stopped by :meth:`stop_device`."""
        with self.lock:
            self.unfreeze()
            self.set_good()
            for name in sorted(self._stopped):
                self.start_device(name)
