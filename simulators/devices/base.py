"""What the config-driven simulator needs from each protocol: one :class:`DeviceKind` per
``driver = "..."`` of the config, in a module of its own (``simulators/devices/modbus.py``, ...).

A kind answers four questions about a ``[devices.NAME]`` table and its tags, and raises
:class:`UnservableError` (a message without the device or tag: the caller adds them) for anything it
cannot serve:

- :meth:`DeviceKind.endpoint`: the port (and OPC UA path) the config gives the device;
- :meth:`DeviceKind.slot`: where a tag's address lives on the device, so that two tags on one
  address share one point and two tags that overlap without being the same are refused;
- :meth:`DeviceKind.server`: the real protocol server for the device's points
  (:class:`simulators.servers.base.SimServer`);
- :meth:`DeviceKind.device_out` / :meth:`DeviceKind.tag_out`: the device's and its tags' tables as
  the written config (``--config-out``) needs them to reach the simulator.

Adding a protocol or a transport is one module here and one line in :mod:`simulators.devices`; address
syntax is never parsed here but by the driver's own parser (``exchange._drivers.*``), so the simulator
serves exactly what the gateway will ask for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from exchange._config import DeviceConfig
from exchange._values import DataType
from simulators.servers.base import SimPoint, SimServer


class UnservableError(ValueError):
    """The simulator cannot serve this device or address; the message says why (no names)."""


@dataclass(frozen=True)
class Endpoint:
    """Where the config says the device listens: ``host``, ``port`` and, for OPC UA, ``path``; a
    device on a serial line has ``serial_port`` instead (and port 0: nothing listens on the network)."""

    host: str
    port: int
    path: str = ""
    serial_port: str = ""

    def show(self, host: str | None = None, port: int | None = None, serial_port: str | None = None) -> str:
        """``host:port`` (``opc.tcp://host:port/path`` with a path), optionally with another host or
        port; a serial line's port (``serial_port`` instead of the configured one)."""
        if self.serial_port:
            return f"serial {serial_port or self.serial_port}"
        where = f"{host or self.host}:{self.port if port is None else port}"
        return f"opc.tcp://{where}{self.path}" if self.path else where


@dataclass(frozen=True)
class Slot:
    """Where an address lives on its device.

    ``key``: tags with equal keys are one point (they must agree on the type). ``span``: for memory
    where values can overlap (Modbus registers) ``(space, first, end)``; two different keys whose
    spans overlap are refused. ``group``: ``(name, signature)`` for addresses that share one object on
    the device (the elements of one Logix array): the same name needs the same signature.
    ``data_type``: the type the address itself implies (Modbus ``HRF1``), else None. ``bit``: the
    address is that bit of the register its ``span`` covers (Modbus ``HR10.3``); such a point shares
    its register with the register's other bits and with a 16-bit word there
    (:mod:`simulators.register_bits`).
    """

    key: Hashable
    span: tuple[Hashable, int, int] | None = None
    group: tuple[Hashable, Hashable] | None = None
    data_type: DataType | None = None
    bit: int | None = None


@dataclass(frozen=True)
class ServedMethod:
    """A method to serve on the object at ``object_address``: ``inputs``/``outputs`` as
    ``(name, data type, array)``; ``answer(inputs)`` gives the outputs in order, or raises
    :class:`simulators.servers.opcua_methods.MethodRefused` (the call is answered with its status)."""

    object_address: str
    name: str
    inputs: tuple[tuple[str, DataType, bool], ...]
    outputs: tuple[tuple[str, DataType, bool], ...]
    answer: Callable[[list[Any]], Sequence[Any]]


class DeviceKind(Protocol):
    """One protocol (a ``driver`` of the config) as the simulator serves it."""

    driver: str
    arrays: bool  # serves array tags (``type = "Int16[]"``)
    methods: bool  # serves objects with methods (``[simulation.tags."PATH".methods]``)

    def endpoint(self, device: DeviceConfig) -> Endpoint:
        """The configured endpoint; UnservableError for a device the simulator cannot serve (an
        driver it does not serve, say), ConfigError for settings the driver itself refuses."""
        ...

    def slot(self, device: DeviceConfig, address: str, data_type: DataType | None) -> Slot:
        """Where ``address`` lives; UnservableError for an address that cannot be served."""
        ...

    def infer_type(self, value: bool | int | float | str) -> DataType:
        """The type to serve for a tag without one, from its ``initial`` value."""
        ...

    def check_type(self, data_type: DataType) -> None:
        """UnservableError when the protocol's server cannot hold ``data_type``."""
        ...

    def server(self, device: DeviceConfig, points: Sequence[SimPoint], host: str, port: int,
               methods: Sequence[ServedMethod] = ()) -> SimServer:
        """The server (not started) for ``points`` and ``methods``; UnservableError when it cannot be built."""
        ...

    def device_out(self, table: Mapping[str, Any], configured: Endpoint, host: str, port: int,
                   server: SimServer) -> dict[str, Any]:
        """The device's table for the written config: pointing at ``host:port`` (or what ``server``
        says, e.g. the serial port of its pty pair) instead of the ``configured`` endpoint, and with
        what the simulator needs the gateway to do (e.g. Logix ``upload_tags = false``)."""
        ...

    def tag_out(self, table: Mapping[str, Any], data_type: DataType) -> dict[str, Any]:
        """A tag's table for the written config (e.g. a Logix tag gets its ``type``)."""
        ...


def require_types(kind: str, data_type: DataType, served: Sequence[DataType]) -> None:
    """UnservableError unless ``data_type`` is one of ``served``."""
    if data_type not in served:
        names = ", ".join(t.value for t in served)
        raise UnservableError(f"the {kind} simulator serves {names}, not {data_type.value}")
