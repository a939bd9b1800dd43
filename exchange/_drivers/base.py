"""The interfaces of the driver layer: :class:`Driver` (one device) and :class:`DeviceProtocol` (one
``driver = "..."`` of the config: how to check its addresses and settings and make its drivers).

The layer knows devices, addresses and values (:mod:`exchange._values`), never tags or runs: it
imports none of the tags, the engine, the store and the authoring API (:mod:`exchange._tags`,
:mod:`exchange._engine`, :mod:`exchange._store`, :mod:`exchange.workflows`; ``tests/test_architecture.py``).
Each protocol is a package (``exchange._drivers.modbus``, ``.opcua``, ``.enip``) exposing one
DeviceProtocol object; :mod:`exchange._drivers.registry` maps the config's names to them.

A driver owns the connection to one device. It is called from worker threads, concurrently; it
serialises access itself.

Failure contract:
- ``read`` never raises for a single bad point: each point gets a QualifiedValue whose quality tells
  what went wrong (``Bad_NotConnected`` when the device cannot be reached, ``Bad_NotFound`` for an
  address the device does not have, ...).
- ``write`` raises :class:`exchange.errors.CommunicationError` when the request was not sent (the
  device cannot be reached), :class:`exchange.errors.AnswerLost` when it was sent, or partly sent, but
  its answer did not come back (the write may have been applied: the caller must not resend it
  blindly), :class:`exchange.errors.DeviceError` when the device refused it (fatal); the message names
  device, address and the device's own code.
- A device that is down makes calls fail fast (reconnect with :class:`exchange._backoff.Backoff`), so
  one dead device never blocks a step that talks to another. ``retry_now`` lets the next call try to
  connect at once: a write that waits for the link asks for it before each attempt, and so does an
  explicit read (a workflow's ``tags.read``, the first look of a wait), so they reach a device that
  is back instead of waiting out the reconnect backoff; polls do not, and keep to the backoff.

Values contract: ``write`` gets values the tag layer already converted to the point's data type
(:mod:`exchange._values.convert`); a driver encodes them and does not check them again. It may raise
TagTypeError/TagRangeError for a value it cannot encode at all (a last guard: never a partial send).
Where only the device knows the type (``data_type`` None, OPC UA) the driver converts by those same
rules once it has learned the type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from exchange._config import DeviceConfig
from exchange._values import DataType, QualifiedValue


@dataclass(frozen=True)
class Point:
    """One addressed value on a device, as the tag table resolved it."""

    path: str  # the tag path, for error messages
    address: str  # protocol-specific address text, as in the config
    data_type: DataType | None  # None: the driver learns it from the device (OPC UA)
    bool_numbers: bool = False  # the tag allows booleans as 1/0 (where the driver learns the type)
    array: bool = False  # the value is a list of ``data_type`` (``type = "Float32[]"``; OPC UA arrays)
    # the tag's own protocol keys (Modbus ``byte_order``, ``word_order``, ``rmw``), as its protocol's
    # check_tag_options accepted them, sorted by key
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, key: str, default: Any = None) -> Any:
        """The tag's protocol key ``key``, or ``default`` when the tag does not set it."""
        for name, value in self.options:
            if name == key:
                return value
        return default


class Subscription(Protocol):
    def cancel(self) -> None: ...


class Driver(Protocol):
    device: str

    def read(self, points: Sequence[Point]) -> list[QualifiedValue]:
        """Read all points, batched into as few requests as the protocol allows; same order."""
        ...

    def write(self, writes: Sequence[tuple[Point, Any]]) -> None:
        """Write each value (already converted to the point's data type) exactly once."""
        ...

    def retry_now(self) -> None:
        """The next call tries to connect at once if the device is down, whatever the reconnect
        backoff says (later failures back off as before). Sends nothing by itself."""
        ...

    def close(self) -> None: ...


class SubscribingDriver(Driver, Protocol):
    """A driver that can push changes (OPC UA subscriptions); others are polled."""

    def subscribe(self, point: Point, on_change: Callable[[QualifiedValue], None]) -> Subscription: ...


class MethodDriver(Driver, Protocol):
    """A driver whose device has methods to call (OPC UA); the others have none."""

    def call(self, point: Point, method: str, args: Sequence[Any],
             before_send: Callable[[], None] | None = None) -> list[Any]:
        """Call ``method`` of the object at ``point`` with ``args`` (typed from the method's
        signature, all checked before ``before_send`` runs and the request goes out); the method's
        output arguments. CommunicationError: not called; AnswerLost: sent, answer lost;
        DeviceError: refused (with the device's status code)."""
        ...


class DeviceProtocol(Protocol):
    """One protocol of the config's ``driver = "..."``: what the tag table and the tag service need.

    Each protocol package exposes one object implementing it (``exchange._drivers.modbus.MODBUS``,
    ...), found through :data:`exchange._drivers.registry.PROTOCOLS`. Its checks raise ConfigError
    (settings) or ConfigError/TagError (addresses) naming what is wrong; the registry adds the device.
    """

    name: str  # as in the config: "modbus", "opcua", "enip"

    def create(self, device: DeviceConfig) -> Driver:
        """A driver for ``device`` (ConfigError for bad settings); it connects on first use, not here."""
        ...

    def validate_settings(self, device: DeviceConfig) -> None:
        """Raise ConfigError naming the key when the ``[devices.NAME]`` settings cannot be used."""
        ...

    def check_devices(self, devices: Sequence[DeviceConfig]) -> None:
        """Raise ConfigError naming the device and key when devices of this protocol, each valid on
        its own (:meth:`validate_settings`), cannot work together (Modbus: two devices on one serial
        port at different baud rates). ``devices`` are all of this protocol's, in config order."""
        ...

    def parse_address(self, address: str, data_type: DataType | None) -> DataType | None:
        """Check an address without a device's settings; its effective data type, or None when the
        device decides (OPC UA, a Logix controller's tag list)."""
        ...

    def parse_device_address(self, device: DeviceConfig, address: str, data_type: DataType | None) -> DataType | None:
        """:meth:`parse_address` for ``device``: also what depends on its settings (Modbus
        ``zero_based``, Logix ``upload_tags``). What the tag table calls."""
        ...

    def address_writable(self, address: str) -> bool:
        """False for an address the protocol cannot write at all (Modbus IR, DI); True otherwise."""
        ...

    def check_value(self, point: Point, value: Any) -> None:
        """TagTypeError/TagRangeError when ``value`` (already converted to the point's type) cannot
        be encoded at the point's address at all (a Modbus string longer than its registers). Called
        by the tag layer for every value of a write before any device is sent anything; a protocol
        whose encoding cannot fail so (or depends on the device) accepts everything."""
        ...

    def check_tag_options(
        self, device: DeviceConfig, address: str, options: Mapping[str, Any], array: bool
    ) -> None:
        """ConfigError naming the key when the tag's protocol keys (``options``: Modbus ``byte_order``,
        ``word_order``, ``rmw``) or an array type (``type = "Float32[]"``) do not fit this protocol
        or this address. Called after :meth:`parse_device_address` accepted the address."""
        ...
