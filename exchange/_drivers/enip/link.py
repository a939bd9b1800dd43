"""One pycomm3 connection to a Logix controller: the write guard, reconnect backoff, stale sockets.

The write guard: pycomm3 1.2.14–1.2.16 builds the message of a lone Write Tag request twice into one
packet (``_write_build_single_request`` calls ``build_message()`` and then re-arms the request, so
``send`` appends the service a second time). A controller executes both copies. Its multi-request
path only takes each request's ``tag_only_message()`` and is not affected, so
:class:`GuardedLogixDriver` sends every write through it, a single write included, as one request
inside a Multiple Service Packet. tests/drivers/test_enip_writes.py counts Write Tag requests at the
simulator to prove it.
"""

from __future__ import annotations

import logging
import select
import time
from typing import Any

from pycomm3 import LogixDriver
from pycomm3.exceptions import PycommError, RequestError

from exchange._backoff import Backoff
from exchange._drivers.enip.settings import EnipSettings

log = logging.getLogger(__name__)

_HOOKS = ("_write_build_requests", "_write_build_multi_requests")
if not all(hasattr(LogixDriver, hook) for hook in _HOOKS):
    # Without these hooks the guard below would silently stop applying; refuse to run instead.
    raise ImportError(
        "the installed pycomm3 no longer has LogixDriver._write_build_requests: the enip driver's "
        "duplicate-write guard must be re-checked for this pycomm3 version"
    )


class GuardedLogixDriver(LogixDriver):
    """A LogixDriver that never puts a Write Tag request into a packet twice (module docstring)."""

    def _write_build_requests(self, parsed_tags: dict[int, dict[str, Any]]) -> list[Any]:
        if self._micro800:
            # Micro800 controllers have no Multiple Service Packet, and pycomm3's single-request
            # path is the one that duplicates writes: refuse rather than risk a double write.
            raise RequestError("writes to Micro800 controllers are not supported by this driver")
        requests: list[Any] = self._write_build_multi_requests(parsed_tags)  # type: ignore[no-untyped-call]
        return requests


class Unreachable(Exception):
    """The controller cannot be reached now (connect failed, or still inside the backoff window)."""


class LogixLink:
    """A lazily opened connection with reconnect :class:`~exchange._backoff.Backoff`. Not thread-safe: the driver
    holds its lock around every call.

    A connection that worked and then broke is reopened at once on the next call; only failed
    connects start the backoff (``reconnect_min_ms`` doubling to ``reconnect_max_ms``), during which
    calls fail fast with :class:`Unreachable`.
    """

    def __init__(self, settings: EnipSettings, tag_table: dict[str, dict[str, Any]] | None) -> None:
        self._settings = settings
        self._tag_table = tag_table  # None: upload the controller's tag list on connect
        self._plc: GuardedLogixDriver | None = None
        self._retry_at = 0.0
        self._backoff = Backoff.from_ms(settings.reconnect_min_ms, settings.reconnect_max_ms)
        self._last_error = ""
        self.opened_now = False  # True when session() had to open the connection it returned

    def session(self) -> GuardedLogixDriver:
        """An open connection, opened here if needed; Unreachable when it cannot be had now."""
        plc = self._plc
        if plc is not None and not _socket_is_stale(plc):
            self.opened_now = False
            return plc
        if plc is not None:
            self.drop("the controller closed the connection")
        now = time.monotonic()
        if now < self._retry_at:
            raise Unreachable(
                f"unreachable ({self._last_error}); next attempt in "
                f"{self._retry_at - now:.1f} s"
            )
        self._plc = self._open()
        self.opened_now = True
        return self._plc

    def _open(self) -> GuardedLogixDriver:
        settings = self._settings
        # The tag list is uploaded here rather than by open(), so that a failing upload is told apart
        # from a failing connection.
        plc = GuardedLogixDriver(settings.cip_path, init_tags=False)
        plc.socket_timeout = settings.timeout_ms / 1000
        step = "connect"
        try:
            if not plc.open():  # type: ignore[no-untyped-call]
                raise Unreachable("the controller refused to register a session")
            if self._tag_table is None:
                step = "upload"
                plc.get_tag_list(program="*")
        except (PycommError, OSError, Unreachable) as exc:
            _close_socket(plc)
            reason = _describe(exc).strip().rstrip("-").strip()
            if step == "upload":
                reason = (f"the tag list upload failed ({reason}); set upload_tags = false for controllers "
                          "and simulators that cannot list their tags")
            self._fail(reason)
            raise Unreachable(f"unreachable: {reason}") from exc
        if self._tag_table is not None:
            # pycomm3 resolves every tag through _tags; the config's definitions stand in for the
            # upload (the documented way to share tag definitions between LogixDriver instances).
            plc._tags = self._tag_table
        if self._last_error:
            log.info("enip device %s: connected to %s again", settings.device, settings.endpoint)
        self._backoff.reset()
        self._retry_at = 0.0
        self._last_error = ""
        return plc

    def _fail(self, reason: str) -> None:
        if not self._last_error:
            log.warning("enip device %s: cannot connect to %s: %s", self._settings.device,
                        self._settings.endpoint, reason)
        self._last_error = reason
        self._retry_at = time.monotonic() + self._backoff.next_s()

    def retry_now(self) -> None:
        """Let the next session() try to connect at once, inside the backoff window too."""
        self._retry_at = 0.0

    def drop(self, reason: object) -> None:
        """Forget a broken connection; the next session() reopens it without waiting."""
        if self._plc is not None:
            log.info("enip device %s: connection to %s dropped: %s", self._settings.device,
                     self._settings.endpoint, _describe(reason))
            _close_socket(self._plc)
            self._plc = None

    def close(self) -> None:
        """Close politely (Forward Close, Unregister Session); errors only logged."""
        plc, self._plc = self._plc, None
        if plc is None:
            return
        try:
            plc.close()  # type: ignore[no-untyped-call]
        except (PycommError, OSError) as exc:
            log.debug("enip device %s: close: %s", self._settings.device, exc)
            _close_socket(plc)


def _socket_is_stale(plc: LogixDriver) -> bool:
    # An idle CIP client connection never has unsolicited data waiting: readable means the controller
    # closed it (EOF or reset). Checking before each call turns a restarted controller into a clean
    # reconnect instead of a write sent into a dead socket.
    sock = getattr(getattr(plc, "_sock", None), "sock", None)
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _close_socket(plc: LogixDriver) -> None:
    # Closing the raw socket, not plc.close(): that would send Forward Close and Unregister Session
    # into a connection already known to be broken, each waiting for the socket timeout.
    sock = getattr(plc, "_sock", None)
    try:
        if sock is not None:
            sock.close()
    except OSError:
        pass


def _describe(exc: object) -> str:
    if isinstance(exc, BaseException):
        text = str(exc) or type(exc).__name__
        cause = exc.__cause__
        if cause is not None and str(cause):
            text = f"{text}: {cause}"
        return text
    return str(exc)
