"""The demo line served: :class:`PlantServers` is the config-driven simulator
(:class:`simulators.engine.SimulatedPlant`) serving the Line1 config of :mod:`simulators.config_text`
with the model of :mod:`simulators.plant`.

What it adds for the demo and its fixtures (``sim_plant``, ``plant_faults``): the areas split over
the chosen protocols (``protocols``; one device per protocol, ``sim_<protocol>``), ports by protocol,
servers and ports keyed by protocol, plant paths with or without the ``[plant]`` provider, and the
mixer fault. :class:`~simulators.plant.PlantParams` set the physics (rates, delays, initial values).
``modbus_transport`` serves Modbus as TCP, RTU over TCP, or RTU on a serial line (a pty pair whose
client end the written config names as ``serial_port``); with the Mixer on OPC UA the line also
serves an array tag and a method (:mod:`simulators.opcua_extras`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simulators.config_text import device_name, header, line1_document
from simulators.engine import SimulatedPlant
from simulators.plant import LINE, PlantParams, tag
from simulators.protocol_map import PROTOCOLS, assign_areas
from simulators.servers.base import SimServer
from simulators.spec import PointSpec

# the port written in the config while the server is still to take a free one
_PLACEHOLDER_PORTS = {"modbus": 5020, "opcua": 4840, "enip": 44818}


class PlantServers(SimulatedPlant):
    """The demo line on real servers; a context manager (``with PlantServers() as plant:``).

    ``ports``: protocol -> port (0 or missing: a free one; the real one is in :attr:`ports` after
    :meth:`start`; a serial Modbus has none). ``tick_hz``: steps per second. ``modbus_transport``:
    ``"tcp"``, ``"rtu-over-tcp"`` or ``"serial"``.
    """

    def __init__(self, params: PlantParams | None = None, *, protocols: Sequence[str] = PROTOCOLS,
                 host: str = "127.0.0.1", ports: Mapping[str, int] | None = None, tick_hz: float = 10.0,
                 modbus_transport: str = "tcp") -> None:
        from simulators.plant import LineModel

        if not tick_hz > 0:
            raise ValueError(f"tick_hz must be > 0, got {tick_hz!r}")
        self.params = params or PlantParams()
        self.assignment = assign_areas(protocols)
        self.protocols = tuple(p for p in PROTOCOLS if p in self.assignment.values())
        requested = {proto: int((ports or {}).get(proto, 0)) for proto in self.protocols}
        written = {proto: port or _PLACEHOLDER_PORTS[proto] for proto, port in requested.items()}
        tick_ms = max(1, round(1000.0 / tick_hz))
        document = line1_document(host, written, self.assignment, self.params, tick_ms, modbus_transport)
        super().__init__(
            _config(document), document=document, host=host, model=LineModel(self.params).step,
            ports={device_name(proto): port for proto, port in requested.items()}, tick_ms=tick_ms,
            header=header(self.assignment),
        )

    @property
    def servers(self) -> dict[str, SimServer]:
        """Protocol -> its server (``write_count``, ``inject_exception``, ...)."""
        return {proto: self._servers[device_name(proto)] for proto in self.protocols}

    @property
    def ports(self) -> dict[str, int]:
        """Protocol -> the port its server listens on."""
        return {proto: int(server.port) for proto, server in self.servers.items()}

    def point(self, path: str) -> PointSpec:
        """The point of a plant path, with or without its ``[plant]`` provider."""
        return super().point(path if path.startswith("[") else tag(path))

    def served_by(self, path: str) -> str:
        """The protocol serving plant point ``path``."""
        return self.spec.devices[self.point(path).device].config.driver

    def address_of(self, path: str) -> str:
        """The address of ``path`` on the server that serves it (as in the printed config)."""
        return self.point(path).address

    def stop_server(self, protocol: str) -> None:
        self.stop_device(protocol)

    def start_server(self, protocol: str) -> None:
        self.start_device(protocol)

    def restart_server(self, protocol: str) -> None:
        self.restart_device(protocol)

    def set_mixer_fault(self, on: bool) -> None:
        """Trip the mixer (Running drops, Fault rises) or clear the fault (it stays off until RunCmd)."""
        self.write(f"{LINE}/Mixer/Fault", bool(on))

    @property
    def mixer_fault(self) -> bool:
        return bool(self.state.values[self.point(f"{LINE}/Mixer/Fault").id])


def _config(document: Mapping[str, Any]) -> Any:
    from exchange._config import config_from_dict

    return config_from_dict(document, source="<simulated plant>", env={})
