"""EtherNet/IP driver for Logix controllers (ControlLogix, CompactLogix), built on pycomm3's LogixDriver.

Addresses are Logix symbolic names (grammar in :mod:`exchange._drivers.enip.tags`). All the points of
one ``read`` or ``write`` call travel together in Multiple Service Packets (pycomm3 splits them by the
connection size). Settings (``[devices.NAME]``): ``host`` (required), ``port`` 44818, ``slot`` 0,
``upload_tags`` true, ``timeout_ms`` 3000, ``reconnect_min_ms`` 200, ``reconnect_max_ms`` 5000.

With ``upload_tags = false`` the controller's tag list is not uploaded (cpppo and some gateways cannot
serve it): each point's configured data type becomes its tag definition.

Exactly-once writes: every write, a single one included, goes out as one Write Tag request inside a
Multiple Service Packet (see :mod:`exchange._drivers.enip.link` for the pycomm3 bug this avoids), and
the driver never re-sends a write by itself. Reads, which are safe to repeat, are retried once on a
fresh connection when a connection that had worked turns out to be broken (controller restarted).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from pycomm3.cip.status_info import SERVICE_STATUS
from pycomm3.exceptions import PycommError, RequestError
from pycomm3.tag import Tag

from exchange._drivers.base import Point
from exchange._drivers.enip.link import LogixLink, Unreachable
from exchange._drivers.enip.settings import EnipSettings
from exchange._drivers.enip.tags import TagDefinitions, parse_logix_address
from exchange._values import QualifiedValue, Quality
from exchange.errors import (
    AnswerLost,
    CommunicationError,
    DeviceError,
    ExchangeError,
    TagError,
    TagTypeError,
)

log = logging.getLogger(__name__)

_NOT_IN_TAG_LIST = "Tag doesn't exist"  # pycomm3's text for a name missing from its tag table
_ENCODING_FAILURES = ("Error encoding value", "Unable to create a writable value", "Invalid Tag Request")
_STATUS_SUFFIX = re.compile(r"\(([0-9a-fA-F]{2}), [0-9a-fA-F]+\)\s*$")
_NOT_FOUND_STATUSES = {0x04, 0x05}  # path syntax error, path destination unknown


def cip_status(error: str) -> int | None:
    """The CIP general status code in a pycomm3 error text, or None when the text carries none."""
    match = _STATUS_SUFFIX.search(error)
    if match:
        return int(match.group(1), 16)
    for code, text in SERVICE_STATUS.items():
        if error.startswith(text):
            return int(code)
    return None


def _describe_status(error: str) -> str:
    code = cip_status(error)
    text = error.strip().rstrip("-").strip()
    if error.startswith(_NOT_IN_TAG_LIST):
        return "the tag is not in the controller's tag list"
    return f"CIP status 0x{code:02X}: {text}" if code is not None else text


def _read_quality(error: str) -> Quality:
    if error.startswith(_NOT_IN_TAG_LIST) or cip_status(error) in _NOT_FOUND_STATUSES:
        return Quality.BAD_NOT_FOUND
    if cip_status(error) == 0x0F:
        return Quality.BAD_ACCESS_DENIED
    if error.startswith("Failed to parse reply"):
        return Quality.ERROR_TYPE_CONVERSION
    return Quality.BAD_DEVICE_ERROR


class EnipDriver:
    """The :class:`exchange._drivers.base.Driver` for one Logix controller; safe to call from many threads."""

    def __init__(self, settings: EnipSettings) -> None:
        self.device = settings.device
        self.settings = settings
        self._lock = threading.Lock()  # pycomm3 is not thread-safe: one request at a time
        self._definitions = None if settings.upload_tags else TagDefinitions()
        self._link = LogixLink(settings, None if self._definitions is None else self._definitions.table)

    def _where(self) -> str:
        return f"device {self.device} ({self.settings.endpoint})"

    def read(self, points: Sequence[Point]) -> list[QualifiedValue]:
        """Read every point in as few requests as pycomm3 can pack; one bad point never fails others."""
        results: list[QualifiedValue | None] = [None] * len(points)
        wanted: dict[str, list[int]] = {}  # address -> positions, so a repeated address is read once
        tags: list[Tag] | None = None
        down = ""
        with self._lock:
            for i, point in enumerate(points):
                try:
                    address = parse_logix_address(point.address)
                    if self._definitions is not None:
                        self._definitions.declare(address, point.data_type)
                except TagError as exc:
                    bad = Quality.BAD_NOT_FOUND
                    if isinstance(exc, TagTypeError):
                        bad = Quality.ERROR_TYPE_CONVERSION
                    results[i] = QualifiedValue.bad(bad, error=f"{self._where()}: {point.path}: {exc}")
                    continue
                wanted.setdefault(address.text, []).append(i)
            if wanted:
                try:
                    tags = self._read_tags(list(wanted))
                except Unreachable as exc:
                    down = f"{self._where()}: {exc}"
        stamp = time.time()
        for n, address_text in enumerate(wanted):
            if tags is None:
                value = QualifiedValue.bad(Quality.BAD_NOT_CONNECTED, stamp, down)
            else:
                value = self._qualify(address_text, tags[n], stamp)
            for i in wanted[address_text]:
                results[i] = value
        return [r if r is not None else QualifiedValue.bad(Quality.ERROR, stamp) for r in results]

    def _read_tags(self, names: list[str]) -> list[Tag]:
        for attempt in (1, 2):
            plc = self._link.session()
            try:
                out = plc.read(*names)
            except (PycommError, OSError) as exc:
                self._link.drop(exc)
                if self._link.opened_now or attempt == 2:
                    raise Unreachable(f"the connection broke during the read: {exc}") from exc
                continue  # the connection had worked: the controller may have restarted; retry once
            return list(out) if isinstance(out, list) else [out]
        raise AssertionError("unreachable")  # pragma: no cover

    def _qualify(self, address: str, tag: Tag, stamp: float) -> QualifiedValue:
        if tag.error is None:
            return QualifiedValue.good(tag.value, stamp)
        error = str(tag.error)
        return QualifiedValue.bad(
            _read_quality(error), stamp, f"{self._where()}: read of {address}: {_describe_status(error)}"
        )

    def retry_now(self) -> None:
        """The next request connects at once if the controller is down (a write waits for it)."""
        with self._lock:
            self._link.retry_now()

    def write(self, writes: Sequence[tuple[Point, Any]]) -> None:
        """Write every value exactly once, all in one call to the controller.

        Raises TagPathError/TagTypeError before sending anything for a malformed address or (with
        ``upload_tags = false``) a point without a type; CommunicationError when the controller cannot
        be reached or the connection broke during the request (the write may or may not have been
        applied); DeviceError naming device, tag, address and CIP status when the controller refused
        any of the writes (the others were applied).
        """
        if not writes:
            return
        for point, value in writes:
            if isinstance(value, (list, tuple)):  # a tag without a type lets a list through to the device
                raise TagTypeError(f"{self._where()}: tag {point.path!r} (address {point.address}) takes one value, "
                                   f"got a list of {len(value)}; address an element instead (Arr[3]); nothing was sent")
        addresses = [parse_logix_address(point.address) for point, _ in writes]
        with self._lock:
            if self._definitions is not None:
                for (point, _), address in zip(writes, addresses):
                    self._definitions.declare(address, point.data_type)
            paths = ", ".join(point.path for point, _ in writes)
            try:
                plc = self._link.session()
            except Unreachable as exc:
                raise CommunicationError(f"{self._where()}: cannot write {paths}: {exc}") from exc
            try:
                out = plc.write(*[(a.text, value) for a, (_, value) in zip(addresses, writes)])
            except RequestError as exc:
                raise DeviceError(f"{self._where()}: cannot write {paths}: {exc}") from exc
            except (PycommError, OSError) as exc:
                self._link.drop(exc)
                raise AnswerLost(
                    f"{self._where()}: the connection broke while writing {paths}; the write may or may "
                    f"not have been applied: {exc}"
                ) from exc
        results = list(out) if isinstance(out, list) else [out]
        failures = [self._write_failure(point, value, tag) for (point, value), tag in zip(writes, results)
                    if tag.error is not None]
        if failures:
            error = failures[0]
            if len(failures) > 1:
                error = type(error)("; ".join(str(f) for f in failures))
            raise error

    def _write_failure(self, point: Point, value: Any, tag: Tag) -> ExchangeError:
        error = str(tag.error)
        where = f"{self._where()}: write of {value!r} to {point.path} (address {point.address})"
        if error.startswith(_ENCODING_FAILURES):
            return TagTypeError(f"{where} not sent: the value does not fit the tag's type ({error})")
        return DeviceError(f"{where} refused: {_describe_status(error)}")

    def close(self) -> None:
        with self._lock:
            self._link.close()
