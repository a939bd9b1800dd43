"""Delivering a validated write to its devices: a lost link ridden out, a write in doubt resolved.

A write is sent to each device once, devices in the order they first appear. Then:

- The device cannot be reached and nothing was sent (CommunicationError): the write is sent again
  when the link returns, tried with backoff (0.1 s doubling to 0.3 s), for up to the device's
  ``comm_timeout_s`` (default 60 s). Each try connects at once (``Driver.retry_now``), whatever the
  driver's own reconnect backoff: a link that returns is written to within a second, instead of
  after both waits stacked (2.3 s measured before). Meanwhile ``hooks.waiting`` says which device
  it waits for, and ``hooks.check`` may stop the wait (a cancelled run, a STOP command). Past the
  timeout it raises CommunicationError naming the device.
- The request went out but its answer was lost (AnswerLost): the write is *in doubt*, it may have
  been applied. It is never sent again blindly. Each tag's policy (:meth:`TagDef.doubt_policy`)
  decides: ``"fail"`` (command and pulse bits) raises WriteInDoubt at once; ``"readback"`` reads the
  tags (riding out the link as above) and sends again only those that do not hold the value. A
  read-back that cannot be made within the timeout raises WriteInDoubt.
- The device refused the write (DeviceError): raised as it is, never sent again.
- A previous execution of the step began this write and died before its outcome was recorded
  (``deliver(..., resumed_in_doubt=...)``): the write is in doubt on every device before anything
  is sent, and resolved as above (read back, or WriteInDoubt), never simply sent again.
- A write a person makes by hand (``exchange tags write``) is sent at most once
  (``resend_in_doubt=False``): a read-back that finds the value held means it was applied; one that
  does not raises WriteInDoubt instead of sending it again.

``hooks.sending`` runs before each request goes out: in a run it makes the "side effect started"
mark durable, which is what lets a recovery know the write is in doubt.

Every outcome reaches the :class:`DeliveryListener` (the run's audit trail), so each in-doubt
write is recorded with how it was resolved.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from exchange._backoff import Backoff
from exchange._config import DeviceConfig
from exchange._tags.convert import values_equal
from exchange._tags.links import LinkStates
from exchange._values import QualifiedValue, Quality
from exchange.errors import AnswerLost, CommunicationError, ConfigError, DeviceError, WriteInDoubt

if TYPE_CHECKING:
    from exchange._drivers.base import Driver
    from exchange._tags.table import TagDef, TagWrite


class Devices(Protocol):
    """What a delivery needs of the tag service (kept as a protocol: the service builds deliveries)."""

    def driver(self, device: str) -> Driver: ...

    def read_tags(self, tags: Sequence[TagDef]) -> list[QualifiedValue]: ...

    def comm_timeout_s(self, device: str) -> float: ...

    @property
    def links(self) -> LinkStates:
        """Where the delivery notes each device's link as its writes find it."""

    @property
    def closed(self) -> bool:
        """The service was closed (its runtime shuts down): a write fails at once, it waits for nothing."""

log = logging.getLogger(__name__)

DEFAULT_COMM_TIMEOUT_S = 60.0
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 0.3  # a returning link is written to within this (plus the connect)
# a read-back with these qualities did not reach the device: wait for the link, then read again
_LINK_QUALITIES = frozenset({Quality.BAD_NOT_CONNECTED, Quality.ERROR_TIMEOUT_EXPIRED})

# how an in-doubt write was resolved, as the audit trail records it
HELD = "readback: the device holds the value; not sent again"
SENT_AGAIN = "readback: the device does not hold the value; sent again"
NEVER_RESENT = 'on_doubt = "fail": not sent again'
UNRESOLVED = "the value could not be read back in time; not sent again"
NOT_RESENT = "readback: the device does not hold the value; not sent again (this write is sent once)"


def comm_timeout_seconds(device: DeviceConfig) -> float:
    """The device's ``comm_timeout_s``: how long a write waits for a lost link (ConfigError if bad)."""
    value = device.settings.get("comm_timeout_s", DEFAULT_COMM_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(
            f"devices.{device.name}.comm_timeout_s must be a number of seconds >= 0, got {value!r}"
        )
    return float(value)


class DeliveryListener(Protocol):
    """What a delivery reports, in order, for the audit trail."""

    def written(self, items: Sequence[TagWrite], confirmed_by: str) -> None:
        """``items`` are applied: ``"acknowledged"`` by the device, or ``"readback"`` after a doubt."""

    def in_doubt(self, items: Sequence[TagWrite], error: str, resolution: str) -> None:
        """The answer to the write of ``items`` was lost; ``resolution`` says what was done."""

    def failed(self, items: Sequence[TagWrite], quality: str, error: str) -> None:
        """``items`` were not written (refused, or the device could not be reached in time)."""


class SilentListener:
    """A listener that records nothing (writes outside a run have no audit trail)."""

    def written(self, items: Sequence[TagWrite], confirmed_by: str) -> None:
        return None

    def in_doubt(self, items: Sequence[TagWrite], error: str, resolution: str) -> None:
        return None

    def failed(self, items: Sequence[TagWrite], quality: str, error: str) -> None:
        return None


def _no_check() -> None:
    return None


def _no_report(device: str, reason: str, waited_s: float, timeout_s: float) -> None:
    return None


def _no_resume(device: str, waited_s: float) -> None:
    return None


def _no_stop() -> str | None:
    return None


@dataclass(frozen=True)
class WaitHooks:
    """How a delivery waits. In a run: the run's cancellable sleep, its progress and its checks."""

    check: Callable[[], None] = _no_check  # raises to end the wait (Cancelled, ...)
    stop_requested: Callable[[], str | None] = _no_stop  # why to give up now, or None
    sleep: Callable[[float], None] = time.sleep
    waiting: Callable[[str, str, float, float], None] = _no_report  # device, reason, waited, timeout
    resumed: Callable[[str, float], None] = _no_resume  # device, waited
    sending: Callable[[], None] = _no_check  # right before a request goes out (may raise: not sent)


class Delivery:
    """One write call's delivery over a TagService's drivers (see the module doc)."""

    def __init__(
        self, service: Devices, listener: DeliveryListener, hooks: WaitHooks, *, resend_in_doubt: bool = True
    ) -> None:
        self._service = service
        self._listener = listener
        self._hooks = hooks
        self._resend_in_doubt = resend_in_doubt

    def deliver(self, planned: Sequence[TagWrite], *, resumed_in_doubt: str | None = None) -> None:
        """Deliver ``planned``; ``resumed_in_doubt`` (why) when an earlier execution may have sent it."""
        groups: dict[str, list[TagWrite]] = {}
        for item in planned:
            groups.setdefault(item.tag.device, []).append(item)
        done: list[TagWrite] = []
        for device, items in groups.items():
            try:
                self._deliver_device(device, items, resumed_in_doubt)
            except (CommunicationError, DeviceError, WriteInDoubt) as exc:
                if not done:
                    raise
                written = ", ".join(w.tag.path for w in done)
                raise type(exc)(f"{exc}; already written on other devices: {written}") from exc
            done.extend(items)

    # ---- one device ----------------------------------------------------------------------

    def _deliver_device(self, device: str, items: list[TagWrite], resumed_in_doubt: str | None) -> None:
        timeout_s = self._service.comm_timeout_s(device)
        started = time.monotonic()
        deadline = started + timeout_s
        backoff = Backoff(BACKOFF_FIRST_S, BACKOFF_MAX_S)
        pending = items
        waited = False
        if resumed_in_doubt is not None:
            self._hooks.check()
            pending = self._resolve(device, pending, resumed_in_doubt, None, deadline)
        while pending:
            self._hooks.check()
            self._hooks.sending()
            driver = self._service.driver(device)
            if waited:  # the link was down a moment ago: try it now, not when its backoff says
                driver.retry_now()
            try:
                driver.write([(i.tag.point, i.value) for i in pending])
            except AnswerLost as exc:
                self._service.links.lost(device, str(exc))
                pending = self._resolve(device, pending, str(exc), exc, deadline)
                continue
            except CommunicationError as exc:
                self._service.links.lost(device, str(exc))
                self._pause(device, pending, exc, started, deadline, backoff, waited)
                waited = True
                continue
            except DeviceError as exc:
                self._listener.failed(pending, "Bad_DeviceError", str(exc))
                raise
            self._service.links.reached(device)
            self._listener.written(pending, "acknowledged")
            pending = []
        if waited:
            log.info("device %s answered again after %.1f s; write delivered", device, time.monotonic() - started)
            self._hooks.resumed(device, time.monotonic() - started)

    def _pause(
        self,
        device: str,
        pending: list[TagWrite],
        exc: CommunicationError,
        started: float,
        deadline: float,
        backoff: Backoff,
        waited: bool,
    ) -> None:
        """Wait a backoff step for the link, or raise when the time is up or the run must stop."""
        now = time.monotonic()
        timeout_s = deadline - started
        paths = ", ".join(i.tag.path for i in pending)
        stop = self._hooks.stop_requested()
        if self._service.closed:
            stop = "the tag service is closed"
        if now >= deadline or stop is not None:
            why = stop or f"it could not be reached for {timeout_s:g} s (comm_timeout_s)"
            message = f"device {device!r}: write of {paths} not sent: {why}; last error: {exc}"
            self._listener.failed(pending, "Bad_NotConnected", message)
            raise CommunicationError(message) from exc
        if not waited:
            log.warning("device %s unreachable, write of %s waits up to %g s for it: %s", device, paths,
                        timeout_s, exc)
        self._hooks.waiting(device, str(exc), now - started, timeout_s)
        self._hooks.sleep(min(backoff.next_s(), max(0.0, deadline - now)))

    def _resolve(
        self, device: str, items: list[TagWrite], cause: str, exc: AnswerLost | None, deadline: float
    ) -> list[TagWrite]:
        """Decide an in-doubt write (``cause``: why it is in doubt): raise WriteInDoubt, or return
        the items to send again."""
        paths = ", ".join(i.tag.path for i in items)
        never = [i.tag.path for i in items if i.tag.doubt_policy(i.value) == "fail"]
        log.warning("device %s: the write of %s is in doubt: %s", device, paths, cause)
        if never:
            self._listener.in_doubt(items, cause, NEVER_RESENT)
            raise WriteInDoubt(
                f"device {device!r}: the write of {paths} is in doubt (it may have been applied) and is not "
                f"sent again: on_doubt is \"fail\" for {', '.join(never)}; check the device. Cause: {cause}"
            ) from exc
        values = self._read_back(device, items, deadline)
        if values is None:
            self._listener.in_doubt(items, cause, UNRESOLVED)
            raise WriteInDoubt(
                f"device {device!r}: the write of {paths} is in doubt (it may have been applied) and the "
                f"tags could not be read back within comm_timeout_s; not sent again. Cause: {cause}"
            ) from exc
        held = [i for i, v in zip(items, values, strict=True)
                if v.quality.is_good and values_equal(v.value, i.value, i.tag.data_type)]
        again = [i for i in items if i not in held]
        if held:
            self._listener.in_doubt(held, cause, HELD)
            self._listener.written(held, "readback")
        if again and not self._resend_in_doubt:
            self._listener.in_doubt(again, cause, NOT_RESENT)
            missing = ", ".join(i.tag.path for i in again)
            raise WriteInDoubt(
                f"device {device!r}: the write of {missing} is in doubt: its answer was lost and the device "
                f"does not hold the value (it was not applied, or was changed since); not sent again. "
                f"Cause: {cause}"
            ) from exc
        if again:
            self._listener.in_doubt(again, cause, SENT_AGAIN)
        return again

    def _read_back(self, device: str, items: list[TagWrite], deadline: float) -> list[QualifiedValue] | None:
        """The current values of ``items``' tags, waiting for the link up to ``deadline``; None if not."""
        backoff = Backoff(BACKOFF_FIRST_S, BACKOFF_MAX_S)
        started = time.monotonic()
        tags = [i.tag for i in items]
        paused = False
        while True:
            self._hooks.check()
            if paused:
                self._service.driver(device).retry_now()
            values = self._service.read_tags(tags)
            if not any(v.quality in _LINK_QUALITIES for v in values):
                return values
            now = time.monotonic()
            if now >= deadline:
                return None
            reason = next((v.error or v.quality.value) for v in values if v.quality in _LINK_QUALITIES)
            self._hooks.waiting(device, f"reading back a write in doubt: {reason}", now - started, deadline - started)
            self._hooks.sleep(min(backoff.next_s(), max(0.0, deadline - now)))
            paused = True
