"""A PLC serving phases over Modbus TCP: a real pymodbus server on a free port of 127.0.0.1.

Built on pymodbus directly (not on ``simulators/``). Unit id 1, holding registers only. Exchange's
addresses count from 1 (``HR1`` is protocol address 0); the layout, per phase ``i`` (0 to 3, in the
order given) with ``b = 20 * i``:

=========================  ==================  =====================================
protocol address           Exchange address    what
=========================  ==================  =====================================
``b``                      ``HR{b+1}``         Command (Int16)
``b + 1``                  ``HR{b+2}``         State (Int16)
``b + 2``                  ``HR{b+3}``         Owner (Int16)
``b + 4 + 2j`` (j < 4)     ``HRF{b+5+2j}``     parameter j (Float32, big-endian words)
``b + 12 + 2j`` (j < 4)    ``HRF{b+13+2j}``    report j (Float32)
``99``                     ``HR100``           the watchdog's heartbeat (Int16)
=========================  ==================  =====================================

Every client write is seen as it arrives (the device's ``action`` hook, before the registers take
it), so two writes of the same command number are two commands. The logic steps every ``scan_ms``
on the server's loop and writes back what changed (reports first, the command's 0
before the state, as a PLC that takes and clears the command at the top of its scan).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import Sequence

from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType as SimType
from pymodbus.simulator import SimData, SimDevice

from exchange._drivers.opcua.loop import LoopThread
from tests.phaseplc.logic import PhaseLogic
from tests.phaseplc.plant import PLANT_DEVICE, phase_toml

log = logging.getLogger(__name__)

UNIT_ID = 1
PHASE_SPAN = 20
HEARTBEAT_ADDRESS = 99
MAX_PHASES = 4
MAX_VALUES = 4  # params, and reports, per phase
_PUBLISH_ORDER = ("report:", "param:", "owner", "heartbeat", "command", "state")


def register_of(index: int, phase: PhaseLogic, key: str) -> int:
    """The protocol address (from 0) of ``key`` of the ``index``-th phase."""
    base = PHASE_SPAN * index
    if key == "heartbeat":
        return HEARTBEAT_ADDRESS
    if key in ("command", "state", "owner"):
        return base + ("command", "state", "owner").index(key)
    kind, _, name = key.partition(":")
    names = list(phase.param_names if kind == "param" else phase.report_sources)
    return base + (4 if kind == "param" else 12) + 2 * names.index(name)


def _width(key: str) -> int:
    return 2 if ":" in key else 1


def _encode(key: str, value: float) -> list[int]:
    if ":" in key:
        high, low = struct.unpack(">HH", struct.pack(">f", value))
        return [high, low]
    return [int(value) & 0xFFFF]


def _decode(key: str, registers: Sequence[int]) -> float:
    if ":" in key:
        return float(struct.unpack(">f", struct.pack(">HH", registers[0], registers[1]))[0])
    return registers[0] - 0x10000 if registers[0] >= 0x8000 else registers[0]


class ModbusPhasePlc:
    """:meth:`start`, then :attr:`port`; :meth:`phase`, :meth:`reset`, :meth:`stop` and
    :meth:`config_toml` as :class:`~tests.phaseplc.opcua_phase.OpcUaPhasePlc` has them."""

    def __init__(self, phases: Sequence[PhaseLogic], *, scan_ms: float = 2.0) -> None:
        if not 1 <= len(phases) <= MAX_PHASES or len({p.name for p in phases}) != len(phases):
            raise ValueError(f"ModbusPhasePlc serves 1 to {MAX_PHASES} phases of distinct names")
        for phase in phases:
            if len(phase.param_names) > MAX_VALUES or len(phase.report_sources) > MAX_VALUES:
                raise ValueError(f"phase {phase.name!r}: at most {MAX_VALUES} params and {MAX_VALUES} reports")
        self.phases = {p.name: p for p in phases}
        self.scan_ms = scan_ms
        self.port = 0
        self.scans = 0
        # key of each register range: (phase, key, first address)
        self._slots = [(phase, key, register_of(i, phase, key))
                       for i, phase in enumerate(phases) for key in phase.values()]
        self._shown: dict[int, float] = {}
        self._own_write = False
        self._thread: LoopThread | None = None
        self._server: ModbusTcpServer | None = None
        self._task: asyncio.Task[None] | None = None

    def phase(self, name: str = "R1/Charge") -> PhaseLogic:
        return self.phases[name]

    def start(self) -> ModbusPhasePlc:
        self._thread = LoopThread("phaseplc-modbus")
        try:
            self._thread.run(self._build(), 10.0)
        except BaseException:
            self._thread.stop()
            self._thread = None
            raise
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            thread.run(self._shutdown(), 10.0)
        finally:
            thread.stop()

    def reset(self) -> None:
        """Every phase Idle with its tags at 0 and its counters empty, published before this returns."""
        assert self._thread is not None, "the server is not started"
        self._thread.run(self._reset(), 10.0)

    def config_toml(self, *, device: str = PLANT_DEVICE, owner_id: int = 1, watchdog_period_ms: int | None = None,
                    start_timeout_s: float = 5.0, command_timeout_s: float = 5.0) -> str:
        """The ``[devices]``, ``[tags]``, ``[phases]`` (and ``[watchdog]``) text of this PLC."""
        device_toml = (f'[devices.{device}]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = {self.port}\n'
                       f"unit_id = {UNIT_ID}\ntimeout_ms = 1000\nreconnect_min_ms = 20\nreconnect_max_ms = 200\n")
        index = {name: i for i, name in enumerate(self.phases)}

        def address(phase: str, key: str) -> str:
            first = register_of(index[phase], self.phases[phase], key) + 1
            return f"HRF{first}" if ":" in key else f"HR{first}"

        return phase_toml(self.phases.values(), device, device_toml, address, owner_id=owner_id,
                          watchdog_period_ms=watchdog_period_ms, start_timeout_s=start_timeout_s,
                          command_timeout_s=command_timeout_s)

    # --- on the server's loop --------------------------------------------------------------

    async def _build(self) -> None:
        device = SimDevice(id=UNIT_ID, action=self._on_access,
                           simdata=[SimData(0, count=HEARTBEAT_ADDRESS + 1, values=0, datatype=SimType.REGISTERS)])
        server = ModbusTcpServer(device, address=("127.0.0.1", 0))
        await server.serve_forever(background=True)
        listener = server.transport
        assert isinstance(listener, asyncio.Server), listener
        self.port = next(s.getsockname()[1] for s in listener.sockets if s.family == socket.AF_INET)
        self._server = server
        await self._publish()
        self._task = asyncio.get_running_loop().create_task(self._scan_forever())

    async def _shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self._server is not None:
            await self._server.shutdown()
            self._server = None

    async def _on_access(self, function_code: int, start_address: int, address: int, count: int,
                         registers: list[int], set_values: list[int] | list[bool] | None) -> None:
        """Every request; a client's write is handed to the logic before the registers take it."""
        if set_values is None or self._own_write:
            return None
        after = list(registers)
        for i, value in enumerate(set_values):
            after[address - start_address + i] = int(value)
        for phase, key, first in self._slots:
            if first < address + count and address < first + _width(key):
                value = _decode(key, after[first - start_address:first - start_address + _width(key)])
                phase.written(key, value)
                self._shown[first] = value
        return None

    async def _scan_forever(self) -> None:
        while True:
            try:
                for phase in self.phases.values():
                    phase.step(time.monotonic())
                await self._publish()
                self.scans += 1
            except asyncio.CancelledError:
                raise
            except Exception:  # a test's PLC must not die silently
                log.exception("phase PLC scan failed")
            await asyncio.sleep(self.scan_ms / 1000)

    async def _publish(self) -> None:
        assert self._server is not None
        changed: list[tuple[int, int, str, float]] = []
        for phase, key, first in self._slots:
            value = phase.values()[key]
            if self._shown.get(first) != value:
                order = next(i for i, prefix in enumerate(_PUBLISH_ORDER) if key.startswith(prefix))
                changed.append((order, first, key, value))
        for _, first, key, value in sorted(changed):
            self._own_write = True
            try:
                await self._server.async_setValues(UNIT_ID, 16, first, _encode(key, value))
            finally:
                self._own_write = False
            self._shown[first] = value

    async def _reset(self) -> None:
        for phase in self.phases.values():
            phase.reset_all()
        await self._publish()
