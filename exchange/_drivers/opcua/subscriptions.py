"""Driver-level subscriptions that outlive connections.

Each :meth:`OpcUaDriver.subscribe` call is one :class:`SubRecord`, kept here for as long as the caller
holds it. On every (re)connection all records become monitored items of ONE OPC UA subscription
(one CreateMonitoredItems request), so a server restart loses nothing the caller can notice except
a ``Bad_NotConnected`` notification while it was down. The record id is the monitored item's
client handle, so notifications are routed without a lookup race.

The subscription object is created directly rather than through ``Client.create_subscription``: that
would register it with the client's stale-subscription watchdog, which re-creates a subscription
after one second without notifications — normal for a quiet tag with publishing interval 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from asyncua import ua
from asyncua.common.subscription import DataChangeNotif, Subscription
from asyncua.ua.attribute_ids import AttributeIds
from asyncua.ua.status_codes import StatusCodes

from exchange._drivers.opcua.connection import Connection
from exchange._drivers.opcua.values import NodeAddress, quality_of, status_name, to_qualified
from exchange._values import QualifiedValue, Quality

log = logging.getLogger(__name__)


@dataclass(eq=False)
class SubRecord:
    id: int
    address: NodeAddress
    on_change: Callable[[QualifiedValue], None]

    def deliver(self, value: QualifiedValue) -> None:
        try:
            self.on_change(value)
        except Exception:  # a caller's bug must not stop notifications for the others
            log.exception("subscription callback for %s raised", self.address.text)


class _Handler:
    """asyncua calls this for each notification of one connection's subscription."""

    def __init__(self, owner: SubscriptionSet, conn: Connection) -> None:
        self._owner = owner
        self._conn = conn

    def datachange_notification(self, node: Any, value: Any, data: DataChangeNotif) -> None:
        item = data.monitored_item
        self._owner.on_data(self._conn, int(item.ClientHandle), item.Value)

    def status_change_notification(self, status: ua.StatusChangeNotification) -> None:
        self._owner.on_status(self._conn, status)


class SubscriptionSet:
    """The records, and how they are mapped onto the current connection.

    ``current`` returns the live connection (notifications from an older one are dropped);
    ``lost(conn, reason)`` is called when the server reports the subscription dead.
    """

    def __init__(
        self,
        target: str,
        publishing_interval_ms: int,
        current: Callable[[], Connection | None],
        lost: Callable[[Connection, BaseException], None],
    ) -> None:
        self._target = target
        self._interval_ms = publishing_interval_ms
        self._current = current
        self._lost = lost
        self.records: dict[int, SubRecord] = {}

    def __bool__(self) -> bool:
        return bool(self.records)

    def notify_all(self, value: QualifiedValue) -> None:
        for record in list(self.records.values()):
            record.deliver(value)

    async def monitor(
        self, conn: Connection, records: Iterable[SubRecord], node_ids: list[ua.NodeId | None]
    ) -> list[tuple[SubRecord, int]]:
        """Create monitored items for ``records`` in one request; return (record, bad status) pairs.

        A record whose node id could not be resolved (None) is returned with BadNodeIdUnknown.
        Connection errors propagate to the caller.
        """
        records = list(records)
        failed: list[tuple[SubRecord, int]] = []
        requests: list[ua.MonitoredItemCreateRequest] = []
        sent: list[SubRecord] = []
        for record, node_id in zip(records, node_ids):
            if node_id is None:
                failed.append((record, StatusCodes.BadNodeIdUnknown))
                continue
            sent.append(record)
            requests.append(ua.MonitoredItemCreateRequest(
                ItemToMonitor=ua.ReadValueId(NodeId=node_id, AttributeId=AttributeIds.Value),
                MonitoringMode=ua.MonitoringMode.Reporting,
                RequestedParameters=ua.MonitoringParameters(
                    ClientHandle=record.id, SamplingInterval=0, QueueSize=1, DiscardOldest=True
                ),
            ))
        if not requests:
            return failed
        if conn.subscription is None:
            # concurrent subscribe() calls must share one subscription, so only one creates it; each
            # waiter keeps the task itself: the first one woken clears ``conn.subscribing``
            creating = conn.subscribing
            if creating is None:
                creating = conn.subscribing = asyncio.get_running_loop().create_task(self._create(conn))
            try:
                conn.subscription = await asyncio.shield(creating)
            finally:
                if creating.done() and conn.subscribing is creating:
                    conn.subscribing = None
        results = await conn.subscription.create_monitored_items(requests)
        for record, result in zip(sent, results):
            if isinstance(result, ua.StatusCode):
                failed.append((record, result.value))
            else:
                conn.monitored[record.id] = int(result)
        return failed

    async def _create(self, conn: Connection) -> Subscription:
        params = ua.CreateSubscriptionParameters(
            RequestedPublishingInterval=float(self._interval_ms),
            RequestedLifetimeCount=10_000,
            RequestedMaxKeepAliveCount=0 if self._interval_ms == 0 else max(1, 10_000 // self._interval_ms),
            MaxNotificationsPerPublish=10_000,
            PublishingEnabled=True,
            Priority=0,
        )
        subscription = Subscription(conn.client.uaclient.session, params, _Handler(self, conn))
        await subscription.init()
        return subscription

    async def unmonitor(self, conn: Connection, record_id: int) -> None:
        item = conn.monitored.pop(record_id, None)
        if item is not None and conn.subscription is not None:
            await conn.subscription.unsubscribe(item)

    def on_data(self, conn: Connection, record_id: int, data_value: ua.DataValue | None) -> None:
        if conn is not self._current():
            return  # a late notification from a connection already replaced
        record = self.records.get(record_id)
        if record is None:
            return
        where = f"{self._target} address {record.address.text}"
        if data_value is None:
            record.deliver(QualifiedValue.bad(Quality.BAD, error=f"{where}: notification without a value"))
        else:
            record.deliver(to_qualified(data_value, where))

    def on_status(self, conn: Connection, status: ua.StatusChangeNotification) -> None:
        if conn is not self._current():
            return
        code = status.Status.value if status.Status is not None else 0
        if quality_of(code) is not Quality.GOOD:
            # BadTimeout (subscription expired), BadShutdown, ...: start again on a fresh connection
            self._lost(conn, ConnectionError(f"subscription status {status_name(code)}"))
