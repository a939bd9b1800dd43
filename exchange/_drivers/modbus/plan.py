"""Request planning for Modbus: many tags into the fewest block reads, writes into contiguous blocks.

Reading 100 registers costs about what reading one does (PROTOCOL-NOTES), so reads of addresses
that fit in one request are merged. Writes are merged only where the values are strictly adjacent,
so every register written is one that a caller asked to write, exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from exchange._drivers.modbus.address import BIT_TABLES, ModbusAddress

# protocol limits: FC3/FC4 read 125 registers, FC1/FC2 2000 bits, FC16 writes 123, FC15 1968
MAX_READ_REGISTERS = 125
MAX_READ_BITS = 2000
MAX_WRITE_REGISTERS = 123
MAX_WRITE_BITS = 1968


@dataclass
class ReadBlock:
    """One read request: ``count`` registers/bits of ``table`` from ``start``, serving ``members``."""

    table: str
    start: int
    count: int
    members: list[int] = field(default_factory=list)  # indices into the planned address list

    @property
    def end(self) -> int:
        return self.start + self.count


@dataclass
class WriteBlock:
    """One write request: ``values`` (registers or bits) of ``table`` from ``start``."""

    table: str
    start: int
    values: list[int] | list[bool]
    members: list[int] = field(default_factory=list)


def plan_reads(
    addresses: Sequence[ModbusAddress],
    *,
    max_registers: int = MAX_READ_REGISTERS,
    max_bits: int = MAX_READ_BITS,
    span_gaps: bool = True,
    no_span_tables: frozenset[str] = frozenset(),
    isolated: frozenset[tuple[str, int]] = frozenset(),
) -> list[ReadBlock]:
    """Group ``addresses`` into read blocks per table, each within the request limit.

    With ``span_gaps`` a block also covers unrequested addresses between two tags (one request
    instead of two); without it (or for a table in ``no_span_tables``) only touching or overlapping
    values share a block. Addresses in
    ``isolated`` (known to fail inside a block) always get a request of their own.
    """
    blocks: list[ReadBlock] = []
    by_table: dict[str, list[int]] = {}
    for index, addr in enumerate(addresses):
        by_table.setdefault(addr.table, []).append(index)
    for table, indices in by_table.items():
        limit = max_bits if table in BIT_TABLES else max_registers
        span = span_gaps and table not in no_span_tables
        indices.sort(key=lambda i: (addresses[i].offset, addresses[i].width))
        current: ReadBlock | None = None
        for index in indices:
            addr = addresses[index]
            if (table, addr.offset) in isolated:
                blocks.append(ReadBlock(table, addr.offset, addr.width, [index]))
                continue
            if current is not None:
                new_end = max(current.end, addr.end)
                touches = addr.offset <= current.end
                if new_end - current.start <= limit and (span or touches):
                    current.count = new_end - current.start
                    current.members.append(index)
                    continue
            current = ReadBlock(table, addr.offset, addr.width, [index])
            blocks.append(current)
    return blocks


def plan_writes(
    items: Sequence[tuple[ModbusAddress, list[int] | list[bool]]],
    *,
    max_registers: int = MAX_WRITE_REGISTERS,
    max_bits: int = MAX_WRITE_BITS,
) -> list[WriteBlock]:
    """Merge each write into the previous request when it continues it directly (same table).

    The caller's order is kept on the wire (a setpoint written before the start command stays
    before it), and no register is written twice: only strictly adjacent values are merged.
    """
    blocks: list[WriteBlock] = []
    for index, (addr, values) in enumerate(items):
        limit = max_bits if addr.is_bit else max_registers
        last = blocks[-1] if blocks else None
        if (
            last is not None
            and last.table == addr.table
            and last.start + len(last.values) == addr.offset
            and len(last.values) + len(values) <= limit
        ):
            last.values = [*last.values, *values]
            last.members.append(index)
        else:
            blocks.append(WriteBlock(addr.table, addr.offset, list(values), [index]))
    return blocks
