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

A reply that comes after its request timed out (:meth:`Line.lost_reply`). RTU has no transaction
id, so a late reply to a read of one register is indistinguishable from the answer to the next read
of another: no check of the frame can tell them apart, only the line's timing can. Over TCP the
connection is closed (a new one cannot carry the old reply). A serial port cannot be closed on the
wire: the device answers whether the port is open or not, and reopening it only empties buffers
that the late reply has not reached yet; pymodbus discards only the bytes already there when it
sends. So after a lost reply a serial line *settles* before anything else goes out on it, for any
unit (:meth:`Line.wait_for_quiet`): it withdraws what it has not transmitted yet, then reads and
discards everything the line brings until either

- the late reply itself came, whole (this unit, this function or its exception, the length asked
  for, a good CRC: :mod:`exchange._drivers.modbus.late`), followed by the inter-frame silence:
  the device has answered, nothing is owed any more; or
- the line has been silent for ``late_reply_ms`` (default: the device's ``timeout_ms``) since the
  timeout or the last byte: the request is taken as lost (a CRC error on the way, a device that was
  off). Bytes restart that silence, and a line that does not fall silent in
  ``HOLD_LIMIT`` windows (at least ``HOLD_MIN_S``) is marked down.

Only then is the OS input buffer flushed and the next request sent. What stays possible is a device
or line that answers later than ``timeout_ms + late_reply_ms``: no master can tell that reply from
the next answer, so the bound is a setting to raise for lines known to stall. Bytes found waiting
before a request (such a reply, or noise) are logged and settle the line again.
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
from exchange._drivers.modbus.late import LateReply, StillTalking, drain
from exchange._drivers.modbus.settings import RTU_OVER_TCP, SERIAL, ModbusSettings
from exchange.errors import ConfigError

log = logging.getLogger(__name__)

# the settings that must agree between devices on one serial port (they are the port's)
_PORT_SETTINGS = ("baudrate", "parity", "stopbits", "bytesize")
HOLD_LIMIT = 5  # late_reply_ms windows a settling line may keep bringing bytes before it is marked down
HOLD_MIN_S = 1.0  # ... and never less than this, so a short window still lets a late reply through


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
        # settling after a lost reply (module doc): since when, how long a silence, the reply owed
        self._settling = False
        self._lost_at = 0.0
        self._settle_s = 0.0
        self._owed: LateReply | None = None
        self._opened_at = 0.0
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
        self._opened_at = time.monotonic()  # a settling line counts its silence from here (module doc)
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

    def wait_for_quiet(self, late_reply_s: float) -> None:
        """Before a request goes out: settle the line if a reply may still be on its way (module
        doc; ``late_reply_s`` is the requesting device's window for bytes found waiting), then sleep
        out the rest of the inter-frame silence. LineDown if the line does not fall silent."""
        if self.settings.transport == SERIAL and self._client is not None:
            if not self._settling and self._waiting() > 0:
                log.warning("modbus line %s: bytes arrived while no request was waiting for them (a reply "
                            "later than timeout_ms + late_reply_ms, or noise): settling the line before the "
                            "next request", self.endpoint)
                self._settling, self._lost_at = True, time.monotonic()
                self._settle_s, self._owed = late_reply_s, None
            if self._settling:
                self._settle()
        if self.gap_s <= 0:
            return
        pause = self._quiet_from + self.gap_s - time.monotonic()
        if pause > 0:
            time.sleep(pause)

    def frame_ended(self) -> None:
        self._quiet_from = time.monotonic()

    def lost_reply(self, owed: LateReply | None, late_reply_s: float) -> None:
        """A request got no (valid) answer in time: its reply may still come and must not answer the
        next request. Over TCP the connection is closed (the next request reconnects at once); a
        serial line withdraws what it has not transmitted and settles before its next request
        (module doc): for ``late_reply_s`` of silence, or until ``owed`` (the reply) came."""
        if self.settings.transport != SERIAL:
            if self._client is not None:
                self._client.close()
            return
        if self._settling:
            # not settled since an earlier loss (the port broke in between): two replies may be
            # owed, and only silence tells that neither will come
            owed, late_reply_s = None, max(late_reply_s, self._settle_s)
        self._settling, self._lost_at, self._owed, self._settle_s = True, time.monotonic(), owed, late_reply_s
        port = self._client.socket if self._client is not None else None
        if port is not None:
            try:
                port.reset_output_buffer()  # a request still queued in the adapter is not sent late
            except (OSError, ValueError) as exc:  # serial.SerialException is an OSError
                log.debug("modbus line %s: cannot flush the output: %s", self.endpoint, exc)

    def _waiting(self) -> int:
        try:
            return int(self._client.socket.in_waiting)
        except (OSError, ValueError, AttributeError):
            return 0  # the request itself will find the port broken

    def _settle(self) -> None:
        """Discard what the line brings until the owed reply came or the line was silent for the
        window (module doc); then flush the input. LineDown (and the line marked down) if the port
        breaks or the line keeps talking for ``HOLD_LIMIT`` windows (at least ``HOLD_MIN_S``)."""
        port = self._client.socket
        try:
            came_at = drain(port, self._owed, window_s=self._settle_s, gap_s=self.gap_s,
                            silent_from=max(self._lost_at, self._opened_at),
                            limit_s=max(HOLD_LIMIT * self._settle_s, HOLD_MIN_S))
            port.reset_input_buffer()
        except StillTalking as exc:
            self.mark_down(f"{exc} after a lost reply (another master on it, or a wrong baudrate?)")
            raise LineDown(self._down_reason or str(exc)) from exc
        except (OSError, ValueError) as exc:  # serial.SerialException is an OSError
            self.mark_down(f"the port failed while settling ({exc.__class__.__name__})")
            raise LineDown(self._down_reason or "the port failed") from exc
        if came_at is not None:
            log.warning("modbus line %s: a reply came %.0f ms after its request had timed out and was "
                        "discarded (a device this slow needs a longer timeout_ms)", self.endpoint,
                        (came_at - self._lost_at) * 1000)
        else:
            log.info("modbus line %s: silent again %.0f ms after a lost reply", self.endpoint,
                     (time.monotonic() - self._lost_at) * 1000)
        self._settling, self._owed, self._settle_s = False, None, 0.0
        self._quiet_from = time.monotonic()

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
