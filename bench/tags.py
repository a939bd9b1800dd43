"""Tag layer figures: 100-tag reads against the raw libraries, and OPC UA write_confirm latency.

    .venv/bin/python bench/tags.py [--rounds N] [--protocols modbus,opcua,enip]
                                   [--enip-rounds N] [--confirm-rounds N] [--confirm-delay-ms MS]

1. Per protocol, one simulated server (the project's own, on a free 127.0.0.1 port) with 100 points,
   read three ways in the same run, interleaved (each round runs every method once, the order
   rotating from round to round), after a warm-up:

   - raw: the library alone doing the same batched request: pymodbus ``read_holding_registers`` of
     the same register blocks plus decoding; asyncua ``read_values`` (one Read request), timed
     inside the event loop; pycomm3 ``LogixDriver.read`` of the 100 names (tag definitions given,
     since cpppo cannot upload them);
   - the Exchange driver's ``read(points)``;
   - ``TagService.read(paths)`` (path lookup, batching per device, qualities).

   Requests per read are counted at the server, to show both sides send the same batch.
   Target (issue 3): Exchange <= 1.5x raw.

2. ``tags.write_confirm(cmd, value, confirm_path=feedback)`` on OPC UA inside a real runtime (SQLite
   store, dispatcher, recorded steps). A server-side write listener sees the command arrive, and a
   helper thread changes the feedback node ``--confirm-delay-ms`` later, at time T (as the PLC
   program would). Measured: step return (back in the workflow) minus T. Also ``TagService.wait_for``
   alone, on the same kind of server-side change. Target: <= 10 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import percentile

from exchange.config import DeviceConfig, config_from_dict
from exchange.drivers import registry
from exchange.drivers.base import Driver, Point
from exchange.tags.model import DataType, Quality
from exchange.tags.service import TagService
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.dispatcher import Dispatcher
from exchange.workflows.engine.instance import set_runtime
from exchange.workflows.engine.runtime import Runtime
from exchange.workflows.steps import tags as tag_steps
from simulators.servers.base import SimPoint

TAG_COUNT = 100
TARGET_RATIO = 1.5
TARGET_CONFIRM_MS = 10.0
PROTOCOLS = ("modbus", "opcua", "enip")

for _name in ("asyncua", "exchange", "pymodbus", "pycomm3", "simulators"):
    logging.getLogger(_name).setLevel(logging.ERROR)  # reconnect/subscribe chatter is not a figure


def value_of(i: int) -> float:
    return i * 0.5 + 0.25  # exact in Float32, so raw and Exchange values compare equal


# ---- measurement ------------------------------------------------------------------------------


@dataclass
class Method:
    name: str
    call: Callable[[], list[Any]]  # returns the 100 values (checked against the expected ones)
    timer: Callable[[], float] | None = None  # returns seconds itself (raw asyncua times in-loop)
    samples: list[float] = field(default_factory=list)

    def once(self) -> float:
        if self.timer is not None:
            return self.timer()
        started = time.perf_counter()
        self.call()
        return time.perf_counter() - started


def interleave(methods: list[Method], rounds: int, warmup: int) -> None:
    """Run every method once per round, rotating which goes first; keep the timed rounds."""
    for r in range(warmup + rounds):
        for k in range(len(methods)):
            method = methods[(r + k) % len(methods)]
            elapsed = method.once()
            if r >= warmup:
                method.samples.append(elapsed)


def check_values(methods: list[Method], expected: list[Any]) -> None:
    for method in methods:
        got = method.call()
        if got != expected:
            bad = next(i for i, (g, e) in enumerate(zip(got, expected)) if g != e) if len(got) == len(expected) else -1
            raise SystemExit(f"error: {method.name} returned wrong values (first difference at #{bad}): "
                             f"{got[:5]}... expected {expected[:5]}...")


def ms(seconds: float) -> float:
    return seconds * 1000.0


def report_reads(protocol: str, detail: str, methods: list[Method], requests: dict[str, int | str]) -> None:
    raw = methods[0]
    raw_p50, raw_p90 = percentile(raw.samples, 50), percentile(raw.samples, 90)
    print(f"\n{protocol}: {detail}; {len(raw.samples)} interleaved rounds")
    print(f"  {'method':<34}{'p50 ms':>9}{'p90 ms':>9}{'x raw p50':>11}{'x raw p90':>11}  requests/read")
    for method in methods:
        p50, p90 = percentile(method.samples, 50), percentile(method.samples, 90)
        if method is raw:
            ratios = f"{'':>11}{'':>11}"
        else:
            ratios = f"{p50 / raw_p50:>10.2f}x{p90 / raw_p90:>10.2f}x"
        print(f"  {method.name:<34}{ms(p50):>9.3f}{ms(p90):>9.3f}{ratios}  {requests.get(method.name, '?')}")
    worst = max(percentile(m.samples, 50) / raw_p50 for m in methods[1:])
    verdict = "meets" if worst <= TARGET_RATIO else "MISSES"
    print(f"  worst Exchange/raw (p50): {worst:.2f}x -> {verdict} the <= {TARGET_RATIO}x target")


def count_requests(methods: list[Method], counter: Callable[[], int]) -> dict[str, int | str]:
    """Server-side request count of one call of each method."""
    out: dict[str, int | str] = {}
    for method in methods:
        before = counter()
        method.call()
        out[method.name] = counter() - before
    return out


def tag_service(devices: dict[str, Any], tags: dict[str, Any]) -> TagService:
    return TagService(config_from_dict({"devices": devices, "tags": tags}, env={}))


def exchange_methods(svc: TagService, device: str, paths: list[str]) -> list[Method]:
    driver: Driver = svc.driver(device)
    points: list[Point] = [svc.tag(p).point for p in paths]

    def via_driver() -> list[Any]:
        return [v.value if v.quality is Quality.GOOD else v for v in driver.read(points)]

    def via_service() -> list[Any]:
        return [v.value if v.quality is Quality.GOOD else v for v in svc.read(paths)]

    return [Method("Exchange driver.read", via_driver), Method("Exchange TagService.read", via_service)]


# ---- Modbus -------------------------------------------------------------------------------------


def bench_modbus(rounds: int, warmup: int) -> None:
    from pymodbus.client import ModbusTcpClient

    from simulators.servers.modbus import ModbusSimServer

    # 100 Float32 tags in 200 consecutive holding registers: two block reads (124 + 76 registers)
    addresses = [f"HRF{1 + 2 * i}" for i in range(TAG_COUNT)]
    server = ModbusSimServer([SimPoint(a, DataType.FLOAT32, value_of(i)) for i, a in enumerate(addresses)])
    server.start()
    client = ModbusTcpClient("127.0.0.1", port=server.port, timeout=2, retries=0)
    settings = {"driver": "modbus", "host": "127.0.0.1", "port": server.port, "unit_id": 1}
    paths = [f"[bench]Modbus/T{i:03d}" for i in range(TAG_COUNT)]
    svc = tag_service({"plc": settings}, {p: {"device": "plc", "address": a} for p, a in zip(paths, addresses)})
    try:
        if not client.connect():
            raise SystemExit(f"error: raw pymodbus client cannot connect to 127.0.0.1:{server.port}")
        # the same blocks the 125-register limit gives: whole Float32 values, at most 125 registers
        per_block = 125 // 2
        blocks = [(2 * s, 2 * min(per_block, TAG_COUNT - s)) for s in range(0, TAG_COUNT, per_block)]
        float32 = client.DATATYPE.FLOAT32

        def raw() -> list[Any]:
            values: list[Any] = []
            for start, count in blocks:
                rr = client.read_holding_registers(start, count=count, device_id=1)
                if rr.isError():
                    raise SystemExit(f"error: raw read of HR offset {start} answered {rr}")
                regs = rr.registers
                values.extend(client.convert_from_registers(regs[j:j + 2], float32) for j in range(0, count, 2))
            return values

        methods = [Method("raw pymodbus (2 block reads)", raw), *exchange_methods(svc, "plc", paths)]
        check_values(methods, [value_of(i) for i in range(TAG_COUNT)])
        requests = count_requests(methods, server.read_count)
        interleave(methods, rounds, warmup)
        report_reads("Modbus TCP", "100 Float32 tags HRF1..HRF199 (200 registers)", methods, requests)
    finally:
        svc.close()
        client.close()
        server.stop()


# ---- OPC UA -------------------------------------------------------------------------------------


class RawOpcUa:
    """An asyncua Client on its own event loop; each read is timed inside the loop (no thread hop)."""

    def __init__(self, url: str, node_ids: list[str]) -> None:
        from asyncua import Client

        self.loop = asyncio.new_event_loop()
        self.client = Client(url, timeout=5)
        self.loop.run_until_complete(self.client.connect())
        self.nodes = [self.client.get_node(n) for n in node_ids]
        self.last: list[Any] = []

    async def _timed(self) -> float:
        started = time.perf_counter()
        self.last = await self.client.read_values(self.nodes)
        return time.perf_counter() - started

    def timed(self) -> float:
        return self.loop.run_until_complete(self._timed())

    def read(self) -> list[Any]:
        self.timed()
        return self.last

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.client.disconnect())
        finally:
            self.loop.run_until_complete(self.loop.shutdown_default_executor())
            self.loop.close()


def start_opcua(points: list[SimPoint]) -> Any:
    from simulators.servers.opcua import OpcUaSimServer

    server = OpcUaSimServer(points)
    server.start()
    return server


def opcua_device(url: str) -> dict[str, Any]:
    return {"driver": "opcua", "url": url, "timeout_ms": 5000}


def bench_opcua(rounds: int, warmup: int) -> None:
    addresses = [f"ns=2;s=Bench.F{i:03d}" for i in range(TAG_COUNT)]
    server = start_opcua([SimPoint(a, DataType.FLOAT32, value_of(i)) for i, a in enumerate(addresses)])
    paths = [f"[bench]OpcUa/T{i:03d}" for i in range(TAG_COUNT)]
    svc = tag_service({"line": opcua_device(server.url)},
                      {p: {"device": "line", "address": a} for p, a in zip(paths, addresses)})
    raw = RawOpcUa(server.url, addresses)
    try:
        methods = [Method("raw asyncua read_values (in loop)", raw.read, raw.timed),
                   *exchange_methods(svc, "line", paths)]
        check_values(methods, [value_of(i) for i in range(TAG_COUNT)])
        requests = count_requests(methods, server.read_count)
        interleave(methods, rounds, warmup)
        report_reads("OPC UA", "100 Float32 variables, one Read request", methods, requests)
    finally:
        raw.close()
        svc.close()
        server.stop()


# ---- EtherNet/IP --------------------------------------------------------------------------------


def raw_logix(port: int, names: list[str]) -> Any:
    """A plain pycomm3 LogixDriver for cpppo: no tag upload, atomic REAL definitions given instead."""
    from pycomm3 import LogixDriver
    from pycomm3.cip import DataTypes

    plc = LogixDriver(f"127.0.0.1:{port}/0", init_tags=False)
    plc.socket_timeout = 5.0
    if not plc.open():
        raise SystemExit(f"error: raw pycomm3 cannot open 127.0.0.1:{port}")
    plc._tags = {
        name: {"tag_name": name, "tag_type": "atomic", "data_type": "REAL", "data_type_name": "REAL",
               "type_class": DataTypes.get("REAL"), "dim": 0, "dimensions": [0, 0, 0], "alias": False,
               "external_access": "Read/Write"}
        for name in names
    }
    return plc


def bench_enip(rounds: int, warmup: int) -> None:
    from simulators.servers.enip import EnipSimServer

    names = [f"Bench_{i:03d}" for i in range(TAG_COUNT)]
    server = EnipSimServer([SimPoint(n, DataType.FLOAT32, value_of(i)) for i, n in enumerate(names)])
    server.start()
    settings = {"driver": "enip", "host": "127.0.0.1", "port": server.port, "upload_tags": False,
                "timeout_ms": 5000}
    paths = [f"[bench]Logix/T{i:03d}" for i in range(TAG_COUNT)]
    svc = tag_service({"logix": settings},
                      {p: {"device": "logix", "address": n, "type": "REAL"} for p, n in zip(paths, names)})
    plc = raw_logix(server.port, names)
    try:

        def raw() -> list[Any]:
            out = plc.read(*names)
            return [t.value if t.error is None else t for t in out]

        methods = [Method("raw pycomm3 LogixDriver.read", raw), *exchange_methods(svc, "logix", paths)]
        check_values(methods, [value_of(i) for i in range(TAG_COUNT)])
        requests = count_requests(methods, server.message_count)
        interleave(methods, rounds, warmup)
        report_reads("EtherNet/IP", "100 REAL tags on cpppo (Multiple Service Packets; requests = CIP messages)",
                     methods, requests)
    finally:
        try:
            plc.close()
        except Exception:  # noqa: BLE001 - the figures are printed; a failing goodbye is irrelevant
            pass
        svc.close()
        server.stop()


# ---- write_confirm on OPC UA -----------------------------------------------------------------------

CMD_ADDRESS, FEEDBACK_ADDRESS = "ns=2;s=Bench.Cmd", "ns=2;s=Bench.Feedback"
CMD_PATH, FEEDBACK_PATH = "[bench]Valve/Cmd", "[bench]Valve/Feedback"
FIRST_VALUE = 1000
RETURNED: dict[int, float] = {}  # value -> perf_counter when write_confirm returned in the workflow


@workflow(name="bench.tags.confirm_loop")
def confirm_loop(first: int, count: int) -> int:
    for value in range(first, first + count):
        tag_steps.write_confirm(CMD_PATH, value, confirm_path=FEEDBACK_PATH, timeout_ms=5000)
        RETURNED[value] = time.perf_counter()
    return count


class Plc:
    """The PLC program: ``delay_s`` after a command write reaches the server, the feedback follows it."""

    def __init__(self, server: Any, delay_s: float) -> None:
        self.server = server
        self.delay_s = delay_s
        self.changed_at: dict[int, float] = {}  # value -> perf_counter just before the server-side set
        self.set_s: list[float] = []  # how long the set call took (thread hop into the server's loop)
        self._jobs: queue.Queue[tuple[int, float] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="bench-plc", daemon=True)
        self._thread.start()
        server.add_write_listener(self._on_write)

    def _on_write(self, address: str, value: Any) -> None:  # on the server's loop thread
        if address == CMD_ADDRESS:
            self._jobs.put((int(value), time.perf_counter()))

    def change_later(self, value: int) -> None:
        self._jobs.put((value, time.perf_counter()))

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            value, seen = job
            pause = seen + self.delay_s - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            started = time.perf_counter()
            self.server.set(FEEDBACK_ADDRESS, value)
            self.changed_at[value] = started
            self.set_s.append(time.perf_counter() - started)

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=5)


def latency_line(label: str, samples_s: list[float]) -> str:
    values = [ms(s) for s in samples_s]
    return (f"  {label:<44} n={len(values)} p50={percentile(values, 50):.2f} ms "
            f"p90={percentile(values, 90):.2f} ms max={max(values):.2f} ms mean={statistics.fmean(values):.2f} ms")


def bench_confirm(rounds: int, warmup: int, delay_ms: float) -> None:
    points = [SimPoint(CMD_ADDRESS, DataType.INT32, 0), SimPoint(FEEDBACK_ADDRESS, DataType.INT32, 0)]
    server = start_opcua(points)
    plc = Plc(server, delay_ms / 1000)
    tmp = Path(tempfile.mkdtemp(prefix="exchange-bench-tags-"))
    tags = {CMD_PATH: {"device": "line", "address": CMD_ADDRESS},
            FEEDBACK_PATH: {"device": "line", "address": FEEDBACK_ADDRESS}}
    raw = {
        "store": {"url": f"sqlite:///{tmp / 'exchange.db'}"},
        "apps": {"paths": []},
        "engine": {"workers": 2, "progress_interval_ms": 0, "node_id": "bench-tags", "dispatch_poll_ms": 20},
        "devices": {"line": opcua_device(server.url)},
        "tags": tags,
    }
    runtime = Runtime(config_from_dict(raw, base_dir=tmp, env={}))
    set_runtime(runtime)
    dispatcher = Dispatcher(runtime)
    dispatcher.start()
    svc = tag_service({"line": opcua_device(server.url)}, tags)
    try:
        total = warmup + rounds
        run_id = runtime.start("bench.tags.confirm_loop", {"first": FIRST_VALUE, "count": total})
        view = runtime.waitFor(run_id, 120)
        if view["status"] != "SUCCESS":
            raise SystemExit(f"error: the write_confirm run ended {view['status']}: {view.get('error')}")
        step_results = [s for s in view["steps"] if s["name"] == "tags.write_confirm"]
        values = range(FIRST_VALUE + warmup, FIRST_VALUE + total)
        step_latency = [RETURNED[v] - plc.changed_at[v] for v in values]
        set_calls = plc.set_s[warmup:]

        # TagService.wait_for alone: the same server-side change, no write, no engine
        wait_latency: list[float] = []
        for n, value in enumerate(range(FIRST_VALUE + total, FIRST_VALUE + 2 * total)):
            plc.change_later(value)
            svc.wait_for_value(FEEDBACK_PATH, value, timeout_s=5, poll_s=0.25)
            returned = time.perf_counter()
            deadline = time.monotonic() + 5
            while value not in plc.changed_at and time.monotonic() < deadline:
                time.sleep(0.0005)  # the set call may still be on its way back from the server's loop
            if n >= warmup:
                wait_latency.append(returned - plc.changed_at[value])

        print(f"\nOPC UA write_confirm: feedback changed server-side {delay_ms:g} ms after the write reached "
              f"the server (publishing interval 0, poll_ms 250)")
        print(latency_line("tags.write_confirm step: change -> return", step_latency))
        print(latency_line("TagService.wait_for_value: change -> return", wait_latency))
        print(latency_line("(server-side set() call itself)", set_calls))
        elapsed = [float(s["result"]["elapsed_ms"]) / 1000 for s in step_results[warmup:]
                   if isinstance(s.get("result"), dict) and "elapsed_ms" in s["result"]]
        if elapsed:
            print(latency_line("(step's own elapsed_ms: write -> confirm)", elapsed))
        worst = max(percentile([ms(s) for s in step_latency], 50), percentile([ms(s) for s in wait_latency], 50))
        verdict = "meets" if worst <= TARGET_CONFIRM_MS else "MISSES"
        print(f"  worst p50: {worst:.2f} ms -> {verdict} the <= {TARGET_CONFIRM_MS:g} ms target")
    finally:
        svc.close()
        dispatcher.stop()
        runtime.close()
        set_runtime(None)
        plc.stop()
        server.stop()


# ---- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help="timed rounds per method (Modbus, OPC UA)")
    parser.add_argument("--enip-rounds", type=int, default=None,
                        help="timed rounds for EtherNet/IP (default: rounds/5, at least 10; cpppo is slow)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="comma-separated: modbus, opcua, enip")
    parser.add_argument("--confirm-rounds", type=int, default=30, help="write_confirm rounds (0: skip)")
    parser.add_argument("--confirm-delay-ms", type=float, default=30.0,
                        help="server-side feedback change this long after the command write arrives")
    args = parser.parse_args()
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    unknown = set(protocols) - set(PROTOCOLS)
    if unknown:
        raise SystemExit(f"error: unknown protocol(s) {', '.join(sorted(unknown))} (use {', '.join(PROTOCOLS)})")
    if args.rounds < 1 or args.confirm_rounds < 0:
        raise SystemExit("error: --rounds must be >= 1 and --confirm-rounds >= 0")
    enip_rounds = args.enip_rounds if args.enip_rounds is not None else max(10, args.rounds // 5)
    load = os.getloadavg()
    print(f"bench/tags.py: {os.cpu_count()} cpu(s), load average {load[0]:.2f}; Python {sys.version.split()[0]}; "
          f"times are per 100-tag read, client and server on 127.0.0.1")
    started = time.monotonic()
    if "modbus" in protocols:
        bench_modbus(args.rounds, warmup=max(5, args.rounds // 10))
    if "opcua" in protocols:
        bench_opcua(args.rounds, warmup=max(5, args.rounds // 10))
    if "enip" in protocols:
        bench_enip(enip_rounds, warmup=3)
    if args.confirm_rounds:
        bench_confirm(args.confirm_rounds, warmup=5, delay_ms=args.confirm_delay_ms)
    print(f"\ntotal {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
