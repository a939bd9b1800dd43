"""The one interface every protocol driver implements.

A driver owns the connection to one device. It is called from worker threads, concurrently; it
serialises access itself. It never imports the engine (``exchange.workflows``): it knows devices,
addresses and values, not runs.

Failure contract:
- ``read`` never raises for a single bad point: each point gets a QualifiedValue whose quality tells
  what went wrong (``Bad_NotConnected`` when the device cannot be reached, ``Bad_NotFound`` for an
  address the device does not have, ...).
- ``write`` raises :class:`exchange.errors.CommunicationError` when the request was not sent (the
  device cannot be reached), :class:`exchange.errors.AnswerLost` when it was sent, or partly sent, but
  its answer did not come back (the write may have been applied: the caller must not resend it
  blindly), :class:`exchange.errors.DeviceError` when the device refused it (fatal); the message names
  device, address and the device's own code.
- A device that is down makes calls fail fast (reconnect with backoff), so one dead device never
  blocks a step that talks to another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from exchange.tags.model import DataType, QualifiedValue


@dataclass(frozen=True)
class Point:
    """One addressed value on a device, as the tag table resolved it."""

    path: str  # the tag path, for error messages
    address: str  # protocol-specific address text, as in the config
    data_type: DataType | None  # None: the driver learns it from the device (OPC UA)
    bool_numbers: bool = False  # the tag allows booleans as 1/0 (where the driver learns the type)


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

    def close(self) -> None: ...


class SubscribingDriver(Driver, Protocol):
    """A driver that can push changes (OPC UA subscriptions); others are polled."""

    def subscribe(self, point: Point, on_change: Callable[[QualifiedValue], None]) -> Subscription: ...
