"""A Modbus simulator: pymodbus's own server, built from SimPoints addressed like the config.

Three transports, as devices have them (``transport``): ``"tcp"`` (Modbus TCP), ``"rtu-over-tcp"``
(RTU frames on a TCP socket, as a serial-to-Ethernet gateway passes them) and ``"serial"`` (RTU on a
serial line: the server opens one end of its own :class:`~simulators.servers.pty_pair.PtyPair`, made
in ``pty_folder`` or a temporary folder, and clients open :attr:`ModbusSimServer.serial_port`). On
RTU, requests for other unit ids get no answer at all, as on a shared line. :meth:`client_settings`
gives the device keys of an Exchange config that reach the server.

Each table (coils, discrete inputs, holding and input registers) is one contiguous memory from the
lowest to the highest point address, as in a PLC: addresses between points read as 0, addresses
outside answer exception 2 (illegal data address). A bit of a register (``HR10.3``) is that bit of
the register's memory: setting it server-side changes that bit only, and a client's mask write
(function 22) changes the bits it masks. A client may change a register's bits that a writable
point covers (a writable word: all of them; else the writable bits' own), and a write that changes
any other bit of a point's register is refused, as is any write to a register only read-only
points cover. The server counts every request it receives,
by function code and address range, so tests can prove coalesced reads and exactly-once writes.
It runs its own asyncio loop in a background thread; ``stop``/``start`` keep the memory.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pymodbus import FramerType
from pymodbus.constants import ExcCodes
from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType as SimType
from pymodbus.simulator import SimData, SimDevice

from exchange._drivers.modbus.address import (
    BIT_TABLES,
    COIL,
    DISCRETE_INPUT,
    HOLDING_REGISTER,
    INPUT_REGISTER,
    ModbusAddress,
    decode,
    encode,
    parse_modbus_address,
)
from simulators.servers.base import SimPoint
from simulators.servers.pty_pair import PtyPair

log = logging.getLogger(__name__)
T = TypeVar("T")

READ_CODES = {1: COIL, 2: DISCRETE_INPUT, 3: HOLDING_REGISTER, 4: INPUT_REGISTER}
WRITE_CODES = {5: COIL, 15: COIL, 6: HOLDING_REGISTER, 16: HOLDING_REGISTER, 22: HOLDING_REGISTER}
_SET_CODE = {COIL: 15, DISCRETE_INPUT: 2, HOLDING_REGISTER: 16, INPUT_REGISTER: 4}
_GET_CODE = {COIL: 1, DISCRETE_INPUT: 2, HOLDING_REGISTER: 3, INPUT_REGISTER: 4}
_TABLES = (COIL, DISCRETE_INPUT, HOLDING_REGISTER, INPUT_REGISTER)
TRANSPORTS = ("tcp", "rtu-over-tcp", "serial")


@dataclass(frozen=True)
class Request:
    """One request as the server received it: function code, table, first address, width."""

    function_code: int
    table: str
    start: int
    count: int

    @property
    def is_write(self) -> bool:
        return self.function_code in WRITE_CODES

    def touches(self, addr: ModbusAddress) -> bool:
        return self.table == addr.table and self.start < addr.end and addr.offset < self.start + self.count


class ModbusSimServer:
    """A :class:`~simulators.servers.base.SimServer` speaking Modbus on ``host:port`` or a serial line.

    On ``"serial"`` there is no port (it stays 0): :meth:`stop` closes the server's end of the line
    (clients time out, as with a drive powered off), :meth:`close` also unlinks the pty pair.
    """

    def __init__(
        self,
        points: Sequence[SimPoint],
        host: str = "127.0.0.1",
        port: int = 0,
        unit_id: int = 1,
        zero_based: bool = False,
        word_order: str = "big",
        transport: str = "tcp",
        baudrate: int = 19200,
        pty_folder: Path | None = None,
    ) -> None:
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown modbus transport {transport!r}: expected one of {', '.join(TRANSPORTS)}")
        self.host = host
        self.port = port
        self.transport = transport
        self.baudrate = baudrate
        self._pty_folder = pty_folder
        self._own_folder: Path | None = None
        self._pair: PtyPair | None = None
        self.unit_id = unit_id
        self.zero_based = zero_based
        self.word_order = word_order
        self._points: dict[str, tuple[SimPoint, ModbusAddress]] = {}
        for point in points:
            addr = parse_modbus_address(point.address, point.data_type, zero_based=zero_based)
            self._points[addr.text.upper()] = (point, addr)
        self._memory = self._initial_memory()
        self._access = self._register_access()
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._exceptions: dict[str, int] = {}  # address -> exception code answered to clients
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: ModbusTcpServer | ModbusSerialServer | None = None
        self._server_side = False  # set while the server itself writes (not a client request)

    # ---- memory ------------------------------------------------------------------------------

    def _initial_memory(self) -> dict[str, tuple[int, list[Any]]]:
        """Per table: (first address, values) covering every point, gaps filled with 0/False."""
        memory: dict[str, tuple[int, list[Any]]] = {}
        for table in _TABLES:
            addrs = [(p, a) for p, a in self._points.values() if a.table == table]
            if not addrs:
                continue
            low = min(a.offset for _, a in addrs)
            high = max(a.end for _, a in addrs)
            values: list[Any] = [False if table in BIT_TABLES else 0] * (high - low)
            for point, addr in sorted(addrs, key=lambda item: item[1].bit is not None):  # words, then bits
                if addr.bit is not None:
                    values[addr.offset - low] = _with_bit(values[addr.offset - low], addr.bit, point.initial)
                    continue
                words = encode(addr, point.initial, self.word_order)
                values[addr.offset - low : addr.end - low] = words
            memory[table] = (low, values)
        return memory

    def _register_access(self) -> dict[tuple[str, int], tuple[int, int]]:
        """Per register of a point: (the bits points cover, the bits writable points cover)."""
        access: dict[tuple[str, int], tuple[int, int]] = {}
        for point, addr in self._points.values():
            if addr.table in BIT_TABLES:
                continue
            mask = 0xFFFF if addr.bit is None else 1 << addr.bit
            for offset in range(addr.offset, addr.end):
                covered, writable = access.get((addr.table, offset), (0, 0))
                access[(addr.table, offset)] = (covered | mask, writable | (mask if point.writable else 0))
        return access

    def _simdata(self, table: str) -> list[SimData]:
        if table not in self._memory:
            # pymodbus needs every table; an unused one gets a block far from real addresses
            if table in BIT_TABLES:
                return [SimData(65520, values=[False] * 16, datatype=SimType.BITS)]
            return [SimData(65535, datatype=SimType.INVALID)]
        low, values = self._memory[table]
        if table in BIT_TABLES:
            return [SimData(low, values=[bool(v) for v in values], datatype=SimType.BITS)]
        return [SimData(low, values=[int(v) for v in values], datatype=SimType.REGISTERS)]

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start serving (on ``port``, or a free port when it is 0; ``port`` then holds it)."""
        if self._server is not None:
            return
        if self.transport == "serial" and self._pair is None:
            if self._pty_folder is None:
                self._own_folder = Path(tempfile.mkdtemp(prefix="exchange-rtu-"))
            self._pair = PtyPair(self._pty_folder or self._own_folder or Path("."), "ttyModbus").start()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name=f"modbus-sim-{self.port}", daemon=True)
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            self._server = self._call(self._serve())
        except BaseException:
            self._stop_loop()
            raise
        if self.transport == "serial":
            log.debug("modbus RTU simulator serving on %s (clients: %s)", self._pair_end("server"), self.serial_port)
            return
        sockets = self._server.transport.sockets  # type: ignore[attr-defined]
        self.port = int(sockets[0].getsockname()[1])
        log.debug("modbus %s simulator serving on %s:%s", self.transport, self.host, self.port)

    @property
    def serial_port(self) -> str | None:
        """The pty clients open on ``"serial"`` (None on the TCP transports)."""
        return self._pair.client if self.transport == "serial" and self._pair is not None else None

    def _pair_end(self, end: str) -> str:
        assert self._pair is not None, "the pty pair is made by start()"
        return self._pair.client if end == "client" else self._pair.server

    def client_settings(self) -> dict[str, Any]:
        """The keys of an Exchange ``[devices.X]`` table (driver modbus) that reach this server."""
        if self.transport == "serial":
            return {"transport": "serial", "serial_port": self.serial_port, "baudrate": self.baudrate}
        settings: dict[str, Any] = {"host": self.host, "port": self.port}
        if self.transport != "tcp":
            settings["transport"] = self.transport
        return settings

    async def _serve(self) -> ModbusTcpServer | ModbusSerialServer:
        device = SimDevice(
            id=self.unit_id,
            simdata=tuple(self._simdata(t) for t in _TABLES),  # type: ignore[arg-type]
            action=self._action,
        )
        server: ModbusTcpServer | ModbusSerialServer
        if self.transport == "serial":
            # no answer to other unit ids: the devices on a shared line each answer their own
            server = ModbusSerialServer(device, port=self._pair_end("server"), framer=FramerType.RTU,
                                        baudrate=self.baudrate, trace_pdu=self._trace, ignore_missing_devices=True)
        else:
            rtu = self.transport == "rtu-over-tcp"
            server = ModbusTcpServer(device, address=(self.host, self.port), trace_pdu=self._trace,
                                     framer=FramerType.RTU if rtu else FramerType.SOCKET, ignore_missing_devices=rtu)
        await server.serve_forever(background=True)
        return server

    def stop(self) -> None:
        """Stop serving and drop every connection; the memory is kept for the next ``start``."""
        if self._server is None:
            return
        server = self._server
        self._memory = self._call(self._snapshot())
        self._call(server.shutdown())  # type: ignore[no-untyped-call]
        self._server = None
        self._stop_loop()

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """:meth:`stop`, and on ``"serial"`` unlink the pty pair and remove its temporary folder."""
        self.stop()
        pair, self._pair = self._pair, None
        if pair is not None:
            pair.stop()
        folder, self._own_folder = self._own_folder, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        if loop is not None:
            loop.close()

    def drop_connections(self) -> None:
        """Close every client connection; the server keeps listening. A serial line has none to drop."""
        if self.transport == "serial":
            return

        async def drop() -> None:
            assert self._server is not None
            for connection in list(self._server.active_connections.values()):
                connection.close()

        self._call(drop())

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("the modbus simulator is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10)

    # ---- values ------------------------------------------------------------------------------

    def _lookup(self, address: str) -> ModbusAddress:
        known = self._points.get(address.strip().upper())
        if known is not None:
            return known[1]
        return parse_modbus_address(address, None, zero_based=self.zero_based)

    def get(self, address: str) -> Any:
        """The value at ``address`` (a point's address, or any address of the same syntax)."""
        addr = self._lookup(address)
        if self._server is None:
            low, values = self._memory[addr.table]
            return decode(addr, values[addr.offset - low : addr.end - low], self.word_order)
        words = self._call(self._get_words(addr))
        return decode(addr, words, self.word_order)

    def set(self, address: str, value: Any) -> None:
        """Change the value server-side, as the PLC program would (not counted as a write); a bit of
        a register changes that bit only."""
        addr = self._lookup(address)
        if self._server is None:
            low, values = self._memory[addr.table]
            if addr.bit is not None:
                values[addr.offset - low] = _with_bit(values[addr.offset - low], addr.bit, value)
                return
            values[addr.offset - low : addr.end - low] = encode(addr, value, self.word_order)
            return
        self._call(self._set_value(addr, value))

    def get_many(self, addresses: Sequence[str]) -> dict[str, Any]:
        """Several values in one call into the server's loop (a ticking plant reads them all)."""
        parsed = {address: self._lookup(address) for address in addresses}
        if self._server is None:
            return {address: self.get(address) for address in addresses}

        async def read() -> dict[str, Any]:
            return {address: decode(addr, await self._get_words(addr), self.word_order)
                    for address, addr in parsed.items()}

        return self._call(read())

    def set_many(self, values: Mapping[str, Any]) -> None:
        """Change several values server-side in one call into the server's loop."""
        parsed = [(self._lookup(address), value) for address, value in values.items()]
        for addr, value in parsed:  # what cannot be encoded fails before anything changes
            if addr.bit is None:
                encode(addr, value, self.word_order)
        if self._server is None:
            for address, value in values.items():
                self.set(address, value)
            return

        async def write() -> None:
            for addr, value in parsed:
                await self._set_value(addr, value)

        self._call(write())

    def values(self) -> dict[str, Any]:
        """Every point's current value, by address as given in the points."""
        return {point.address: self.get(point.address) for point, _ in self._points.values()}

    async def _get_words(self, addr: ModbusAddress) -> list[Any]:
        assert self._server is not None
        self._server_side = True  # not a client's request: no injected exception, not counted
        try:
            words = await self._server.async_getValues(self.unit_id, _GET_CODE[addr.table], addr.offset, addr.width)
        finally:
            self._server_side = False
        return list(words)

    async def _set_words(self, addr: ModbusAddress, words: list[int] | list[bool]) -> None:
        assert self._server is not None
        self._server_side = True
        try:
            await self._server.async_setValues(self.unit_id, _SET_CODE[addr.table], addr.offset, words)
        finally:
            self._server_side = False

    async def _set_value(self, addr: ModbusAddress, value: Any) -> None:
        """Set one value in the server's loop; a bit of a register as that bit of the register's word.
        The loop runs one coroutine at a time and these awaits do not yield, so no client request
        comes between the read and the write of the word."""
        if addr.bit is None:
            await self._set_words(addr, encode(addr, value, self.word_order))
            return
        (word,) = await self._get_words(addr)
        await self._set_words(addr, [_with_bit(word, addr.bit, value)])

    async def _snapshot(self) -> dict[str, tuple[int, list[Any]]]:
        assert self._server is not None
        memory: dict[str, tuple[int, list[Any]]] = {}
        self._server_side = True
        try:
            for table, (low, values) in self._memory.items():
                current = await self._server.async_getValues(self.unit_id, _GET_CODE[table], low, len(values))
                memory[table] = (low, list(current))
        finally:
            self._server_side = False
        return memory

    # ---- faults and counters -----------------------------------------------------------------

    def inject_exception(self, address: str, code: int | None) -> None:
        """Answer client requests touching ``address`` with exception ``code`` (None: stop)."""
        key = self._lookup(address).text.upper()
        with self._lock:
            if code is None:
                self._exceptions.pop(key, None)
            else:
                self._exceptions[key] = code

    def set_bad(self, address: str) -> None:
        """A failed sensor: requests touching ``address`` get exception 4 (server device failure),
        which clients read as a Bad quality; the server-side value goes on. Undone by :meth:`set_good`.
        Modbus has no quality per value: a block read that covers the address fails as a whole."""
        self.inject_exception(address, 4)

    def set_good(self, address: str) -> None:
        self.inject_exception(address, None)

    def requests(self) -> list[Request]:
        """Every request received since start (or the last ``reset_counts``), in order."""
        with self._lock:
            return list(self._requests)

    def reset_counts(self) -> None:
        with self._lock:
            self._requests.clear()

    def write_count(self, address: str | None = None) -> int:
        """Client write requests received (FC5/6/15/16), for one address or all."""
        return self._count(address, writes=True)

    def read_count(self, address: str | None = None) -> int:
        """Client read requests received (FC1-4), for one address or all."""
        return self._count(address, writes=False)

    def _count(self, address: str | None, *, writes: bool) -> int:
        addr = None if address is None else self._lookup(address)
        with self._lock:
            return sum(
                1 for r in self._requests if r.is_write == writes and (addr is None or r.touches(addr))
            )

    def _trace(self, sending: bool, pdu: Any) -> Any:
        """pymodbus calls this for every PDU received (sending False) and sent."""
        if sending:
            return pdu
        code = int(pdu.function_code)
        table = READ_CODES.get(code) or WRITE_CODES.get(code)
        if table is not None:
            if code in (5, 6, 22):
                count = 1
            elif code == 15:
                count = len(pdu.bits)
            elif code == 16:
                count = len(pdu.registers)
            else:
                count = int(pdu.count)
            with self._lock:
                self._requests.append(Request(code, table, int(pdu.address), count))
        return pdu

    async def _action(
        self,
        function_code: int,
        _start: int,
        address: int,
        count: int,
        _registers: list[int],
        set_values: list[int] | list[bool] | None,
    ) -> ExcCodes | None:
        """pymodbus asks this before each access: refuse writes to read-only points (see the module
        doc for the bits of a register), inject exceptions."""
        if self._server_side:
            return None
        table = READ_CODES.get(function_code) or WRITE_CODES.get(function_code)
        if table is None:
            return None
        if set_values is not None:
            width = len(set_values)
        elif table in BIT_TABLES:
            # pymodbus passes the number of 16-bit words here; cover the bits up to their end
            width = count * 16 - address % 16
        else:
            width = count
        request = Request(function_code, table, address, width)
        with self._lock:
            injected = dict(self._exceptions)
        for key, (point, addr) in self._points.items():
            if not request.touches(addr):
                continue
            if key in injected:
                return ExcCodes(injected[key])
            if set_values is not None and table in BIT_TABLES and not point.writable:
                return ExcCodes.ILLEGAL_ADDRESS
        if set_values is not None and table not in BIT_TABLES:
            for index, new in enumerate(set_values):
                covered, writable = self._access.get((table, address + index), (0, 0))
                old = int(_registers[address + index - _start])
                if covered & ~writable and (not writable or (int(new) ^ old) & covered & ~writable):
                    return ExcCodes.ILLEGAL_ADDRESS
        return None


def _with_bit(word: int, bit: int, value: Any) -> int:
    """The 16-bit register ``word`` with bit ``bit`` set to ``value``."""
    return (int(word) | (1 << bit)) if value else (int(word) & ~(1 << bit) & 0xFFFF)
