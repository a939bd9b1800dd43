"""The Modbus TCP driver: Ignition-style addresses, coalesced reads, exact writes.

One driver owns one connection to one device (:class:`~exchange._drivers.modbus.link.ModbusLink`),
serialised by a lock (worker threads call it concurrently). Reads are planned into the fewest block
requests (:mod:`exchange._drivers.modbus.plan`); writes use FC5/FC6 for one coil/register and FC15/FC16
for multi-register values and adjacent tags, one request per block, never repeated. A device that
cannot be reached fails fast while the link backs off (``reconnect_min_ms`` .. ``reconnect_max_ms``).

Read qualities: Modbus exception 2 (illegal data address) gives ``Bad_NotFound``; other exception
codes ``Bad_DeviceError``; a request without answer ``Error_TimeoutExpired``; a device that cannot be
reached ``Bad_NotConnected``. Each bad value's ``error`` names device, address and exception code.

Writes get values the tag layer already converted (:mod:`exchange._values.convert`): the driver only
encodes them. What it still refuses before anything is sent is what Modbus cannot carry at all: an
input register or discrete input (ReadOnlyTag), a value the register codec cannot pack (TagRangeError).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

from exchange._drivers.base import Point
from exchange._drivers.modbus.address import (
    BIT_TABLES,
    COIL,
    DISCRETE_INPUT,
    HOLDING_REGISTER,
    TABLE_NAMES,
    ModbusAddress,
    decode_at,
    encode,
    parse_modbus_address,
    registers_to_bytes,
)
from exchange._drivers.modbus.link import ExceptionResponse, ModbusLink, Unreachable, exception_text
from exchange._drivers.modbus.plan import ReadBlock, WriteBlock, plan_reads, plan_writes
from exchange._drivers.modbus.settings import ModbusSettings
from exchange._values import DataType, QualifiedValue, Quality
from exchange.errors import (
    AnswerLost,
    CommunicationError,
    ConfigError,
    DeviceError,
    ReadOnlyTag,
    TagRangeError,
)

__all__ = ["ModbusDriver"]

_PLAN_CACHE_SIZE = 256
_READ_FUNCTIONS = {
    COIL: "read_coils",
    DISCRETE_INPUT: "read_discrete_inputs",
    HOLDING_REGISTER: "read_holding_registers",
    "IR": "read_input_registers",
}


class ModbusDriver:
    """The :class:`~exchange._drivers.base.Driver` for one Modbus TCP device."""

    def __init__(self, settings: ModbusSettings) -> None:
        self.device = settings.device
        self.settings = settings
        self._lock = threading.Lock()
        self._link = ModbusLink(settings, self._where)
        self._addresses: dict[tuple[str, DataType | None], ModbusAddress] = {}
        # learned from illegal-address answers: tables whose gaps must not be read, lone addresses
        self._no_span_tables: set[str] = set()
        self._isolated: set[tuple[str, int]] = set()
        self._learned = 0  # bumped when the sets above change: cached plans are then stale
        self._plans: dict[Any, tuple[list[ModbusAddress], list[int], list[QualifiedValue | None], list[ReadBlock]]]
        self._plans = {}

    @property
    def _where(self) -> str:
        return f"modbus device {self.device!r} ({self.settings.endpoint})"

    # ---- reads ---------------------------------------------------------------------------

    def read(self, points: Sequence[Point]) -> list[QualifiedValue]:
        """Read every point in as few block requests as fit; results in the points' order."""
        with self._lock:
            addrs, index_of, results, plan = self._plan(points)
            self._read_locked(addrs, index_of, results, plan)
        return [r if r is not None else QualifiedValue.bad(Quality.ERROR) for r in results]

    def _plan(
        self, points: Sequence[Point]
    ) -> tuple[list[ModbusAddress], list[int], list[QualifiedValue | None], list[ReadBlock]]:
        """Parsed addresses and read blocks for ``points``; cached, as polls repeat the same list."""
        key = (self._learned, tuple((p.address, p.data_type) for p in points))
        cached = self._plans.get(key)
        if cached is None:
            results: list[QualifiedValue | None] = [None] * len(points)
            addrs: list[ModbusAddress] = []
            index_of: list[int] = []
            for i, point in enumerate(points):
                try:
                    addrs.append(self._address(point))
                    index_of.append(i)
                except ConfigError as exc:
                    results[i] = QualifiedValue.bad(Quality.BAD_NOT_FOUND, error=f"{self._where}: {exc}")
            s = self.settings
            plan = plan_reads(
                addrs,
                max_registers=s.max_registers_per_read,
                max_bits=s.max_bits_per_read,
                span_gaps=s.span_gaps,
                no_span_tables=frozenset(self._no_span_tables),
                isolated=frozenset(self._isolated),
            )
            if len(self._plans) >= _PLAN_CACHE_SIZE:
                self._plans.clear()
            cached = self._plans[key] = (addrs, index_of, results, plan)
        addrs, index_of, results, plan = cached
        return addrs, index_of, list(results), list(plan)

    def _read_locked(
        self,
        addrs: list[ModbusAddress],
        index_of: list[int],
        results: list[QualifiedValue | None],
        queue: list[ReadBlock],
    ) -> None:
        word_order = self.settings.word_order
        down: Unreachable | None = None
        while queue:
            block = queue.pop(0)
            if down is not None:
                self._fill(block, addrs, index_of, results, Quality.BAD_NOT_CONNECTED, down.reason)
                continue
            try:
                words = self._read_block(block)
            except Unreachable as exc:
                down = exc
                quality = Quality.ERROR_TIMEOUT_EXPIRED if exc.timeout else Quality.BAD_NOT_CONNECTED
                self._fill(block, addrs, index_of, results, quality, exc.reason)
                continue
            except ExceptionResponse as exc:
                queue[:0] = self._split_after_exception(block, addrs, exc, results, index_of)
                continue
            if len(words) < block.count:
                reason = f"short answer: {len(words)} of {block.count} values"
                self._fill(block, addrs, index_of, results, Quality.BAD_DEVICE_ERROR, reason)
                continue
            now = time.time()
            good = Quality.GOOD
            if block.table in BIT_TABLES:
                for member in block.members:
                    value = bool(words[addrs[member].offset - block.start])
                    results[index_of[member]] = QualifiedValue(value, good, now)
                continue
            raw = registers_to_bytes(words)  # type: ignore[arg-type]
            for member in block.members:
                addr = addrs[member]
                value = decode_at(addr, raw, addr.offset - block.start, word_order)
                results[index_of[member]] = QualifiedValue(value, good, now)

    def _split_after_exception(
        self,
        block: ReadBlock,
        addrs: list[ModbusAddress],
        exc: ExceptionResponse,
        results: list[QualifiedValue | None],
        index_of: list[int],
    ) -> list[ReadBlock]:
        """Blocks to try instead of one that got an exception; bad members get their quality."""
        distinct = {(addrs[m].offset, addrs[m].width) for m in block.members}
        if exc.code == 2 and len(distinct) > 1:
            # some address in the block does not exist: read each tag alone to find which, and
            # stop spanning gaps in this table (the gap may be what the device refused)
            self._no_span_tables.add(block.table)
            self._learned += 1
            singles: dict[tuple[int, int], ReadBlock] = {}
            for member in block.members:
                addr = addrs[member]
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
            addr = addrs[member]
            message = f"{self._where}: read of {addr.text} answered {exception_text(exc.code)}"
            results[index_of[member]] = QualifiedValue.bad(quality, error=message)
        return []

    def _fill(
        self,
        block: ReadBlock,
        addrs: list[ModbusAddress],
        index_of: list[int],
        results: list[QualifiedValue | None],
        quality: Quality,
        reason: str,
    ) -> None:
        for member in block.members:
            message = f"{self._where}: read of {addrs[member].text} failed: {reason}"
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
        """The next request connects at once if the link is down (a write waits for it)."""
        with self._lock:
            self._link.retry_now()

    def write(self, writes: Sequence[tuple[Point, Any]]) -> None:
        """Write each value once; adjacent values share one FC15/FC16 request, order is kept.

        The values are already converted to the points' types (the tag layer's job); they are only
        encoded here. Before the first request the driver still refuses what Modbus cannot carry at
        all: an input register or discrete input (ReadOnlyTag), a value the codec cannot pack
        (TagRangeError). A device refusal is a DeviceError. A
        connection that failed before anything was sent is a CommunicationError; once a request went
        out (its answer lost, or a later block failing after an earlier one was applied) it is
        AnswerLost. Each says which writes went out before it.
        """
        items: list[tuple[ModbusAddress, list[int] | list[bool]]] = []
        for point, value in writes:
            try:
                addr = self._address(point)
            except ConfigError as exc:
                raise ConfigError(f"{self._where}: tag {point.path!r}: {exc}") from exc
            if not addr.writable:
                raise ReadOnlyTag(
                    f"{self._where}: tag {point.path!r} at {addr.text} is {_article(TABLE_NAMES[addr.table])}, "
                    "which Modbus cannot write; nothing was sent"
                )
            try:
                items.append((addr, encode(addr, value, self.settings.word_order)))
            except (struct.error, OverflowError, ValueError, TypeError, ArithmeticError) as exc:
                raise TagRangeError(
                    f"{self._where}: tag {point.path!r}: {value!r} does not fit {addr.text} "
                    f"({addr.data_type.value}); nothing was sent"
                ) from exc
        blocks = plan_writes(items)
        with self._lock:
            for number, block in enumerate(blocks):
                targets = ", ".join(f"{writes[m][0].path} at {items[m][0].text}" for m in block.members)
                done = [writes[m][0].path for b in blocks[:number] for m in b.members]
                already = f"; already written: {', '.join(done)}" if done else ""
                try:
                    self._write_block(block)
                except Unreachable as exc:
                    # sent, or an earlier block of this call was applied: the call's outcome is in doubt
                    error = AnswerLost if exc.sent or done else CommunicationError
                    outcome = "may not have been applied" if exc.sent else "was not sent"
                    raise error(
                        f"{self._where}: write of {targets} {outcome}: {exc.reason}{already}"
                    ) from exc
                except ExceptionResponse as exc:
                    raise DeviceError(
                        f"{self._where} refused the write of {targets}: {exc}{already}"
                    ) from exc

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

    # ---- connection ----------------------------------------------------------------------

    def _address(self, point: Point) -> ModbusAddress:
        key = (point.address, point.data_type)
        addr = self._addresses.get(key)
        if addr is None:
            addr = parse_modbus_address(point.address, point.data_type, zero_based=self.settings.zero_based)
            self._addresses[key] = addr
        return addr

    def close(self) -> None:
        """Close the connection; later calls fail (reads Bad_NotConnected, writes CommunicationError)."""
        with self._lock:
            self._link.close()


def _article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun
