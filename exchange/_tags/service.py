"""TagService: reads, writes and waits on configured tags, through one driver per device.

- ``read(paths)``: one ``driver.read`` per device, devices read concurrently (a device timing out
  does not hold up the others' requests). An unknown or malformed path is an error (it is a bug
  in the workflow or config, not a quality); a device that is down gives ``Bad_NotConnected``.
  An explicit read (``explicit=True``) tries a device inside its reconnect backoff at once; polls
  keep to the backoff.
- ``write(paths, values)``: everything is validated first (path, access, type, range); one bad
  value refuses the whole call and nothing is sent. Then one ``driver.write`` per device, in the
  order the devices first appear; a lost link is ridden out for the device's ``comm_timeout_s`` and
  a write in doubt is resolved by the tag's ``on_doubt`` (:mod:`exchange._tags.delivery`).
- ``call(path, method, args)``: a method of the object the tag addresses (OPC UA), its arguments
  typed from the method's signature, never called twice (:mod:`exchange._tags.methods`).
- ``wait_for(path, predicate, ...)``: subscription where the driver can push (OPC UA), polling
  otherwise; ``check_cancelled`` is called at least once per poll.

Drivers are created on first use (:mod:`exchange._drivers.registry`) and closed by :meth:`close`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from exchange._config import Config, DeviceConfig
from exchange._drivers import registry
from exchange._drivers.base import Driver
from exchange._tags.convert import values_equal
from exchange._tags.delivery import (
    DEFAULT_COMM_TIMEOUT_S,
    Delivery,
    DeliveryListener,
    SilentListener,
    WaitHooks,
    comm_timeout_seconds,
)
from exchange._tags.links import LinkState, LinkStates
from exchange._tags.methods import CallListener, SilentCallListener, call_method
from exchange._tags.table import TagDef, TagTable, TagWrite
from exchange._tags.watch import DevicePoller, Watch
from exchange._values import QualifiedValue, Quality
from exchange.errors import (
    CommunicationError,
    ConfirmTimeout,
    DeviceError,
    ExchangeError,
    TagError,
    TagRangeError,
    TagTypeError,
    UnknownDevice,
)

log = logging.getLogger(__name__)


class Bell(Protocol):
    """What :meth:`TagService.wait_for` needs of a bell that ends its pauses (a run's mail bell)."""

    def ring(self) -> None: ...

    def wait(self, timeout_seconds: float | None = None) -> bool: ...

    def clear(self) -> None: ...

DriverFactory = Callable[[DeviceConfig], Driver]


class TagService:
    """The tag layer over the configured devices; thread-safe, shared by all runs of a runtime."""

    def __init__(
        self, config: Config, *, driver_factory: DriverFactory | None = None, max_workers: int = 8
    ) -> None:
        self.config = config
        self.table = TagTable.from_config(config)
        self._comm_timeouts: dict[str, float] = {}
        used = [device for name, device in config.devices.items() if name in self.table.devices()]
        registry.validate_devices(used)
        for device in used:
            self._comm_timeouts[device.name] = comm_timeout_seconds(device)
        self._factory = driver_factory or registry.create_driver
        self._drivers: dict[str, Driver] = {}
        self._lock = threading.Lock()
        self._max_workers = max_workers
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self.links = LinkStates()  # each device's link as its last request found it
        self._pollers: dict[tuple[str, float], DevicePoller] = {}

    @classmethod
    def from_config(cls, config: Config) -> TagService:
        """A service for ``config`` (how the runtime builds its shared one, see workflows._services)."""
        return cls(config)

    def link_states(self) -> dict[str, LinkState]:
        """Per device asked at least once: whether its last request was answered (see
        :mod:`exchange._tags.links`)."""
        return self.links.snapshot()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran: reads give Bad_NotConnected, writes fail at once."""
        return self._closed

    # ---- lookup --------------------------------------------------------------------------

    def tag(self, path: Any) -> TagDef:
        """The configured tag at ``path`` (TagPathError, UnknownTag)."""
        return self.table.get(path)

    def driver(self, device: str) -> Driver:
        """The driver of ``device``, created on first use (UnknownDevice if not configured)."""
        driver = self._drivers.get(device)
        if driver is not None:
            return driver
        with self._lock:
            if self._closed:
                raise CommunicationError(f"device {device!r}: the tag service is closed")
            driver = self._drivers.get(device)
            if driver is None:
                config = self.config.devices.get(device)
                if config is None:
                    raise UnknownDevice(f"device {device!r} is not configured")
                driver = self._factory(config)
                self._drivers[device] = driver
        return driver

    # ---- read ----------------------------------------------------------------------------

    def read(self, paths: Sequence[str], *, explicit: bool = False) -> list[QualifiedValue]:
        """Read ``paths`` (same order), one request batch per device, devices in parallel.

        ``explicit``: somebody asked for these values now (a workflow's ``tags.read``, ``exchange
        tags read``, the first look of a wait): a device that is down is tried at once
        (``Driver.retry_now``) instead of answering ``Bad_NotConnected`` until its reconnect backoff
        ends, so a device that just came back is read. Polls (triggers, command tags, a wait's later
        looks) leave it False: the backoff paces them and a dead device is not hammered.
        """
        return self.read_tags([self.tag(p) for p in paths], explicit=explicit)

    def read_one(self, path: str, *, explicit: bool = False) -> QualifiedValue:
        return self.read([path], explicit=explicit)[0]

    def read_tags(self, tags: Sequence[TagDef], *, explicit: bool = False) -> list[QualifiedValue]:
        """:meth:`read` of tags already looked up."""
        groups: dict[str, list[int]] = {}
        for index, tag in enumerate(tags):
            groups.setdefault(tag.device, []).append(index)
        results: list[QualifiedValue | None] = [None] * len(tags)
        items = list(groups.items())
        futures: list[tuple[list[int], Future[list[QualifiedValue]]]] = []
        if len(items) > 1:
            executor = self._pool()
            for device, indices in items[1:]:
                chunk = [tags[i] for i in indices]
                futures.append((indices, executor.submit(self._read_device, device, chunk, explicit)))
        if items:
            device, indices = items[0]
            self._place(results, indices, self._read_device(device, [tags[i] for i in indices], explicit))
        for indices, future in futures:
            self._place(results, indices, future.result())
        return [r if r is not None else QualifiedValue.bad(Quality.ERROR) for r in results]

    @staticmethod
    def _place(results: list[QualifiedValue | None], indices: list[int], values: list[QualifiedValue]) -> None:
        for index, value in zip(indices, values, strict=True):
            results[index] = value

    def _read_device(self, device: str, tags: list[TagDef], explicit: bool) -> list[QualifiedValue]:
        try:
            driver = self.driver(device)
            if explicit:
                driver.retry_now()
            values = driver.read([t.point for t in tags])
        except CommunicationError as exc:
            self.links.lost(device, str(exc))
            return [QualifiedValue.bad(Quality.BAD_NOT_CONNECTED, error=str(exc)) for _ in tags]
        except ExchangeError:
            raise
        except Exception as exc:  # a driver bug must not take the other devices down
            log.exception("device %s: read failed unexpectedly", device)
            message = f"device {device!r}: read failed: {exc.__class__.__name__}: {exc}"
            return [QualifiedValue.bad(Quality.ERROR, error=message) for _ in tags]
        if len(values) != len(tags):
            message = f"device {device!r}: driver returned {len(values)} values for {len(tags)} tags"
            return [QualifiedValue.bad(Quality.ERROR, error=message) for _ in tags]
        not_connected = [v for v in values if v.quality == Quality.BAD_NOT_CONNECTED]
        if values and len(not_connected) == len(values):  # a driver that reports its lost link as quality
            self.links.lost(device, not_connected[0].error or "not connected")
        else:
            self.links.reached(device)
        return values

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self._max_workers, thread_name_prefix="tag-read")
            return self._executor

    # ---- write ---------------------------------------------------------------------------

    def prepare_write(self, paths: Sequence[str], values: Sequence[Any]) -> list[TagWrite]:
        """Validate a write without sending it: TagError subclasses name the first bad item."""
        if len(paths) != len(values):
            raise TagError(f"tag write got {len(paths)} paths but {len(values)} values")
        planned: list[TagWrite] = []
        seen: set[str] = set()
        for path, value in zip(paths, values, strict=True):
            tag = self.tag(path)
            if tag.path in seen:
                raise TagError(f"tag {tag.path!r} is written twice in one call; nothing was written")
            seen.add(tag.path)
            tag.check_writable()
            try:
                converted = tag.convert(value)
            except (TagTypeError, TagRangeError) as exc:
                raise type(exc)(f"{exc}; nothing was written") from None
            # what the device's registers cannot hold (a Modbus string too long), before any device
            # of the call is sent anything
            registry.check_value(self.config.devices[tag.device], tag.point, converted)
            planned.append(TagWrite(tag, converted, value))
        return planned

    def write(
        self,
        paths: Sequence[str],
        values: Sequence[Any],
        *,
        listener: DeliveryListener | None = None,
        hooks: WaitHooks | None = None,
    ) -> list[TagWrite]:
        """Validate all, then deliver each device's values with one ``driver.write``.

        A device that cannot be reached is waited for up to its ``comm_timeout_s``; a write whose
        answer was lost is resolved by the tags' ``on_doubt`` and never resent blindly (see
        :mod:`exchange._tags.delivery`). ``listener`` hears every outcome (the audit trail); ``hooks``
        pace and stop the waits. Raises CommunicationError, WriteInDoubt or DeviceError, naming
        what was already written on other devices.
        """
        planned = self.prepare_write(paths, values)
        self.deliver(planned, listener=listener, hooks=hooks)
        return planned

    def deliver(
        self,
        planned: Sequence[TagWrite],
        *,
        listener: DeliveryListener | None = None,
        hooks: WaitHooks | None = None,
        resumed_in_doubt: str | None = None,
        resend_in_doubt: bool = True,
    ) -> None:
        """Send writes :meth:`prepare_write` validated (see :meth:`write`); ``resumed_in_doubt`` (why)
        when an interrupted execution may already have sent them: they are resolved, not resent.
        ``resend_in_doubt=False``: a write whose answer was lost is never sent again, even when the
        read-back shows the device does not hold the value (WriteInDoubt)."""
        Delivery(self, listener or SilentListener(), hooks or WaitHooks(), resend_in_doubt=resend_in_doubt).deliver(
            planned, resumed_in_doubt=resumed_in_doubt
        )

    def call(
        self,
        path: str,
        method: str,
        args: Sequence[Any],
        *,
        listener: CallListener | None = None,
        hooks: WaitHooks | None = None,
        resumed_in_doubt: str | None = None,
    ) -> list[Any]:
        """Call ``method`` of the object the tag at ``path`` addresses, with ``args``; its output
        arguments. Checked before anything is sent, the link ridden out, never called twice (see
        :mod:`exchange._tags.methods`)."""
        return call_method(self, self.tag(path), method, args, listener=listener or SilentCallListener(),
                           hooks=hooks or WaitHooks(), resumed_in_doubt=resumed_in_doubt)

    def comm_timeout_s(self, device: str) -> float:
        """How long a write waits for ``device``'s lost link (its ``comm_timeout_s``)."""
        return self._comm_timeouts.get(device, DEFAULT_COMM_TIMEOUT_S)

    # ---- wait ----------------------------------------------------------------------------

    def wait_for(
        self,
        path: str,
        predicate: Callable[[Any], bool],
        *,
        timeout_s: float,
        poll_s: float = 0.25,
        check_cancelled: Callable[[], None] | None = None,
        sleep: Callable[[float], None] | None = None,
        expected: Any = None,
        bell: Bell | None = None,
        timeout_named_s: float | None = None,
    ) -> QualifiedValue:
        """Return the first Good value of ``path`` for which ``predicate(value)`` holds.

        Uses the driver's ``subscribe`` when it has one, else reads every ``poll_s``. Calls
        ``check_cancelled`` before every poll; ``sleep`` (e.g. a run's cancellable sleep) paces
        the polls. ConfirmTimeout after ``timeout_s`` names the path, ``expected``, the last
        value seen (attributes ``path``, ``expected``, ``last``) and ``timeout_named_s`` (default
        ``timeout_s``: a wait that is the rest of a longer one names the whole).

        ``bell`` (a run's mail bell): a pause between two looks also ends when it rings, and the
        subscription rings it on a change, so ``check_cancelled`` sees what rang it (a command)
        at once; the bell is cleared after each pause.
        """
        tag = self.tag(path)
        deadline = time.monotonic() + max(0.0, timeout_s)
        poll_s = max(0.001, poll_s)
        check = check_cancelled or (lambda: None)
        last: QualifiedValue | None = None
        changes: queue.Queue[QualifiedValue] = queue.Queue()
        subscription = self._subscribe(tag, changes.put if bell is None else _ringing(changes.put, bell))
        pending: list[QualifiedValue] = []
        read_now = True  # first pass, and whenever a poll passed without a notification
        first = True  # the wait's first look is asked for now: the later ones are polls
        try:
            while True:
                check()
                candidates = self.read_tags([tag], explicit=first) if read_now else []
                first = False
                candidates += pending
                pending.clear()
                while not changes.empty():
                    candidates.append(changes.get_nowait())
                for value in candidates:
                    last = value
                    if value.quality.is_good and predicate(value.value):
                        return value
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout(tag, expected, last, timeout_s if timeout_named_s is None else timeout_named_s)
                pause = min(poll_s, remaining)
                if bell is not None:
                    paused_at = time.monotonic()
                    bell.wait(pause)
                    bell.clear()  # what rang is looked at after this: the queue, check() (the mail)
                    # Polling: read every pass (a look cut short by mail reads early, once). Subscribed:
                    # read only when a whole poll passed without a notification, as below.
                    read_now = subscription is None or (changes.empty() and time.monotonic() - paused_at >= pause)
                    continue
                if subscription is None:
                    (sleep or time.sleep)(pause)
                    continue
                try:
                    pending.append(changes.get(timeout=pause))
                    read_now = False
                except queue.Empty:
                    read_now = True
        finally:
            if subscription is not None:
                subscription.cancel()

    def wait_for_value(
        self,
        path: str,
        expected: Any,
        *,
        timeout_s: float,
        poll_s: float = 0.25,
        check_cancelled: Callable[[], None] | None = None,
        sleep: Callable[[float], None] | None = None,
        tolerance: float | None = None,
    ) -> QualifiedValue:
        """:meth:`wait_for` with equality by :func:`values_equal` (floats with a tolerance)."""
        data_type = self.tag(path).data_type
        return self.wait_for(
            path,
            lambda value: values_equal(value, expected, data_type, tolerance),
            timeout_s=timeout_s,
            poll_s=poll_s,
            check_cancelled=check_cancelled,
            sleep=sleep,
            expected=expected,
        )

    @staticmethod
    def _timeout(tag: TagDef, expected: Any, last: QualifiedValue | None, timeout_s: float) -> ConfirmTimeout:
        if last is None:
            seen = "no value"
        elif last.quality.is_good:
            seen = f"{last.value!r}"
        else:
            seen = f"no good value ({last.quality.value}" + (f": {last.error})" if last.error else ")")
        error = ConfirmTimeout(
            f"tag {tag.path!r} (device {tag.device!r}, address {tag.address!r}) did not reach "
            f"{expected!r} within {timeout_s:g} s; last seen {seen}"
        )
        error.path = tag.path  # type: ignore[attr-defined]
        error.expected = expected  # type: ignore[attr-defined]
        error.last = None if last is None else last.value  # type: ignore[attr-defined]
        return error

    def watch(self, path: str, on_change: Callable[[QualifiedValue], None], *, poll_s: float = 0.1) -> Watch:
        """Call ``on_change`` with the tag's value now and at every change until the watch is
        cancelled: by the driver's subscription where it has one (OPC UA), else by one poller per
        device and ``poll_s`` that reads all its watched tags in one request (see
        :mod:`exchange._tags.watch`). ``on_change`` runs on another thread: it must be quick."""
        tag = self.tag(path)
        subscription = self._subscribe(tag, on_change)
        if subscription is not None:
            return subscription
        key = (tag.device, round(max(0.001, poll_s), 3))
        with self._lock:
            if self._closed:
                raise CommunicationError("the tag service is closed")
            poller = self._pollers.get(key)
            if poller is None:
                poller = self._pollers[key] = DevicePoller(self, tag.device, key[1])
        return poller.watch(tag, on_change)

    def _subscribe(self, tag: TagDef, on_change: Callable[[QualifiedValue], None]) -> Watch | None:
        """The driver's subscription to ``tag`` (OPC UA), or None: the driver cannot push, or the
        subscription failed (said in the log): the caller polls."""
        subscribe = getattr(self.driver(tag.device), "subscribe", None)
        if not callable(subscribe):
            return None
        try:
            subscription: Watch = subscribe(tag.point, on_change)
        except (CommunicationError, DeviceError) as exc:
            log.info("%s: subscription failed (%s); polling instead", tag.where, exc)
            return None
        return subscription

    # ---- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close every driver and the read pool; later calls fail with CommunicationError."""
        with self._lock:
            self._closed = True
            drivers, self._drivers = self._drivers, {}
            executor, self._executor = self._executor, None
            pollers, self._pollers = list(self._pollers.values()), {}
        for poller in pollers:
            poller.close()
        for name, driver in drivers.items():
            try:
                driver.close()
            except Exception:  # one failing close must not keep the others open
                log.exception("closing the driver of device %s failed", name)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def _ringing(put: Callable[[QualifiedValue], None], bell: Bell) -> Callable[[QualifiedValue], None]:
    """``put`` that also rings ``bell`` (a subscription's changes wake a wait on the bell)."""

    def put_and_ring(value: QualifiedValue) -> None:
        put(value)
        bell.ring()

    return put_and_ring
