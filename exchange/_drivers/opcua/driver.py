"""OPC UA driver (asyncua): NodeId addresses, batched reads and writes, subscriptions, security.

The registry makes it through :data:`exchange._drivers.opcua.OPCUA` from a ``[devices.NAME]`` table
whose ``driver = "opcua"`` (settings: see :mod:`exchange._drivers.opcua.settings`).

:class:`OpcUaDriver` is synchronous and thread-safe: it owns one asyncio event loop in a background
thread (:class:`~exchange._drivers.opcua.loop.LoopThread`) holding the device's connection, and every
call hands a coroutine to that loop. What it guarantees:

- ``read(points)`` sends ONE Read request for all points and never raises: each point gets a
  QualifiedValue (``Bad_NotFound`` for BadNodeIdUnknown, ``Bad_NotConnected`` while the device is down,
  ``Bad_AccessDenied`` when the server refuses the login, ...).
- ``write(writes)`` sends ONE Write request with each value as its node's exact variant type (the
  node's type is read once per connection). A value the tag layer converted to the node's type is
  only encoded; one for a tag without ``type`` is converted here for the node's type, by the same
  rules (:mod:`exchange._drivers.opcua.encode`). A value that does not fit raises TagTypeError or
  TagRangeError before anything is sent; a bad status raises DeviceError naming device, NodeId and
  the status name; a lost connection raises CommunicationError.
- ``call(point, method, args)`` calls a method of the object at the point's address, its
  arguments typed from the method's InputArguments before anything is sent
  (:mod:`exchange._drivers.opcua.methods`); a refused call's status code is in the error.
- Arrays: a list is written to a node whose ValueRank allows an array, each element as the node's
  type; reads of array nodes give lists.
- ``subscribe(point, on_change)`` calls ``on_change`` with the current value, then with each change
  (publishing interval 0: about a millisecond after the server's change), ``Bad_NotConnected`` while
  the device is down, and the current value again once reconnected: subscriptions survive
  reconnections. ``on_change`` runs on the driver's loop thread: keep it short and never call the
  driver from it (``cancel()`` of the returned handle is allowed anywhere).
- A device that is down fails fast: calls return ``Bad_NotConnected`` / raise CommunicationError at
  once while the driver backs off (``reconnect_min_ms`` doubling to ``reconnect_max_ms``).
- ``close()`` closes the session and stops the thread; nothing is left running.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from exchange._drivers.base import Point
from exchange._drivers.opcua.loop import LoopThread
from exchange._drivers.opcua.session import OpcUaSession
from exchange._drivers.opcua.settings import OpcUaSettings
from exchange._drivers.opcua.values import NodeAddress, parse_node_id
from exchange._values import QualifiedValue, Quality
from exchange.errors import AnswerLost, CommunicationError, TagPathError

__all__ = ["OpcUaDriver", "OpcUaSubscription"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class OpcUaSubscription:
    """Handle returned by :meth:`OpcUaDriver.subscribe`; ``cancel()`` is idempotent."""

    def __init__(self, driver: OpcUaDriver, record_id: int, address: str) -> None:
        self._driver = driver
        self._record_id = record_id
        self.address = address
        self._cancelled = False

    def cancel(self) -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self._driver._unsubscribe(self._record_id)


class _Closed(Exception):
    """The driver was closed (before or during the call)."""


class OpcUaDriver:
    """One OPC UA device (see the module docstring for the contract)."""

    def __init__(self, settings: OpcUaSettings) -> None:
        self.device = settings.device
        self.settings = settings
        self._session = OpcUaSession(settings)
        self._loop = LoopThread(f"opcua-{settings.device}")
        self._addresses: dict[str, NodeAddress] = {}
        self._lock = threading.Lock()
        self._closed = False
        # connect + type lookup + request, each bounded by timeout_ms on the loop; this is a backstop
        self._wait_s = 4 * settings.timeout_s + 1.0
        self._target = f"OPC UA device {settings.device!r}"

    def __repr__(self) -> str:
        return f"OpcUaDriver({self.device!r}, {self.settings.url!r})"

    @property
    def connected(self) -> bool:
        return self._session.connected

    def _address(self, point: Point) -> NodeAddress:
        address = self._addresses.get(point.address)
        if address is None:
            try:
                address = parse_node_id(point.address)
            except TagPathError as exc:
                raise TagPathError(f"tag {point.path!r} on device {self.device!r}: {exc}") from None
            self._addresses[point.address] = address
        return address

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the driver's loop; TimeoutError past the backstop, _Closed once closed."""
        if self._loop.in_loop_thread():
            coro.close()
            raise RuntimeError(f"{self._target}: do not read, write or subscribe from a subscription callback")
        if self._closed:
            coro.close()
            raise _Closed
        try:
            return self._loop.run(coro, self._wait_s)
        except RuntimeError as exc:  # the loop was stopped by a concurrent close()
            raise _Closed from exc

    def read(self, points: Sequence[Point]) -> list[QualifiedValue]:
        """Read all points in one request; same order; never raises for a point (see module doc)."""
        addresses: list[NodeAddress | TagPathError] = []
        for point in points:
            try:
                addresses.append(self._address(point))
            except TagPathError as exc:
                addresses.append(exc)
        valid = [a for a in addresses if isinstance(a, NodeAddress)]
        values: list[QualifiedValue] = []
        if valid:
            try:
                values = self._run(self._session.read(valid))
            except TimeoutError:
                late = f"{self._target}: no answer to the read"
                values = [QualifiedValue.bad(Quality.ERROR_TIMEOUT_EXPIRED, error=late) for _ in valid]
            except _Closed:
                closed = f"{self._target}: the driver is closed"
                values = [QualifiedValue.bad(Quality.BAD_NOT_CONNECTED, error=closed) for _ in valid]
        results = iter(values)
        return [
            next(results) if isinstance(a, NodeAddress) else QualifiedValue.bad(Quality.BAD_NOT_FOUND, error=str(a))
            for a in addresses
        ]

    def retry_now(self) -> None:
        """The next call connects at once if the session is down (a write waits for it). Queued on
        the driver's loop ahead of the calls made after it."""
        if not self._closed:
            self._loop.call_soon(self._session.retry_now)

    def write(self, writes: Sequence[tuple[Point, Any]]) -> None:
        """Write each value once, all in one Write request (see module doc for the errors)."""
        if not writes:
            return
        batch = [(self._address(point), value, point) for point, value in writes]
        try:
            self._run(self._session.write(batch))
        except TimeoutError as exc:
            addresses = ", ".join(a.text for a, _, _ in batch)
            raise AnswerLost(
                f"{self._target}: no answer to the write of {addresses} (it may or may not have been applied)"
            ) from exc
        except _Closed as exc:
            raise CommunicationError(f"{self._target}: the driver is closed") from exc

    def call(self, point: Point, method: str, args: Sequence[Any],
             before_send: Callable[[], None] | None = None) -> list[Any]:
        """Call ``method`` (a browse name, or a NodeId) of the object at ``point``'s address with
        ``args``; its output arguments, as plain values.

        First the method's signature is read and every argument converted to its declared type
        (InvalidArgument for a wrong count, TagTypeError/TagRangeError for a value that does not
        fit, naming the argument); then ``before_send`` runs on the caller's thread (in a run: the
        step is marked as having begun its side effect) and the Call request goes out. Raises
        CommunicationError when nothing was called, AnswerLost when the answer was lost (the
        method may have run), and :class:`~exchange._drivers.opcua.methods.RefusedCall` (a
        DeviceError with ``status_code``) when the server refused the call.
        """
        address = self._address(point)
        try:
            prepared = self._run(self._session.prepare_call(address, method, args))
        except TimeoutError as exc:
            raise CommunicationError(f"{self._target}: no answer while preparing the call of {method}") from exc
        except _Closed as exc:
            raise CommunicationError(f"{self._target}: the driver is closed") from exc
        if before_send is not None:
            before_send()
        if self._closed:
            raise CommunicationError(f"{self._target}: the driver is closed; {prepared.what} was not called")
        try:
            return self._run(self._session.call(prepared))
        except TimeoutError as exc:
            raise AnswerLost(f"{self._target}: no answer to the call of {prepared.what} (it may or may not "
                             "have run)") from exc
        except _Closed as exc:
            raise AnswerLost(f"{self._target}: the driver was closed during the call of {prepared.what}") from exc

    def subscribe(self, point: Point, on_change: Callable[[QualifiedValue], None]) -> OpcUaSubscription:
        """Call ``on_change`` with the current value and then every change, until cancelled.

        ``on_change`` runs on the driver's loop thread: it must be quick and must not call the
        driver (cancelling the subscription from it is fine).
        """
        address = self._address(point)
        try:
            record_id = self._run(self._session.subscribe(address, on_change))
        except TimeoutError as exc:
            raise CommunicationError(f"{self._target}: no answer when subscribing to {address.text}") from exc
        except _Closed as exc:
            raise CommunicationError(f"{self._target}: the driver is closed") from exc
        return OpcUaSubscription(self, record_id, address.text)

    def _unsubscribe(self, record_id: int) -> None:
        # Deliveries stop at once; the server round trip that removes the monitored item happens in
        # the background, so a confirm or wait returns without waiting for it (about 1.5 ms).
        if self._session.detach(record_id):
            self._loop.call_soon(self._session.unmonitor_soon, record_id)

    def close(self) -> None:
        """Close the session (CloseSession when connected) and stop the loop thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._loop.run(self._session.aclose(), self._wait_s)
        except (TimeoutError, RuntimeError) as exc:  # the loop's own cleanup cancels what is left
            log.warning("%s: error while closing: %r", self._target, exc)
        finally:
            self._loop.stop()
