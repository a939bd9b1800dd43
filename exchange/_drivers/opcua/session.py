"""The asynchronous side of the OPC UA driver: one device's connection, on the driver's event loop.

Connection states: no connection yet, a connect attempt running, connected, or down until
``retry_at`` (:class:`~exchange._backoff.Backoff`, doubling from ``reconnect_min_ms`` to
``reconnect_max_ms``). Callers arriving during an attempt wait for it (bounded by ``timeout_ms``);
callers arriving while the device is down fail at once with the reason, so a dead device never holds
a worker. Connection is lazy; after a loss,
the driver reconnects in the background only while somebody holds a subscription (otherwise the next
call reconnects), and restores every subscription on the new connection.

Every method runs on the loop thread, so the state needs no lock.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from asyncua import ua
from asyncua.ua.attribute_ids import AttributeIds
from asyncua.ua.status_codes import StatusCodes
from asyncua.ua.uaerrors import UaStatusCodeError

from exchange._backoff import Backoff
from exchange._drivers.base import Point
from exchange._drivers.opcua import methods
from exchange._drivers.opcua.connection import Connection, connect_error, dispose, new_client, open_client
from exchange._drivers.opcua.encode import ANY, to_variant
from exchange._drivers.opcua.settings import OpcUaSettings
from exchange._drivers.opcua.subscriptions import SubRecord, SubscriptionSet
from exchange._drivers.opcua.values import (
    SESSION_LOST_CODES,
    NodeAddress,
    quality_of,
    status_name,
    to_qualified,
)
from exchange._values import QualifiedValue, Quality
from exchange.errors import AnswerLost, CommunicationError, DeviceError, ExchangeError

log = logging.getLogger(__name__)
_NOT_CONNECTED = (ConnectionError, OSError, TimeoutError)


class OpcUaSession:
    def __init__(self, settings: OpcUaSettings) -> None:
        self.settings = settings
        self._target = f"OPC UA device {settings.device!r}"
        self._conn: Connection | None = None
        self._attempt: asyncio.Task[None] | None = None
        self._retry_at = 0.0
        self._backoff = Backoff.from_ms(settings.reconnect_min_ms, settings.reconnect_max_ms)
        self._down: ExchangeError | None = None
        self._closed = False
        self._retry_timer: asyncio.TimerHandle | None = None
        self._chores: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self.subs = SubscriptionSet(self._target, settings.publishing_interval_ms, lambda: self._conn, self._lost)

    # -- connection state -------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._conn is not None

    async def _ensure(self) -> Connection:
        if self._closed:
            raise CommunicationError(f"{self._target}: the driver is closed")
        if self._conn is not None:
            return self._conn
        if self._attempt is None:
            if asyncio.get_running_loop().time() < self._retry_at:
                raise self._down_error()
            self._attempt = asyncio.create_task(self._connect())
        await asyncio.shield(self._attempt)
        if self._conn is None:
            raise self._down_error()
        return self._conn

    def retry_now(self) -> None:
        """On the loop: let the next call connect at once, inside the backoff window too."""
        self._retry_at = 0.0

    def _down_error(self) -> ExchangeError:
        """A fresh exception saying why the device is down (never re-raise one instance twice)."""
        down = self._down or CommunicationError(f"{self._target} is not connected")
        if isinstance(down, CommunicationError):
            wait_s = max(0.0, self._retry_at - asyncio.get_running_loop().time())
            return CommunicationError(str(down), retry_after=wait_s)
        return type(down)(str(down))

    async def _connect(self) -> None:
        settings = self.settings
        loop = asyncio.get_running_loop()
        try:
            client = new_client(settings)
            try:
                await asyncio.wait_for(open_client(client, settings), settings.timeout_s)
            except BaseException:
                await dispose(client, graceful=False, timeout_s=settings.timeout_s)
                raise
            conn = Connection(client)
            client.connection_lost_callback = lambda exc: self._lost_async(conn, exc)
            self._conn, self._down = conn, None
            self._backoff.reset()
            log.info("%s connected to %s", self._target, settings.url)
            if self.subs:
                await self._restore(conn)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure is translated, logged and retried
            first = self._down is None  # a write waiting for the link tries often: say it once
            self._down = connect_error(settings, exc)
            delay_s = self._backoff.next_s()
            self._retry_at = loop.time() + delay_s
            (log.warning if first else log.debug)("%s: %s (next attempt in %.1f s)", self._target, self._down,
                                                   delay_s)
        finally:
            self._attempt = None
            self._schedule_retry()

    async def _restore(self, conn: Connection) -> None:
        records = list(self.subs.records.values())
        try:
            node_ids = await conn.resolve([r.address for r in records])
            failed = await self.subs.monitor(conn, records, node_ids)
        except Exception as exc:  # whatever broke, a fresh connection restores them
            self._lost(conn, exc)
            return
        for record, code in failed:
            error = f"{self._target} address {record.address.text}: {status_name(code)}"
            record.deliver(QualifiedValue.bad(quality_of(code), error=error))

    async def _lost_async(self, conn: Connection, exc: BaseException) -> None:
        self._lost(conn, exc)

    def _lost(self, conn: Connection, exc: BaseException) -> None:
        """The connection ``conn`` is gone: forget it, tell subscribers, reconnect if they wait."""
        if self._conn is not conn:
            return
        self._conn = None
        self._down = CommunicationError(f"{self._target} at {self.settings.url}: connection lost ({exc!r})")
        log.warning("%s: connection lost (%r); reconnecting", self._target, exc)
        self._retry_at = asyncio.get_running_loop().time()  # the first retry at once, then back off
        self._chore(dispose(conn.client, graceful=False, timeout_s=self.settings.timeout_s))
        self.subs.notify_all(QualifiedValue.bad(Quality.BAD_NOT_CONNECTED, error=str(self._down)))
        self._schedule_retry()

    def _schedule_retry(self) -> None:
        if self._closed or self._conn is not None or self._attempt is not None or not self.subs:
            return
        if self._retry_timer is not None:
            return
        loop = asyncio.get_running_loop()
        self._retry_timer = loop.call_at(max(self._retry_at, loop.time()), self._retry_now)

    def _retry_now(self) -> None:
        self._retry_timer = None
        if self._closed or self._conn is not None or self._attempt is not None or not self.subs:
            return
        self._attempt = asyncio.get_running_loop().create_task(self._connect())

    def _chore(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    def _request_failed(self, conn: Connection, exc: Exception) -> bool:
        """Drop the connection when ``exc`` means it is unusable; True when it did."""
        lost = isinstance(exc, _NOT_CONNECTED) or (
            isinstance(exc, UaStatusCodeError) and (exc.code & 0xFFFF0000) in SESSION_LOST_CODES
        )
        if lost:
            self._lost(conn, exc)
        return lost

    async def aclose(self) -> None:
        self._closed = True
        if self._retry_timer is not None:
            self._retry_timer.cancel()
        if self._attempt is not None:
            self._attempt.cancel()
            await asyncio.gather(self._attempt, return_exceptions=True)
        self.subs.records.clear()
        conn, self._conn = self._conn, None
        if conn is not None:
            await dispose(conn.client, graceful=True, timeout_s=self.settings.timeout_s)
        if self._chores:
            await asyncio.gather(*self._chores, return_exceptions=True)

    # -- services ---------------------------------------------------------------------------------

    async def read(self, addresses: Sequence[NodeAddress]) -> list[QualifiedValue]:
        """Read every address in ONE Read request; never raises, bad outcomes are qualities."""
        try:
            conn = await self._ensure()
        except ExchangeError as exc:
            quality = Quality.BAD_ACCESS_DENIED if isinstance(exc, DeviceError) else Quality.BAD_NOT_CONNECTED
            return [QualifiedValue.bad(quality, error=str(exc)) for _ in addresses]
        try:
            node_ids = await conn.resolve(addresses)
            request = [n for n in node_ids if n is not None]
            params = ua.ReadParameters(
                TimestampsToReturn=ua.TimestampsToReturn.Both,
                NodesToRead=[ua.ReadValueId(NodeId=n, AttributeId=AttributeIds.Value) for n in request],
            )
            results = iter(await conn.client.uaclient.read(params) if request else [])
        except Exception as exc:
            if isinstance(exc, TimeoutError):
                self._request_failed(conn, exc)
                quality = Quality.ERROR_TIMEOUT_EXPIRED
                error = f"{self._target}: no answer to the read within {self.settings.timeout_ms} ms"
            elif self._request_failed(conn, exc):
                quality, error = Quality.BAD_NOT_CONNECTED, f"{self._target}: connection lost ({exc!r})"
            elif isinstance(exc, UaStatusCodeError):
                quality, error = quality_of(exc.code), f"{self._target}: read refused ({status_name(exc.code)})"
            else:
                log.exception("%s: read failed", self._target)
                quality, error = Quality.ERROR, f"{self._target}: read failed ({exc!r})"
            return [QualifiedValue.bad(quality, error=error) for _ in addresses]
        return [
            to_qualified(next(results), f"{self._target} address {address.text}")
            if node_id is not None
            else QualifiedValue.bad(
                Quality.BAD_NOT_FOUND,
                error=f"{self._target} address {address.text}: namespace {address.namespace_uri!r} is unknown",
            )
            for address, node_id in zip(addresses, node_ids)
        ]

    async def write(self, writes: Sequence[tuple[NodeAddress, Any, Point]]) -> None:
        """Write all values in ONE Write request, each as its node's exact variant type.

        Each item is (address, value, point): the point says the tag's data type (what the value was
        converted to, or None) and ``bool_numbers``; :func:`~exchange._drivers.opcua.encode.to_variant`
        encodes the value, converting it only where the tag layer could not know the node's type.
        A failure before the Write request went out is a CommunicationError (nothing was written);
        after it, AnswerLost (the values may have been applied).
        """
        conn = await self._ensure()
        sent = False
        try:
            node_ids = await conn.resolve([address for address, _, _ in writes])
            for (address, _, _), node_id in zip(writes, node_ids):
                if node_id is None:
                    raise DeviceError(
                        f"{self._target}: write to {address.text} refused, namespace "
                        f"{address.namespace_uri!r} is not on the server (BadNodeIdUnknown)"
                    )
            known = [n for n in node_ids if n is not None]
            bad = await conn.learn_variant_types(known)
            refused = [f"{a.text} ({status_name(bad[n])})" for (a, _, _), n in zip(writes, known) if n in bad]
            if refused:
                raise DeviceError(f"{self._target}: write refused before sending, {'; '.join(refused)}")
            values = [
                ua.WriteValue(
                    NodeId=node_id,
                    AttributeId=AttributeIds.Value,
                    # no status or timestamps: many servers refuse writes that carry them
                    Value=ua.DataValue(
                        to_variant(value, conn.variant_types[node_id], point.data_type,
                                   f"tag {point.path!r} ({self._target}, address {address.text})",
                                   bool_numbers=point.bool_numbers, value_rank=conn.value_ranks.get(node_id, ANY),
                                   length=conn.array_lengths.get(node_id)),
                        StatusCode=None,
                    ),
                )
                for (address, value, point), node_id in zip(writes, known)
            ]
            sent = True
            results = await conn.client.uaclient.write(ua.WriteParameters(NodesToWrite=values))
        except ExchangeError:
            raise
        except Exception as exc:
            raise self._write_error(conn, writes, exc, sent=sent) from exc
        failed = []
        for (address, _, _), node_id, status in zip(writes, known, results):
            if not status.is_good():
                failed.append(f"{address.text} ({status.name})")
                if status.value & 0xFFFF0000 == StatusCodes.BadTypeMismatch:
                    conn.forget_shape(node_id)
        if failed:
            written = len(writes) - len(failed)
            tail = f"; the other {written} value(s) were written" if written else ""
            raise DeviceError(f"{self._target} refused the write to {', '.join(failed)}{tail}")

    def _write_error(
        self, conn: Connection, writes: Sequence[tuple[NodeAddress, Any, Point]], exc: Exception, *, sent: bool
    ) -> Exception:
        addresses = ", ".join(address.text for address, _, _ in writes)
        error = AnswerLost if sent else CommunicationError
        if isinstance(exc, TimeoutError):
            self._request_failed(conn, exc)
            if not sent:
                return CommunicationError(
                    f"{self._target}: no answer within {self.settings.timeout_ms} ms before the write of "
                    f"{addresses}; nothing was written"
                )
            return AnswerLost(
                f"{self._target}: no answer to the write of {addresses} within {self.settings.timeout_ms} ms "
                "(it may or may not have been applied)"
            )
        if self._request_failed(conn, exc):
            outcome = "it may or may not have been applied" if sent else "nothing was written"
            return error(f"{self._target}: connection lost while writing {addresses} ({exc!r}; {outcome})")
        if isinstance(exc, UaStatusCodeError):
            return DeviceError(f"{self._target} refused the write to {addresses} ({status_name(exc.code)})")
        return error(f"{self._target}: write of {addresses} failed: {exc!r}")

    # -- method calls -----------------------------------------------------------------------------

    async def prepare_call(self, address: NodeAddress, method: str, args: Sequence[Any]) -> methods.PreparedCall:
        """Find the method and type its arguments (:func:`.methods.prepare`); nothing is called.
        CommunicationError when the server cannot be reached; DeviceError, InvalidArgument or
        TagTypeError/TagRangeError when the call cannot be made as asked."""
        conn = await self._ensure()
        try:
            [object_id] = await conn.resolve([address])
            if object_id is None:
                raise DeviceError(f"{self._target}: object {address.text}: namespace {address.namespace_uri!r} "
                                  "is not on the server")
            return await methods.prepare(conn, self._target, address, object_id, method, args)
        except ExchangeError:
            raise
        except Exception as exc:
            raise self._call_error(conn, f"{method} on {address.text}", exc, sent=False) from exc

    async def call(self, prepared: methods.PreparedCall) -> list[Any]:
        """Send a prepared call (one Call request); its output arguments. CommunicationError when
        it could not be sent, AnswerLost when its answer was lost, RefusedCall (a DeviceError with
        the status code) when the server refused it."""
        conn = await self._ensure()
        try:
            return await methods.send(conn, self._target, prepared)
        except ExchangeError:
            raise
        except Exception as exc:
            raise self._call_error(conn, prepared.what, exc, sent=True) from exc

    def _call_error(self, conn: Connection, what: str, exc: Exception, *, sent: bool) -> Exception:
        if self._request_failed(conn, exc):  # a timeout too: the connection is dropped
            if not sent:
                return CommunicationError(f"{self._target}: connection lost before the call of {what} ({exc!r}); "
                                          "nothing was called")
            return AnswerLost(f"{self._target}: no answer to the call of {what} ({exc!r}); it may or may not "
                              "have run")
        if isinstance(exc, UaStatusCodeError):
            code = exc.code
            return methods.RefusedCall(
                f"{self._target} refused the call of {what}: {status_name(code)} (0x{code:08X})", code
            )
        error = AnswerLost if sent else DeviceError
        return error(f"{self._target}: call of {what} failed: {exc!r}")

    # -- subscriptions ----------------------------------------------------------------------------

    async def subscribe(self, address: NodeAddress, on_change: Callable[[QualifiedValue], None]) -> int:
        """Add a subscription record; the current value arrives first. Returns the record id.

        While the device is down the callback gets Bad_NotConnected at once and the value once the
        connection is back. A node the server refuses to monitor, or a refused login, raises
        DeviceError.
        """
        record = SubRecord(next(self._ids), address, on_change)
        try:
            conn = await self._ensure()
        except CommunicationError as exc:  # a DeviceError (refused login, security) propagates
            self.subs.records[record.id] = record  # monitored once a connection is made
            record.deliver(QualifiedValue.bad(Quality.BAD_NOT_CONNECTED, error=str(exc)))
            self._schedule_retry()
            return record.id
        # registered only now: a connection made by _ensure() restored the records it knew, not this one
        self.subs.records[record.id] = record
        try:
            node_ids = await conn.resolve([address])
            failed = await self.subs.monitor(conn, [record], node_ids)
        except Exception as exc:
            if not self._request_failed(conn, exc):
                self.subs.records.pop(record.id, None)
                raise DeviceError(f"{self._target}: cannot subscribe to {address.text} ({exc!r})") from exc
            return record.id  # lost: the record is restored on the next connection
        if failed:
            self.subs.records.pop(record.id, None)
            raise DeviceError(
                f"{self._target} refused a subscription to {address.text} ({status_name(failed[0][1])})"
            )
        return record.id

    def detach(self, record_id: int) -> bool:
        """Stop deliveries to the subscription now, from any thread (a single dict operation)."""
        return self.subs.records.pop(record_id, None) is not None

    def unmonitor_soon(self, record_id: int) -> None:
        """Remove a detached subscription's monitored item in the background (for the loop thread)."""
        self._chore(self._unmonitor(record_id))

    async def _unmonitor(self, record_id: int) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            await self.subs.unmonitor(conn, record_id)
        except Exception as exc:
            if not self._request_failed(conn, exc):
                log.debug("%s: removing a monitored item failed", self._target, exc_info=True)
