"""Calling a device method through a configured tag: checked first, the link ridden out, never resent.

A method call is a side effect like a write, with one difference that decides everything here: there
is nothing to read back. So:

- The tag names the object: its address is the object's NodeId, its device must have methods (OPC
  UA), and its ``access`` must be ``"rw"`` (``"ro"`` forbids calls as it forbids writes). The method
  is found on that object by browse name or NodeId, its arguments typed from its InputArguments, all
  before anything is sent (:meth:`MethodDriver.call`).
- The device cannot be reached and nothing was called: tried again with backoff (0.1 s doubling to
  0.3 s) up to the device's ``comm_timeout_s``, as a write waits (``hooks.waiting`` says so), or
  until ``hooks.stop_requested`` gives a reason (a call by hand does not wait); then
  CommunicationError.
- The call went out and its answer was lost, or an earlier execution of the step was interrupted
  after it began sending (``resumed_in_doubt``): the method may have run. It is never called again:
  WriteInDoubt, as a write whose ``on_doubt`` is ``"fail"``.
- The device refused the call: DeviceError with the device's status code (``status_code``).

Every outcome reaches the :class:`CallListener` (the run's audit trail).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from exchange._backoff import Backoff
from exchange._tags.delivery import BACKOFF_FIRST_S, BACKOFF_MAX_S, WaitHooks
from exchange.errors import AnswerLost, CommunicationError, DeviceError, TagError, WriteInDoubt

if TYPE_CHECKING:
    from exchange._tags.delivery import Devices
    from exchange._tags.table import TagDef

log = logging.getLogger(__name__)


class CallListener(Protocol):
    """What a method call reports, for the audit trail."""

    def called(self, tag: TagDef, method: str, args: Sequence[Any], outputs: list[Any]) -> None: ...

    def call_in_doubt(self, tag: TagDef, method: str, args: Sequence[Any], error: str) -> None: ...

    def call_failed(self, tag: TagDef, method: str, args: Sequence[Any], error: str) -> None: ...


class SilentCallListener:
    def called(self, tag: TagDef, method: str, args: Sequence[Any], outputs: list[Any]) -> None:
        return None

    def call_in_doubt(self, tag: TagDef, method: str, args: Sequence[Any], error: str) -> None:
        return None

    def call_failed(self, tag: TagDef, method: str, args: Sequence[Any], error: str) -> None:
        return None


def call_method(
    devices: Devices,
    tag: TagDef,
    method: str,
    args: Sequence[Any],
    *,
    listener: CallListener,
    hooks: WaitHooks,
    resumed_in_doubt: str | None = None,
) -> list[Any]:
    """Call ``method`` of the object ``tag`` names with ``args`` (module doc); its output arguments."""
    if not isinstance(method, str) or not method.strip():
        raise TagError(f"{tag.where}: the method must be its browse name or NodeId, got {method!r}")
    tag.check_writable()
    driver: Any = devices.driver(tag.device)
    if not callable(getattr(driver, "call", None)):
        raise TagError(f"{tag.where}: device {tag.device!r} has no methods to call (method calls are OPC UA's); "
                       "nothing was sent")
    what = f"device {tag.device!r}: the call of {method} on {tag.path}"
    if resumed_in_doubt is not None:
        hooks.check()
        listener.call_in_doubt(tag, method, args, resumed_in_doubt)
        raise WriteInDoubt(f"{what} is in doubt (it may have run) and is not made again: a method call cannot be "
                           f"read back. Cause: {resumed_in_doubt}")
    timeout_s = devices.comm_timeout_s(tag.device)
    started = time.monotonic()
    backoff = Backoff(BACKOFF_FIRST_S, BACKOFF_MAX_S)
    waited = False
    while True:
        hooks.check()
        if waited:
            driver.retry_now()
        try:
            outputs: list[Any] = driver.call(tag.point, method, list(args), before_send=hooks.sending)
        except AnswerLost as exc:
            devices.links.lost(tag.device, str(exc))
            listener.call_in_doubt(tag, method, args, str(exc))
            raise WriteInDoubt(f"{what} is in doubt (its answer was lost; it may have run) and is not made "
                               f"again: check the device. Cause: {exc}") from exc
        except CommunicationError as exc:
            devices.links.lost(tag.device, str(exc))
            now = time.monotonic()
            stop = "the tag service is closed" if devices.closed else hooks.stop_requested()
            if now - started >= timeout_s or stop is not None:
                why = stop or f"it could not be reached for {timeout_s:g} s (comm_timeout_s)"
                message = f"{what} was not made: {why}; last error: {exc}"
                listener.call_failed(tag, method, args, message)
                raise CommunicationError(message) from exc
            if not waited:
                log.warning("device %s unreachable, the call of %s waits up to %g s for it: %s", tag.device,
                            method, timeout_s, exc)
            hooks.waiting(tag.device, str(exc), now - started, timeout_s)
            hooks.sleep(min(backoff.next_s(), max(0.0, started + timeout_s - now)))
            waited = True
            continue
        except DeviceError as exc:
            devices.links.reached(tag.device)
            listener.call_failed(tag, method, args, str(exc))
            raise
        devices.links.reached(tag.device)
        if waited:
            hooks.resumed(tag.device, time.monotonic() - started)
        listener.called(tag, method, args, outputs)
        return outputs
