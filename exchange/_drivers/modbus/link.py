"""One Modbus TCP connection (pymodbus sync client): requests, exception answers, reconnect backoff.

:class:`ModbusLink` is not thread-safe: :class:`~exchange._drivers.modbus.driver.ModbusDriver` holds
its lock around every call. A request either returns the response or raises:

- :class:`Unreachable`: no answer; ``sent`` says whether the request may have reached the device
  (then a write's outcome is in doubt), ``timeout`` whether the device simply did not answer;
- :class:`ExceptionResponse`: the device answered with a Modbus exception code.

A device that cannot be reached is marked down with a growing backoff (``reconnect_min_ms`` ..
``reconnect_max_ms``); until the backoff elapses every request fails at once (``sent`` False) instead
of waiting for a timeout again.
"""

from __future__ import annotations

import logging
import select
import socket
import time
from typing import Any

from pymodbus.client import ModbusTcpClient
from pymodbus.exceptions import ConnectionException, ModbusException, ModbusIOException

from exchange._backoff import Backoff
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


class ModbusLink:
    """A lazily opened connection to one device, with fail-fast reconnect backoff (module doc)."""

    def __init__(self, settings: ModbusSettings, where: str) -> None:
        self.settings = settings
        self._where = where  # the device, as log messages name it
        self._client: Any = None  # ModbusTcpClient (untyped methods)
        self._closed = False
        self._backoff = Backoff.from_ms(settings.reconnect_min_ms, settings.reconnect_max_ms)
        self._down_until = 0.0
        self._down_reason: str | None = None

    def request(self, function: str, *args: Any, **kwargs: Any) -> Any:
        """One request (``function`` names the pymodbus client method); Unreachable or ExceptionResponse."""
        client = self._connected_client()
        try:
            response = getattr(client, function)(*args, device_id=self.settings.unit_id, **kwargs)
        except ModbusIOException as exc:
            # no (valid) answer in time: the socket may still deliver a late reply, so drop it
            client.close()
            reason = f"no response within {self.settings.timeout_ms} ms"
            self._mark_down(reason)
            raise Unreachable(reason, sent=True, timeout=True) from exc
        except (ConnectionException, ModbusException, OSError) as exc:
            client.close()
            reason = f"connection lost ({exc.__class__.__name__})"
            self._mark_down(reason)
            raise Unreachable(reason, sent=True) from exc
        if response.isError():
            raise ExceptionResponse(getattr(response, "exception_code", None))
        return response

    def retry_now(self) -> None:
        """Let the next request connect at once (a connection that had worked broke under a read)."""
        self._down_until = 0.0

    def _connected_client(self) -> Any:
        if self._closed:
            raise Unreachable("the driver is closed", sent=False)
        client = self._client
        if client is not None and client.socket is not None:
            if not _peer_closed(client.socket):
                return client
            client.close()  # the server closed or restarted since the last request: reconnect
        if time.monotonic() < self._down_until:
            raise Unreachable(self._down_reason or "device down", sent=False)
        if client is None:
            client = ModbusTcpClient(
                self.settings.host,
                port=self.settings.port,
                timeout=self.settings.timeout_ms / 1000,
                retries=0,
            )
            self._client = client
        if not client.connect():
            self._mark_down(f"cannot connect to {self.settings.endpoint}")
            raise Unreachable(self._down_reason or "cannot connect", sent=False)
        if self._down_reason is not None:
            log.info("%s: connected again", self._where)
        self._down_reason = None
        self._down_until = 0.0
        self._backoff.reset()
        return client

    def _mark_down(self, reason: str) -> None:
        if self._down_reason is None:
            log.warning("%s is unreachable: %s", self._where, reason)
        self._down_reason = reason
        self._down_until = time.monotonic() + self._backoff.next_s()

    def close(self) -> None:
        """Close the connection; every later request raises Unreachable (not sent)."""
        self._closed = True
        if self._client is not None:
            self._client.close()
            self._client = None


def _peer_closed(sock: socket.socket) -> bool:
    """True when the peer closed the connection or left unread bytes (a stale reply) on it."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        # nothing is outstanding between requests, so anything readable (EOF or bytes) is stale
        return bool(readable)
    except (OSError, ValueError):
        return True
