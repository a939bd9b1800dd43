"""pymodbus's own servers in a child process: Modbus TCP, RTU framing over TCP, RTU on a serial port.

The devices under test for the RTU work (issue 30), kept small and reusable (bench/tags.py uses them
too). A :class:`ServerProcess` runs one pymodbus server (``ModbusTcpServer`` with the socket or the
RTU framer, or ``ModbusSerialServer`` on one end of a :class:`SocatPair`) serving several unit ids,
each with 200 holding and input registers and 100 coils and discrete inputs, all 0 unless given.
In its own process it can be killed like a powered-off device and started again (with its initial
memory: a restarted device has lost what it was not given again).

The parent talks to it over a pipe: server-side reads and writes of registers, the requests received
(unit, function code, address, count, values: to count writes), a unit without mask write (it
answers function 22 with ILLEGAL FUNCTION, as such devices do), and answers dropped on purpose (the
write is applied, the client never hears back: a write in doubt), and a stall (one reply comes late and
the ones after it queue behind it: a reply that outlives its request's timeout).
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import os
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from simulators.servers.pty_pair import PtyPair as SocatPair  # re-exported: the RTU tests and bench use it

__all__ = ["Received", "ServerProcess", "SocatPair", "Unit"]

REGISTERS = 200
BITS = 100
WRITE_CODES = frozenset({5, 6, 15, 16, 22})


@dataclass(frozen=True)
class Unit:
    """One device on the server: its unit id, initial holding registers by offset, FC22 or not, and
    whether it is silent (it gets every request and answers none, like a drive that is powered off
    while the others on its line are not)."""

    unit_id: int
    holding: dict[int, int] = field(default_factory=dict)
    mask_write: bool = True
    silent: bool = False


@dataclass(frozen=True)
class Received:
    """One request as the server received it."""

    unit_id: int
    function_code: int
    address: int
    count: int
    values: tuple[Any, ...] | None
    at: float  # time.monotonic() in the server process (CLOCK_MONOTONIC: comparable across processes)


# ---- the child ---------------------------------------------------------------------------------


class _Child:
    def __init__(self, transport: str, units: list[Unit], where: dict[str, Any]) -> None:
        self.transport = transport
        self.units = {unit.unit_id: unit for unit in units}
        self.where = where
        self.received: list[Received] = []
        self.drop_write_answers = 0
        self._drop_next = False
        self.stall_address: int | None = None  # the next request at this address stalls the device
        self.stall_s = 0.0
        self._stall_next_s = 0.0
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = self.call(self._serve())

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=10)

    async def _serve(self) -> Any:
        from pymodbus import FramerType
        from pymodbus.server import ModbusSerialServer, ModbusTcpServer
        from pymodbus.simulator import DataType, SimData, SimDevice

        devices = []
        for unit in self.units.values():
            holding = [unit.holding.get(i, 0) for i in range(REGISTERS)]
            tables = (
                [SimData(0, values=[False] * BITS, datatype=DataType.BITS)],
                [SimData(0, values=[False] * BITS, datatype=DataType.BITS)],
                [SimData(0, values=holding, datatype=DataType.REGISTERS)],
                [SimData(0, values=[0] * REGISTERS, datatype=DataType.REGISTERS)],
            )
            action = functools.partial(self._action, unit.unit_id)
            devices.append(SimDevice(id=unit.unit_id, simdata=tables, action=action))  # type: ignore[arg-type]
        if self.transport == "serial":
            server: Any = ModbusSerialServer(devices, port=self.where["serial_port"], framer=FramerType.RTU,
                                             baudrate=self.where.get("baudrate", 19200), trace_pdu=self._trace_pdu,
                                             trace_packet=self._trace_packet, ignore_missing_devices=True)
        else:
            framer = FramerType.RTU if self.transport == "rtu-over-tcp" else FramerType.SOCKET
            server = ModbusTcpServer(devices, address=("127.0.0.1", self.where.get("port", 0)), framer=framer,
                                     trace_pdu=self._trace_pdu, trace_packet=self._trace_packet,
                                     ignore_missing_devices=True)
        await server.serve_forever(background=True)
        if self.transport != "serial":
            self.where["port"] = server.transport.sockets[0].getsockname()[1]
        return server

    async def _action(self, unit_id: int, function_code: int, start: int, address: int, count: int,
                      registers: list[int], values: Any) -> Any:
        from pymodbus.constants import ExcCodes

        if function_code == 22 and not self.units[unit_id].mask_write:
            return ExcCodes.ILLEGAL_FUNCTION  # as a device without mask write answers
        return None

    def _trace_pdu(self, sending: bool, pdu: Any) -> Any:
        if sending:
            if self.units[pdu.dev_id].silent:
                self._drop_next = True
            elif pdu.function_code in WRITE_CODES and self.drop_write_answers > 0:
                self.drop_write_answers -= 1
                self._drop_next = True
            return pdu
        values = getattr(pdu, "registers", None) or getattr(pdu, "bits", None)
        if pdu.function_code == 22:
            values = [pdu.and_mask, pdu.or_mask]
        if pdu.function_code in (5, 6):
            values = (getattr(pdu, "registers", None) or getattr(pdu, "bits", None))[:1]
        count = getattr(pdu, "count", 1) if pdu.function_code not in (5, 6, 22) else 1
        if self.stall_address is not None and pdu.address == self.stall_address:
            self.stall_address, self._stall_next_s = None, self.stall_s
        self.received.append(Received(pdu.dev_id, pdu.function_code, pdu.address, count,
                                      tuple(values) if values and pdu.function_code in WRITE_CODES else None,
                                      time.monotonic()))
        return pdu

    def _trace_packet(self, sending: bool, data: bytes) -> bytes:
        if sending and self._drop_next:
            self._drop_next = False
            return b""  # applied, never answered
        if sending and self._stall_next_s > 0:
            # the device hangs before it answers: its loop is blocked, requests that come meanwhile
            # wait in the line's buffer and are answered after this one, in order
            stall_s, self._stall_next_s = self._stall_next_s, 0.0
            time.sleep(stall_s)
        return data

    def handle(self, op: str, args: tuple[Any, ...]) -> Any:
        if op == "get":
            unit, offset, count = args
            return list(self.call(self.server.async_getValues(unit, 3, offset, count)))
        if op == "set":
            unit, offset, values = args
            return self.call(self.server.async_setValues(unit, 16, offset, list(values)))
        if op == "received":
            return list(self.received)
        if op == "clear":
            self.received.clear()
            return None
        if op == "drop_write_answers":
            self.drop_write_answers = int(args[0])
            return None
        if op == "stall":
            self.stall_address, self.stall_s = int(args[0]), float(args[1])
            return None
        raise ValueError(f"unknown op {op!r}")


def _child_main(transport: str, units: list[Unit], where: dict[str, Any], conn: Connection) -> None:
    import logging

    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)  # a killed peer is not news here
    try:
        child = _Child(transport, units, where)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ok", child.where))
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            os._exit(0)
        try:
            conn.send(("ok", child.handle(op, args)))
        except Exception as exc:  # noqa: BLE001
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class ServerProcess:
    """A pymodbus server in a child process (module doc). ``port`` is set for the TCP transports."""

    def __init__(self, transport: str, units: list[Unit], *, serial_port: str | None = None, baudrate: int = 19200,
                 port: int = 0) -> None:
        self.transport = transport
        self.units = units
        self.where: dict[str, Any] = {"port": port, "serial_port": serial_port, "baudrate": baudrate}
        self._proc: Any = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.where["port"])

    def start(self) -> ServerProcess:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._proc = context.Process(target=_child_main, args=(self.transport, self.units, dict(self.where), child),
                                     daemon=True)
        self._proc.start()
        child.close()
        if not self._conn.poll(60):
            self.stop()
            raise RuntimeError("the modbus server process did not start within 60 s")
        status, result = self._conn.recv()
        if status != "ok":
            self.stop()
            raise RuntimeError(f"the modbus server process failed: {result}")
        self.where = result  # the port it took, kept for a restart on the same one
        return self

    def stop(self) -> None:
        """Kill the process, as a power cut would (no goodbye on the wire)."""
        proc, self._proc = self._proc, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if proc is not None:
            proc.kill()
            proc.join(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def call(self, op: str, *args: Any) -> Any:
        with self._lock:
            assert self._conn is not None, "the server process is not running"
            self._conn.send((op, args))
            status, result = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"modbus server process: {op}: {result}")
        return result

    def holding(self, unit_id: int, offset: int, count: int = 1) -> list[int]:
        """Holding registers as the device holds them (protocol offsets)."""
        return list(self.call("get", unit_id, offset, count))

    def set_holding(self, unit_id: int, offset: int, values: list[int]) -> None:
        self.call("set", unit_id, offset, values)

    def received(self) -> list[Received]:
        return list(self.call("received"))

    def writes(self) -> list[Received]:
        return [r for r in self.received() if r.function_code in WRITE_CODES]

    def clear(self) -> None:
        self.call("clear")

    def drop_write_answers(self, count: int) -> None:
        """Apply the next ``count`` writes but send no answer to them."""
        self.call("drop_write_answers", count)

    def stall(self, address: int, seconds: float) -> None:
        """The next request at protocol ``address`` (any unit) is answered ``seconds`` late, and the
        device does nothing else meanwhile: later requests are answered after it, in order, as a
        device (or a line) that hangs and then catches up."""
        self.call("stall", address, seconds)
