"""The physical path to Modbus devices: a TCP connection or a serial port, shared where the wire is.

A :class:`Line` owns one pymodbus sync client and serialises every request on it (``lock``):

- ``transport = "tcp"``: one line per device, as each device has its own TCP connection;
- ``"rtu-over-tcp"``: one line per gateway (``host:port``): the gateway's serial side is one wire,
  and many gateways take a single TCP connection;
- ``"serial"``: one line per ``serial_port``; the port is opened exclusively, so the devices on it
  (several unit ids) must share it.

Devices sharing a line share its reconnect backoff (a port that cannot be opened is down for all
of them) but not their own failures: a unit that does not answer is that unit's problem
(:mod:`exchange._drivers.modbus.link`). Between the end of one frame and the next request the line
keeps the RTU inter-frame silence (``ModbusSettings.gap_s``): 3.5 characters, 1.75 ms above
19,200 baud. Lines are found by :func:`acquire` and released by :func:`release`; the last user
closes the port. Devices sharing a serial port must agree on its settings (ConfigError otherwise).
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from typing import Any

from pymodbus import FramerType
from pymodbus.client import ModbusSerialClient, ModbusTcpClient

from exchange._backoff import Backoff
from exchange._drivers.modbus.settings import RTU_OVER_TCP, SERIAL, ModbusSettings
from exchange.errors import ConfigError

log = logging.getLogger(__name__)

# the settings that must agree between devices on one serial port (they are the port's)
_PORT_SETTINGS = ("baudrate", "parity", "stopbits", "bytesize")


class LineDown(Exception):
    """The line cannot be used now (cannot connect or open, or backing off after that)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Line:
    """One client and its state; every method but :meth:`describe` is called with ``lock`` held."""

    def __init__(self, settings: ModbusSettings, key: tuple[str, ...]) -> None:
        self.settings = settings  # of the device that opened it: the port's settings
        self.key = key
        self.lock = threading.RLock()
        self.users: set[str] = set()
        self.gap_s = settings.gap_s
        self._client: Any = None  # a pymodbus sync client (untyped methods)
        self._timeout_s: float | None = None
        self._backoff = Backoff.from_ms(settings.reconnect_min_ms, settings.reconnect_max_ms)
        self._down_until = 0.0
        self._down_reason: str | None = None
        self._quiet_from = 0.0  # monotonic time the last frame ended
        self.closed = False

    @property
    def endpoint(self) -> str:
        return self.settings.endpoint

    def client(self, timeout_s: float) -> Any:
        """The connected client, with ``timeout_s`` for its next request; LineDown if it cannot be."""
        if self.closed:
            raise LineDown("the driver is closed")
        client = self._client
        if client is not None and client.socket is not None:
            if self.settings.transport == SERIAL or not _peer_closed(client.socket):
                self._set_timeout(client, timeout_s)
                return client
            client.close()  # the server closed or restarted since the last request: reconnect
        if time.monotonic() < self._down_until:
            raise LineDown(self._down_reason or "down")
        if client is None:
            client = self._client = self._new_client(timeout_s)
        self._set_timeout(client, timeout_s)
        if not client.connect():
            what = "open" if self.settings.transport == SERIAL else "connect to"
            self.mark_down(f"cannot {what} {self.endpoint}")
            raise LineDown(self._down_reason or "cannot connect")
        if self._down_reason is not None:
            log.info("modbus line %s: connected again", self.endpoint)
        self._down_reason = None
        self._down_until = 0.0
        self._backoff.reset()
        return client

    def _new_client(self, timeout_s: float) -> Any:
        s = self.settings
        if s.transport == SERIAL:
            return ModbusSerialClient(s.serial_port, framer=FramerType.RTU, baudrate=s.baudrate, bytesize=s.bytesize,
                                      parity=s.parity, stopbits=s.stopbits, timeout=timeout_s, retries=0)
        framer = FramerType.RTU if s.transport == RTU_OVER_TCP else FramerType.SOCKET
        return ModbusTcpClient(s.host, port=s.port, framer=framer, timeout=timeout_s, retries=0)

    def _set_timeout(self, client: Any, timeout_s: float) -> None:
        # Devices on one line may have their own timeout_ms. pymodbus reads the timeout from its
        # comm_params for each request: the client's (serial polling, TCP recv) and its
        # transaction manager's copy (the overall deadline); both are set.
        if timeout_s == self._timeout_s:
            return
        client.comm_params.timeout_connect = timeout_s
        transaction = getattr(client, "transaction", None)
        if transaction is not None:
            transaction.comm_params.timeout_connect = timeout_s
        self._timeout_s = timeout_s

    def wait_for_quiet(self) -> None:
        """Sleep out the rest of the inter-frame silence before a request goes out."""
        if self.gap_s <= 0:
            return
        pause = self._quiet_from + self.gap_s - time.monotonic()
        if pause > 0:
            time.sleep(pause)

    def frame_ended(self) -> None:
        self._quiet_from = time.monotonic()

    def drop(self) -> None:
        """Close the connection (a late reply must not answer the next request); the next request
        reconnects at once. A serial port stays open: pymodbus empties its input before sending."""
        if self.settings.transport != SERIAL and self._client is not None:
            self._client.close()

    def mark_down(self, reason: str) -> None:
        """Close the client and refuse requests for a backoff step (the line itself is broken)."""
        if self._client is not None:
            self._client.close()
        if self._down_reason is None:
            log.warning("modbus line %s is unreachable: %s", self.endpoint, reason)
        self._down_reason = reason
        self._down_until = time.monotonic() + self._backoff.next_s()

    def retry_now(self) -> None:
        self._down_until = 0.0

    def close(self) -> None:
        self.closed = True
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


_lines: dict[tuple[str, ...], Line] = {}
_lines_lock = threading.Lock()


def _key(settings: ModbusSettings) -> tuple[str, ...]:
    if settings.transport == SERIAL:
        return (SERIAL, settings.serial_port)
    if settings.transport == RTU_OVER_TCP:
        return (RTU_OVER_TCP, settings.host.lower(), str(settings.port))
    return ("tcp", settings.device, str(id(settings)))  # never shared


def acquire(settings: ModbusSettings) -> Line:
    """The line of ``settings``' device, opened lazily; shared with the devices on the same wire."""
    key = _key(settings)
    with _lines_lock:
        line = _lines.get(key)
        if line is None or line.closed:
            line = _lines[key] = Line(settings, key)
        elif settings.transport == SERIAL:
            for name in _PORT_SETTINGS:
                mine, theirs = getattr(settings, name), getattr(line.settings, name)
                if mine != theirs:
                    raise ConfigError(
                        f"devices.{settings.device}.{name} is {mine!r} but device {line.settings.device!r} on the "
                        f"same serial_port {settings.serial_port!r} has {theirs!r}: one port has one setting"
                    )
        line.users.add(settings.device + f"#{id(settings)}")
        return line


def release(line: Line, settings: ModbusSettings) -> None:
    """This device no longer uses ``line``; the last user closes it."""
    with _lines_lock:
        line.users.discard(settings.device + f"#{id(settings)}")
        if line.users:
            return
        if _lines.get(line.key) is line:
            del _lines[line.key]
    with line.lock:
        line.close()
