"""One Modbus device's requests over its line (:mod:`exchange._drivers.modbus.line`), with backoff.

:class:`ModbusLink` is not thread-safe: :class:`~exchange._drivers.modbus.driver.ModbusDriver` holds
its lock around every call; the line's own lock serialises the devices sharing a wire. A request
either returns the response or raises:

- :class:`Unreachable`: no answer; ``sent`` says whether the request may have reached the device
  (then a write's outcome is in doubt), ``timeout`` whether the device simply did not answer;
- :class:`ExceptionResponse`: the device answered with a Modbus exception code.

Two kinds of "down", each failing fast (``sent`` False) until its backoff (``reconnect_min_ms`` ..
``reconnect_max_ms``) elapses instead of waiting for a timeout again:

- the line: the connection or the serial port cannot be made or broke (every device on it);
- the device: it did not answer in ``timeout_ms`` (on a shared serial line only this unit: the
  others on the wire still answer). A late reply must never be taken for the answer to the next
  request: over TCP the connection is then dropped; a serial line settles first (it sends nothing
  until the reply came or the line stayed silent for ``late_reply_ms``: :mod:`.line`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pymodbus.exceptions import ConnectionException, ModbusException, ModbusIOException

from exchange._backoff import Backoff
from exchange._drivers.modbus import line as lines
from exchange._drivers.modbus.late import FUNCTION_CODES, late_reply
from exchange._drivers.modbus.settings import ModbusSettings

log = logging.getLogger(__name__)

EXCEPTION_NAMES = {
    1: "ILLEGAL FUNCTION",
    2: "ILLEGAL DATA ADDRESS",
    3: "ILLEGAL DATA VALUE",
    4: "SERVER DEVICE FAILURE",
    5: "ACKNOWLEDGE",
    6: "SERVER DEVICE BUSY",
    8: "MEMORY PARITY ERROR",
    10: "GATEWAY PATH UNAVAILABLE",
    11: "GATEWAY TARGET DEVICE FAILED TO RESPOND",
}


def exception_text(code: int | None) -> str:
    name = EXCEPTION_NAMES.get(code or -1, "UNKNOWN")
    return f"exception code {code} ({name})"


class Unreachable(Exception):
    """The request did not complete; ``sent`` says whether it may have reached the device."""

    def __init__(self, reason: str, *, sent: bool, timeout: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.sent = sent
        self.timeout = timeout


class ExceptionResponse(Exception):
    """The device answered with Modbus exception ``code`` (2: the address does not exist)."""

    def __init__(self, code: int | None) -> None:
        super().__init__(exception_text(code))
        self.code = code


def _foreign(function: str, args: tuple[Any, ...], kwargs: dict[str, Any], response: Any) -> bool:
    """True when ``response`` cannot be the answer to this request: another function, another
    address, or another number of values (checked where the reply carries them)."""
    expected = FUNCTION_CODES.get(function)
    code = getattr(response, "function_code", None)
    if expected is None or not isinstance(code, int):
        return False
    if code & 0x7F != expected:
        return True
    if bool(response.isError()):
        return False
    address = args[0] if args else kwargs.get("address")
    if expected in (5, 6, 15, 16, 22) and getattr(response, "address", address) != address:
        return True
    count = kwargs.get("count")
    if expected in (3, 4) and count is not None:
        return bool(len(response.registers) != count)
    if expected in (1, 2) and count is not None:
        return not count <= len(response.bits) < count + 8  # bits come padded to bytes
    return False


class ModbusLink:
    """One device (unit id) on its line, with fail-fast backoff (module doc)."""

    def __init__(self, settings: ModbusSettings, where: str) -> None:
        self.settings = settings
        self._where = where  # the device, as log messages name it
        self._line = lines.acquire(settings)
        self._closed = False
        self._timeout_s = settings.timeout_ms / 1000
        self._backoff = Backoff.from_ms(settings.reconnect_min_ms, settings.reconnect_max_ms)
        self._down_until = 0.0
        self._down_reason: str | None = None

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the line between requests (a read-modify-write: nothing else goes out in between)."""
        with self._line.lock:
            yield

    def request(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """One request (``function`` names the pymodbus client method); Unreachable or ExceptionResponse."""
        if self._closed:
            raise Unreachable("the driver is closed", sent=False)
        if time.monotonic() < self._down_until:
            raise Unreachable(self._down_reason or "device down", sent=False)
        line = self._line
        with line.lock:
            try:
                client = line.client(self._timeout_s)
            except lines.LineDown as exc:
                raise Unreachable(exc.reason, sent=False) from None
            try:
                line.wait_for_quiet(self.settings.late_reply_s)
            except lines.LineDown as exc:
                raise Unreachable(exc.reason, sent=False) from None
            owed = late_reply(self.settings.unit_id, function, args, kwargs)
            try:
                response = getattr(client, function)(*args, device_id=self.settings.unit_id, **kwargs)
            except ModbusIOException as exc:
                # no (valid) answer in time: a late reply must not answer the next request
                line.lost_reply(owed, self.settings.late_reply_s)
                reason = f"no response within {self.settings.timeout_ms} ms"
                self._mark_down(reason)
                raise Unreachable(reason, sent=True, timeout=True) from exc
            except (ConnectionException, ModbusException, OSError) as exc:
                reason = f"connection lost ({exc.__class__.__name__})"
                line.lost_reply(None, self.settings.late_reply_s)  # the request may have gone out
                line.mark_down(reason)
                raise Unreachable(reason, sent=True) from exc
            finally:
                line.frame_ended()
            if _foreign(function, args, kwargs, response):
                # RTU has no transaction id: a reply to an earlier request that came too late; this
                # request's own reply may still be on its way
                line.lost_reply(owed, self.settings.late_reply_s)
                raise Unreachable("a reply that does not answer this request (a late answer to an earlier one?)",
                                  sent=True, timeout=True)
        self._answered()
        if response.isError():
            raise ExceptionResponse(getattr(response, "exception_code", None))
        return response

    def retry_now(self) -> None:
        """Let the next request go out at once (a connection that had worked broke under a read)."""
        self._down_until = 0.0
        with self._line.lock:
            self._line.retry_now()

    def _answered(self) -> None:
        if self._down_reason is not None:
            log.info("%s: answering again", self._where)
            self._down_reason = None
            self._backoff.reset()
        self._down_until = 0.0

    def _mark_down(self, reason: str) -> None:
        if self._down_reason is None:
            log.warning("%s is unreachable: %s", self._where, reason)
        self._down_reason = reason
        self._down_until = time.monotonic() + self._backoff.next_s()

    def close(self) -> None:
        """Stop using the line (the last device on it closes it); later requests raise Unreachable."""
        if self._closed:
            return
        self._closed = True
        lines.release(self._line, self.settings)
