"""The Modbus driver (TCP, RTU over TCP, RTU on a serial line): Ignition-style addresses, coalesced
reads, exact writes.

One driver serves one device (unit id) through its :class:`~exchange._drivers.modbus.link.ModbusLink`,
serialised by a lock (worker threads call it concurrently); devices on one serial line or gateway
share the line (:mod:`exchange._drivers.modbus.line`). Reads are planned into the fewest block
requests (:mod:`exchange._drivers.modbus.plan`); writes use FC5/FC6 for one coil/register and
FC15/FC16 for multi-register values and adjacent tags, FC22 (mask write) for bits of registers, one
request per block, never repeated (:mod:`exchange._drivers.modbus.writes`). A device that cannot be
reached fails fast while the link backs off (``reconnect_min_ms`` .. ``reconnect_max_ms``).

Read qualities: Modbus exception 2 (illegal data address) gives ``Bad_NotFound``; other exception
codes ``Bad_DeviceError``; a request without answer ``Error_TimeoutExpired``; a device that cannot be
reached ``Bad_NotConnected``. Each bad value's ``error`` names device, address and exception code.

Writes get values the tag layer already converted (:mod:`exchange._values.convert`): the driver only
encodes them, in the tag's byte and word order (its own ``byte_order``/``word_order``, else the
device's). What it still refuses before anything is sent is what Modbus cannot carry at all: an
input register or discrete input (ReadOnlyTag), a value the register codec cannot pack (a string
longer than its registers: TagRangeError; not ASCII: TagTypeError), two tags writing one register
in one call, and a bit of a register on a device without mask write whose tag does not allow a
read-modify-write (``rmw = true``) (TagError).

Traps met on real lines (kept here, where the code that avoids them is):

- RTU has no transaction id: a reply that arrives after its timeout would be taken for the answer to
  the next request. After a timeout a TCP/gateway connection is dropped; a serial line settles (it
  sends nothing until the late reply came or it was silent for ``late_reply_ms``:
  :mod:`exchange._drivers.modbus.line`) and keeps the inter-frame silence.
- Unit id 0 on a serial line is broadcast: nobody answers, so it is refused in the settings.
- A serial port is opened exclusively: devices on one port must share one link (the line registry).
- A device without FC22 answers ILLEGAL FUNCTION (exception 1) to a mask write, writing nothing: the
  driver remembers it and, for tags with ``rmw = true``, reads and writes the register whole under
  the line's lock; the read and the write are still two requests, so another master can interleave.
- A pty (socat) does not pace bytes at the baud rate: timings over one are not the wire's.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from exchange._drivers.base import Point
from exchange._drivers.modbus.address import (
    BIT_TABLES,
    COIL,
    DISCRETE_INPUT,
    HOLDING_REGISTER,
    TABLE_NAMES,
    ModbusAddress,
    parse_modbus_address,
    registers_to_bytes,
)
from exchange._drivers.modbus.codec import Layout, decode_value_at, plain_struct
from exchange._drivers.modbus.link import ExceptionResponse, ModbusLink, Unreachable, exception_text
from exchange._drivers.modbus.plan import ReadBlock, WriteBlock, plan_reads
from exchange._drivers.modbus.settings import ModbusSettings
from exchange._drivers.modbus.writes import ILLEGAL_FUNCTION, BitWrite, Item, encode_checked, plan, rmw_refusal
from exchange._values import DataType, QualifiedValue, Quality
from exchange.errors import (
    AnswerLost,
    CommunicationError,
    ConfigError,
    DeviceError,
    ReadOnlyTag,
    TagError,
)

__all__ = ["ModbusDriver"]

log = logging.getLogger(__name__)

_PLAN_CACHE_SIZE = 256
_READ_FUNCTIONS = {
    COIL: "read_coils",
    DISCRETE_INPUT: "read_discrete_inputs",
    HOLDING_REGISTER: "read_holding_registers",
    "IR": "read_input_registers",
}


@dataclass(frozen=True)
class Target:
    """A point as the driver uses it: its address, its layout and whether it allows a RMW."""

    addr: ModbusAddress
    layout: Layout
    rmw: bool
    plain: struct.Struct | None = None  # a number read straight off the wire (big-endian): no rearranging


class ModbusDriver:
    """The :class:`~exchange._drivers.base.Driver` for one Modbus device (TCP or RTU)."""

    def __init__(self, settings: ModbusSettings) -> None:
        self.device = settings.device
        self.settings = settings
        self._lock = threading.Lock()
        self._link = ModbusLink(settings, self._where)
        self._targets: dict[tuple[str, DataType | None, tuple[tuple[str, Any], ...]], Target] = {}
        self._mask_write = settings.mask_write  # False once the device answered FC22 with ILLEGAL FUNCTION
        # learned from illegal-address answers: tables whose gaps must not be read, lone addresses
        self._no_span_tables: set[str] = set()
        self._isolated: set[tuple[str, int]] = set()
        self._learned = 0  # bumped when the sets above change: cached plans are then stale
        self._plans: dict[Any, tuple[list[Target], list[int], list[QualifiedValue | None], list[ReadBlock]]]
        self._plans = {}

    @property
    def _where(self) -> str:
        return f"modbus device {self.device!r} ({self.settings.endpoint})"

    # ---- reads ---------------------------------------------------------------------------

    def read(self, points: Sequence[Point]) -> list[QualifiedValue]:
        """Read every point in as few block requests as fit; results in the points' order."""
        with self._lock:
            targets, index_of, results, plan_ = self._plan(points)
            self._read_locked(targets, index_of, results, plan_)
        return [r if r is not None else QualifiedValue.bad(Quality.ERROR) for r in results]

    def _plan(
        self, points: Sequence[Point]
    ) -> tuple[list[Target], list[int], list[QualifiedValue | None], list[ReadBlock]]:
        """Parsed addresses and read blocks for ``points``; cached, as polls repeat the same list."""
        key = (self._learned, tuple((p.address, p.data_type, p.options) for p in points))
        cached = self._plans.get(key)
        if cached is None:
            results: list[QualifiedValue | None] = [None] * len(points)
            targets: list[Target] = []
            index_of: list[int] = []
            for i, point in enumerate(points):
                try:
                    targets.append(self._target(point))
                    index_of.append(i)
                except ConfigError as exc:
                    results[i] = QualifiedValue.bad(Quality.BAD_NOT_FOUND, error=f"{self._where}: {exc}")
            s = self.settings
            blocks = plan_reads(
                [t.addr for t in targets],
                max_registers=s.max_registers_per_read,
                max_bits=s.max_bits_per_read,
                span_gaps=s.span_gaps,
                no_span_tables=frozenset(self._no_span_tables),
                isolated=frozenset(self._isolated),
            )
            if len(self._plans) >= _PLAN_CACHE_SIZE:
                self._plans.clear()
            cached = self._plans[key] = (targets, index_of, results, blocks)
        targets, index_of, results, blocks = cached
        return targets, index_of, list(results), list(blocks)

    def _read_locked(
        self,
        targets: list[Target],
        index_of: list[int],
        results: list[QualifiedValue | None],
        queue: list[ReadBlock],
    ) -> None:
        down: Unreachable | None = None
        while queue:
            block = queue.pop(0)
            if down is not None:
                self._fill(block, targets, index_of, results, Quality.BAD_NOT_CONNECTED, down.reason)
                continue
            try:
                words = self._read_block(block)
            except Unreachable as exc:
                down = exc
                quality = Quality.ERROR_TIMEOUT_EXPIRED if exc.timeout else Quality.BAD_NOT_CONNECTED
                self._fill(block, targets, index_of, results, quality, exc.reason)
                continue
            except ExceptionResponse as exc:
                queue[:0] = self._split_after_exception(block, targets, exc, results, index_of)
                continue
            if len(words) < block.count:
                reason = f"short answer: {len(words)} of {block.count} values"
                self._fill(block, targets, index_of, results, Quality.BAD_DEVICE_ERROR, reason)
                continue
            now = time.time()
            good = Quality.GOOD
            if block.table in BIT_TABLES:
                for member in block.members:
                    value = bool(words[targets[member].addr.offset - block.start])
                    results[index_of[member]] = QualifiedValue(value, good, now)
                continue
            raw = registers_to_bytes(words)  # type: ignore[arg-type]
            start = block.start
            for member in block.members:
                target = targets[member]
                plain = target.plain  # a poll of 100 registers decodes 100 values: the common case is direct
                if plain is not None:
                    value = plain.unpack_from(raw, 2 * (target.addr.offset - start))[0]
                else:
                    value = decode_value_at(target.addr, raw, target.addr.offset - start, target.layout)
                results[index_of[member]] = QualifiedValue(value, good, now)

    def _split_after_exception(
        self,
        block: ReadBlock,
        targets: list[Target],
        exc: ExceptionResponse,
        results: list[QualifiedValue | None],
        index_of: list[int],
    ) -> list[ReadBlock]:
        """Blocks to try instead of one that got an exception; bad members get their quality."""
        distinct = {(targets[m].addr.offset, targets[m].addr.width) for m in block.members}
        if exc.code == 2 and len(distinct) > 1:
            # some address in the block does not exist: read each tag alone to find which, and
            # stop spanning gaps in this table (the gap may be what the device refused)
            self._no_span_tables.add(block.table)
            self._learned += 1
            singles: dict[tuple[int, int], ReadBlock] = {}
            for member in block.members:
                addr = targets[member].addr
                key = (addr.offset, addr.width)
                if key not in singles:
                    singles[key] = ReadBlock(block.table, addr.offset, addr.width, [])
                singles[key].members.append(member)
            return list(singles.values())
        if exc.code == 2 and (block.table, block.start) not in self._isolated:
            self._isolated.add((block.table, block.start))
            self._learned += 1
        quality = Quality.BAD_NOT_FOUND if exc.code == 2 else Quality.BAD_DEVICE_ERROR
        for member in block.members:
            addr = targets[member].addr
            message = f"{self._where}: read of {addr.text} answered {exception_text(exc.code)}"
            results[index_of[member]] = QualifiedValue.bad(quality, error=message)
        return []

    def _fill(
        self,
        block: ReadBlock,
        targets: list[Target],
        index_of: list[int],
        results: list[QualifiedValue | None],
        quality: Quality,
        reason: str,
    ) -> None:
        for member in block.members:
            message = f"{self._where}: read of {targets[member].addr.text} failed: {reason}"
            results[index_of[member]] = QualifiedValue.bad(quality, error=message)

    def _read_block(self, block: ReadBlock) -> list[int] | list[bool]:
        function = _READ_FUNCTIONS[block.table]
        try:
            response = self._link.request(function, block.start, count=block.count)
        except Unreachable as exc:
            if not exc.sent or exc.timeout:
                raise
            # the connection broke under an idempotent read: one immediate retry on a new one
            self._link.retry_now()
            response = self._link.request(function, block.start, count=block.count)
        if block.table in (COIL, DISCRETE_INPUT):
            return list(response.bits[: block.count])
        return list(response.registers)

    # ---- writes --------------------------------------------------------------------------

    def retry_now(self) -> None:
        """The next request goes out at once if the link or the unit is down (a write waiting for
        it, an explicit read); a serial line still settles first after a lost reply."""
        with self._lock:
            self._link.retry_now()

    def write(self, writes: Sequence[tuple[Point, Any]]) -> None:
        """Write each value once; adjacent values share one FC15/FC16 request, order is kept.

        The values are already converted to the points' types (the tag layer's job); they are only
        encoded here. Before the first request the driver refuses what it cannot send as asked (the
        module doc). A device refusal is a DeviceError. A connection that failed before anything
        was sent is a CommunicationError; once a request went out (its answer lost, or a later
        block failing after an earlier one was applied) it is AnswerLost. Each says which writes
        went out before it.
        """
        items = [self._item(point, value) for point, value in writes]
        operations = plan(items, self._where)
        with self._lock:
            for op in operations:
                if isinstance(op, BitWrite) and not self._mask_write and not op.rmw:
                    paths = [items[m].path for m in op.members]
                    raise TagError(f"{rmw_refusal(self._where, op, paths, self._no_mask_write_reason())}; "
                                   "nothing was sent")
            for number, op in enumerate(operations):
                targets = ", ".join(f"{items[m].path} at {items[m].addr.text}" for m in op.members)
                done = [items[m].path for o in operations[:number] for m in o.members]
                already = f"; already written: {', '.join(done)}" if done else ""
                try:
                    if isinstance(op, BitWrite):
                        self._write_bits(op)
                    else:
                        self._write_block(op)
                except Unreachable as exc:
                    # sent, or an earlier block of this call was applied: the call's outcome is in doubt
                    error = AnswerLost if exc.sent or done else CommunicationError
                    outcome = "may not have been applied" if exc.sent else "was not sent"
                    raise error(
                        f"{self._where}: write of {targets} {outcome}: {exc.reason}{already}"
                    ) from exc
                except ExceptionResponse as exc:
                    hint = ""
                    if isinstance(op, BitWrite) and exc.code == ILLEGAL_FUNCTION:
                        hint = ("; the device has no mask write (function 22): set rmw = true on the tag to "
                                "allow a read-modify-write of the register")
                    raise DeviceError(
                        f"{self._where} refused the write of {targets}: {exc}{hint}{already}"
                    ) from exc

    def _item(self, point: Point, value: Any) -> Item:
        """One write, checked and encoded (nothing is sent here)."""
        try:
            target = self._target(point)
        except ConfigError as exc:
            raise ConfigError(f"{self._where}: tag {point.path!r}: {exc}") from exc
        addr = target.addr
        if not addr.writable:
            noun = TABLE_NAMES[addr.table] if addr.bit is None else f"bit of an {TABLE_NAMES[addr.table]}"
            raise ReadOnlyTag(
                f"{self._where}: tag {point.path!r} at {addr.text} is {_article(noun)}, "
                "which Modbus cannot write; nothing was sent"
            )
        values = encode_checked(addr, target.layout, value, f"{self._where}: tag {point.path!r}")
        return Item(point.path, addr, values, target.layout, target.rmw)

    def _write_block(self, block: WriteBlock) -> None:
        values = block.values
        if block.table == COIL:
            if len(values) == 1:
                self._link.request("write_coil", block.start, bool(values[0]))
            else:
                self._link.request("write_coils", block.start, [bool(v) for v in values])
        elif len(values) == 1:
            self._link.request("write_register", block.start, int(values[0]))
        else:
            self._link.request("write_registers", block.start, [int(v) for v in values])

    def _write_bits(self, op: BitWrite) -> None:
        """One register's bits: a mask write, or (allowed, no FC22) a read-modify-write."""
        if self._mask_write:
            try:
                self._link.request("mask_write_register", address=op.offset, and_mask=op.and_mask,
                                   or_mask=op.set_mask)
                return
            except ExceptionResponse as exc:
                if exc.code != ILLEGAL_FUNCTION:
                    raise
                # the device has no FC22; the refused request changed nothing
                self._mask_write = False
                log.warning("%s answered the mask write of %s with %s: it has no mask write; bits of registers "
                            "are written by read-modify-write where the tag allows it", self._where, op.text, exc)
                if not op.rmw:
                    raise
        with self._link.exclusive():
            try:
                response = self._link.request("read_holding_registers", op.offset, count=1)
            except Unreachable as exc:
                # the read of the read-modify-write failed: the write itself was not sent
                raise Unreachable(f"{exc.reason} (reading {op.text} to change its bits)", sent=False,
                                  timeout=exc.timeout) from exc
            self._link.request("write_register", op.offset, op.apply(int(response.registers[0])))

    def _no_mask_write_reason(self) -> str:
        if self.settings.mask_write:
            return "the device answered mask write (function 22) with ILLEGAL FUNCTION"
        return "the device has no mask write (mask_write = false)"

    # ---- connection ----------------------------------------------------------------------

    def _target(self, point: Point) -> Target:
        key = (point.address, point.data_type, point.options)
        target = self._targets.get(key)
        if target is None:
            addr = parse_modbus_address(point.address, point.data_type, zero_based=self.settings.zero_based)
            layout = Layout(str(point.option("byte_order", self.settings.byte_order)).lower(),
                            str(point.option("word_order", self.settings.word_order)).lower())
            target = self._targets[key] = Target(addr, layout, point.option("rmw", False) is True,
                                                 plain_struct(addr, layout))
        return target

    def close(self) -> None:
        """Close the connection; later calls fail (reads Bad_NotConnected, writes CommunicationError)."""
        with self._lock:
            self._link.close()


def _article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun
