"""Equipment phases (issue 42): an operator's HOLD to the Hold at the PLC, and what following phases costs.

    .venv/bin/python bench/phases.py [--protocols opcua,modbus] [--holds 50] [--poll-ms 100]
                                     [--runs 200] [--cpu-seconds 15] [--recv-timeout-s 1.0] [--quick]
                                     [--only latency|cpu] [--profile] [--backends sqlite|postgresql]

Both parts run a real ``exchange gateway`` process (default engine settings, a fresh SQLite store;
``--backends postgresql`` an embedded PostgreSQL) whose runs call ``phase.run`` on a phase that does
not end by itself; the PLC plays in this process.

1. Latency. The PLC is the independent one of ``tests/phaseplc`` (an asyncua server, a pymodbus
   server; not Exchange's simulator) with one PLI phase ``R1/Charge``. The server hands each client
   write to the phase logic as the request arrives, and the bench notes the time a Hold (4) is
   written there. One run follows the phase; ``--holds`` times, from the RUNNING run: the bench
   sends HOLD with ``Runtime.send_command`` (this process, as ``exchange hold`` does; the gateway's
   mail watcher takes it from the store: SQLite polls every ``engine.mailbox_poll_ms``, 10 ms by
   default, PostgreSQL is notified), times send -> Hold written at the PLC and send -> ``getRun``
   shows HELD, then RESUME, and waits for RUNNING again. Printed p50/p90/p99. Goal: p99 <= 100 ms on
   OPC UA, <= one poll + 50 ms on Modbus (the phase's state is polled every ``--poll-ms`` there;
   the HOLD itself wakes the run at once on both: the mail watcher rings the run's bell).

2. CPU. Exchange's simulator serves ``--runs`` phases ``R1/P0`` ... on one device per protocol
   (``[simulation.phases]``, ticking every 100 ms). A gateway with ``--runs`` runs each following one
   of them in ``phase.run(poll_ms=--poll-ms)``, against a gateway with as many runs waiting in
   ``recvCommand(timeoutSeconds=--recv-timeout-s)`` in a loop (same config, same devices): the
   gateway's CPU (utime + stime from /proc) over ``--cpu-seconds`` once all wait, as CPU seconds per
   second (1.0 = one core) and the ratio. Target: ratio <= 1. ``--profile``: the phase gateway
   is run under cProfile (in the process, the figures move) and its top functions are printed.

Read the figures with the load average printed first: other work on the machine moves them.
``--quick``: 10 holds, 20 runs, 5 s windows (under a minute).
"""

from __future__ import annotations

import argparse
import logging
import os
import pstats
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import add_store_args, machine_note, percentile, stores

from simulators.engine import SimulatedPlant
from tests.harness import ExchangeEnv, Gateway, operator_loop_app, toml_value, wait_until
from tests.phaseplc.logic import PliPhase
from tests.phaseplc.modbus_phase import ModbusPhasePlc
from tests.phaseplc.opcua_phase import OpcUaPhasePlc

logging.getLogger("asyncua").setLevel(logging.ERROR)  # the PLC serves without security: said once here

HOLD_NUMBER = 4  # PLI's Hold (tests/phaseplc/logic.py keeps its own table)
LONG_S = 86_400  # a phase that does not end while measured (the simulator takes at most a day)

PHASE_APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import phase


@workflow(name="bench.phase")
def follow(name, poll_ms):
    return phase.run(name, params={}, poll_ms=poll_ms)
"""

# The gateway under cProfile (--profile), one profiler per thread (cProfile sees only the thread that
# enables it), merged and dumped to BENCH_PROFILE_OUT as the gateway exits (its SIGTERM handler
# stops it cleanly).
PROFILED_GATEWAY = """
import atexit, cProfile, os, pstats, sys, threading
profilers = []

def per_thread(*_):
    sys.setprofile(None)
    profiler = cProfile.Profile()
    profilers.append(profiler)
    profiler.enable()

def dump(*_):
    stats = None
    for profiler in list(profilers):
        profiler.disable()
        profiler.create_stats()
        if stats is None:
            stats = pstats.Stats(profiler)
        else:
            stats.add(profiler)
    if stats is not None:
        stats.dump_stats(os.environ["BENCH_PROFILE_OUT"])

atexit.register(dump)
threading.setprofile(per_thread)
from exchange._cli.main import main
main()
"""


class TimedPhase(PliPhase):
    """The PLC's phase logic, noting the monotonic time each Hold is written to its command tag."""

    def __init__(self, name: str) -> None:
        super().__init__(name, params=(), reports={}, duration_s=LONG_S, transition_ms=20)
        self.hold_written = threading.Event()
        self.hold_at = 0.0

    def written(self, key: str, value: float) -> None:
        if key == "command" and int(value) == HOLD_NUMBER:
            self.hold_at = time.monotonic()
            self.hold_written.set()
        super().written(key, value)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def make_env(root: Path, url: str, devices_toml: str) -> ExchangeEnv:
    """An env on ``url`` whose config adds ``devices_toml`` (devices, tags, phases)."""
    env = ExchangeEnv.create(root, store_url=url, apps_package="benchapps")
    env.write_app("phases_bench", PHASE_APP)
    env.config_path.write_text(
        "[store]\n"
        f"url = {toml_value(url)}\n\n[apps]\npaths = {toml_value([str(env.apps_dir)])}\n\n{devices_toml}\n",
        encoding="utf-8")
    return env


def events_of(runtime: Any, run_id: str) -> list[dict[str, Any]]:
    view: dict[str, Any] = runtime.get_run(run_id, steps=False)
    return list(view.get("events") or [])


def run_state(runtime: Any, run_id: str) -> str:
    return str(runtime.store.runs.get(run_id).state)


def follows_running(runtime: Any, run_id: str) -> bool:
    """The run is not held and the last phase state it recorded is Running (the handshake has seen
    it: its progress line is throttled, the events are not)."""
    view = runtime.get_run(run_id, steps=False)
    seen = [e["payload"].get("state") for e in view.get("events") or [] if e["kind"] == "phase_state"]
    return bool(view["status"] == "RUNNING" and view["state"] in (None, "RUNNING") and seen[-1:] == ["RUNNING"])


# ---- 1. latency -------------------------------------------------------------------------------------

def latency(protocol: str, url: str, root: Path, holds: int, poll_ms: float) -> None:
    logic = TimedPhase("R1/Charge")
    plc: OpcUaPhasePlc | ModbusPhasePlc = (OpcUaPhasePlc if protocol == "opcua" else ModbusPhasePlc)([logic])
    plc.start()
    try:
        env = make_env(root, url, plc.config_toml())
        runtime = env.runtime()
        with env.gateway(log_level="WARNING") as gateway:
            gateway.start(timeout_s=60)
            (run_id,) = env.start_runs("bench.phase", [{"name": "R1/Charge", "poll_ms": poll_ms}])
            wait_until(lambda: logic.state_name == "RUNNING" and follows_running(runtime, run_id), 30,
                       interval_s=0.01, message=lambda: f"the phase running (PLC {logic.state_name}, run "
                       f"{runtime.get_run(run_id, steps=False, events=False)}):\n{gateway.log_text()}")
            to_plc: list[float] = []
            to_held: list[float] = []
            jitter = random.Random(42)
            for _ in range(holds):
                # The run has taken the RUNNING it last wrote; a random pause keeps the HOLD out of
                # step with the state polls.
                time.sleep(jitter.uniform(0.0, max(poll_ms, 50) / 1000))
                logic.hold_written.clear()
                sent = time.monotonic()
                runtime.send_command(run_id, "HOLD", "bench", actor="bench")
                if not logic.hold_written.wait(10):
                    raise SystemExit(f"{protocol}: no Hold at the PLC 10 s after HOLD\n{gateway.log_text()}")
                to_plc.append(logic.hold_at - sent)
                wait_until(lambda: run_state(runtime, run_id) == "HELD", 10, interval_s=0.002, message="run HELD")
                to_held.append(time.monotonic() - sent)
                runtime.send_command(run_id, "RESUME", "bench", actor="bench")
                wait_until(lambda: logic.state_name == "RUNNING" and follows_running(runtime, run_id), 10,
                           interval_s=0.005, message="RUNNING again")
            runtime.send_command(run_id, "STOP", "bench", actor="bench")
            phase_commands = dict(logic.received)
        runtime.close()
    finally:
        plc.stop()
    goal = "p99 <= 100 ms" if protocol == "opcua" else f"p99 <= one poll + 50 ms = {poll_ms + 50:g} ms"
    print(f"[{protocol}] HOLD sent -> Hold written at the PLC: {ms_summary(to_plc)}  (goal {goal})")
    print(f"[{protocol}] HOLD sent -> getRun shows HELD (the PLC's Holding, {logic.transition_ms} ms, "
          f"then Held, seen): {ms_summary(to_held)}")
    print(f"[{protocol}] commands the PLC received: {phase_commands}")
    sys.stdout.flush()


def ms_summary(values_s: list[float]) -> str:
    ms = [v * 1000 for v in values_s]
    return (f"n={len(ms)} p50={percentile(ms, 50):.1f} ms p90={percentile(ms, 90):.1f} ms "
            f"p99={percentile(ms, 99):.1f} ms max={max(ms):.1f} ms mean={statistics.fmean(ms):.1f} ms")


# ---- 2. CPU -----------------------------------------------------------------------------------------

def plant_document(protocol: str, phases: int) -> dict[str, Any]:
    """One device of ``protocol`` serving ``phases`` PLI phases R1/P<i> (command, state), long ones."""
    tags: dict[str, Any] = {}
    table: dict[str, Any] = {}
    simulated: dict[str, Any] = {}
    for i in range(phases):
        name = f"R1/P{i}"
        command, state = f"[plant]{name}/Command", f"[plant]{name}/State"
        if protocol == "modbus":
            tags[command] = {"device": "plc", "address": f"HR{2 * i + 1}", "type": "Int16"}
            tags[state] = {"device": "plc", "address": f"HR{2 * i + 2}", "type": "Int16"}
        else:
            tags[command] = {"device": "plc", "address": f"ns=2;s=R1.P{i}.Command", "type": "Int32"}
            tags[state] = {"device": "plc", "address": f"ns=2;s=R1.P{i}.State", "type": "Int32"}
        table[name] = {"command": command, "state": state, "start_timeout_s": 30, "command_timeout_s": 30}
        simulated[name] = {"duration_s": LONG_S, "transition_ms": 100}
    device: dict[str, Any] = ({"driver": "modbus", "host": "127.0.0.1", "port": 502, "comm_timeout_s": 10}
                              if protocol == "modbus" else
                              {"driver": "opcua", "url": "opc.tcp://127.0.0.1:4840/bench/", "comm_timeout_s": 10})
    return {"devices": {"plc": device}, "tags": tags, "phases": table,
            "simulation": {"tick_ms": 100, "phases": simulated}}


@contextmanager
def gateway_of(env: ExchangeEnv, profile_to: Path | None) -> Iterator[Gateway]:
    gateway = env.gateway(log_level="WARNING")
    if profile_to is None:
        with gateway:
            gateway.start(timeout_s=120)
            yield gateway
            gateway.stop()
        return
    script = env.root / "profiled_gateway.py"
    script.write_text(PROFILED_GATEWAY, encoding="utf-8")
    import subprocess

    gateway.starts += 1
    with open(gateway.log_path, "wb") as log:
        gateway.proc = subprocess.Popen(
            [sys.executable, str(script), "--config", str(env.config_path), "--log-level", "WARNING", "gateway"],
            cwd=env.root, env={**env.process_env(), "BENCH_PROFILE_OUT": str(profile_to)}, stdout=log,
            stderr=subprocess.STDOUT)
    try:
        gateway.wait_ready(120)
        yield gateway
    finally:
        gateway.proc.terminate()
        gateway.proc.wait(60)


def waiting_cpu(env: ExchangeEnv, runs: int, seconds: float, workflow: str, params: list[dict[str, Any]],
                ready: Callable[[Any, list[str]], bool], plant: SimulatedPlant,
                profile_to: Path | None = None) -> tuple[float, str]:
    """(the gateway's CPU seconds per second over ``seconds`` once ``ready``; a note of its thread
    count and the read requests per second ``plant``'s server answered meanwhile)."""
    runtime = env.runtime()
    try:
        with gateway_of(env, profile_to) as gateway:
            ids = env.start_runs(workflow, params)
            started = time.monotonic()
            wait_until(lambda: ready(runtime, ids), 120, interval_s=0.2, message=f"{runs} runs of {workflow} waiting")
            settle_s = time.monotonic() - started
            time.sleep(2.0)  # past the start-up burst
            server = plant.servers["plc"]
            reads_before, cpu_before, at = server.read_count(), cpu_seconds(gateway.pid), time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - at
            rate = (cpu_seconds(gateway.pid) - cpu_before) / elapsed
            reads_per_s = (server.read_count() - reads_before) / elapsed
            threads = next((line.split()[1] for line in Path(f"/proc/{gateway.pid}/status").read_text().splitlines()
                            if line.startswith("Threads:")), "?")
            for run_id in ids:
                runtime.send_command(run_id, "STOP", "bench", actor="bench")
            return rate, (f"{reads_per_s:.0f} read requests/s at the PLC, {threads} threads, all waiting "
                          f"{settle_s:.1f} s after the starts")
    finally:
        runtime.close()


def cpu(protocol: str, stores_: Any, backend: str, root: Path, runs: int, seconds: float, poll_ms: float,
        recv_timeout_s: float, profile: bool) -> None:
    with SimulatedPlant.from_document(plant_document(protocol, runs), free_ports=True).start() as plant:
        text = plant.config_text
        names = [f"R1/P{i}" for i in range(runs)]

        def following(runtime: Any, ids: list[str]) -> bool:
            # Every phase Running at the PLC (every Start written), every run RUNNING, and the last one
            # started has recorded the Running state (the others have had longer to).
            if not all(plant.phase_state(name) == "RUNNING" for name in names):
                return False
            counts = runtime.store.runs.count_by_status()
            return int(counts.get("RUNNING", 0)) >= len(ids) and all(
                any(e["kind"] == "phase_state" and e["payload"].get("state") == "RUNNING"
                    for e in events_of(runtime, run_id)) for run_id in ids[-1:])

        phase_env = make_env(root / f"{protocol}-phase", stores_.fresh_url(backend), text)
        params = [{"name": name, "poll_ms": poll_ms} for name in names]
        profile_to = root / f"{protocol}-phase.prof" if profile else None
        phase_rate, phase_note = waiting_cpu(phase_env, runs, seconds, "bench.phase", params, following, plant,
                                             profile_to)

    with SimulatedPlant.from_document(plant_document(protocol, runs), free_ports=True).start() as idle_plant:
        # The same config, devices and phases (a PLC that nobody commands): only what the runs do differs.
        recv_env = make_env(root / f"{protocol}-recv", stores_.fresh_url(backend), idle_plant.config_text)
        recv_env.write_app("recv_bench", operator_loop_app("bench.recv", recv_timeout_seconds=recv_timeout_s,
                                                           sleep_ms=0))

        def receiving(runtime: Any, ids: list[str]) -> bool:
            return int(runtime.store.runs.count_by_status().get("RUNNING", 0)) >= len(ids)

        recv_rate, recv_note = waiting_cpu(recv_env, runs, seconds, "bench.recv", [{}] * runs, receiving, idle_plant)
    how = "polled" if protocol == "modbus" else "subscribed"
    print(f"[{protocol}] {runs} runs following a phase (state {how}, poll_ms={poll_ms:g}): gateway CPU "
          f"{phase_rate:.3f} s/s ({phase_note})")
    print(f"[{protocol}] {runs} runs in recvCommand(timeoutSeconds={recv_timeout_s:g}) loops: gateway CPU "
          f"{recv_rate:.3f} s/s ({recv_note})")
    ratio = phase_rate / recv_rate if recv_rate > 0 else float("inf")
    print(f"[{protocol}] phases / recvCommand: {ratio:.2f}x (target <= 1.00x)")
    if profile_to is not None and profile_to.exists():
        print(f"[{protocol}] the phase gateway's top functions by own time (cProfile, all threads it saw):")
        stats = pstats.Stats(str(profile_to), stream=sys.stdout)
        stats.sort_stats("tottime").print_stats(15)
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.set_defaults(backends="sqlite")
    parser.add_argument("--protocols", default="opcua,modbus", help="Comma-separated: opcua, modbus (default both).")
    parser.add_argument("--holds", type=int, default=50, help="HOLD/RESUME pairs timed per protocol (default 50).")
    parser.add_argument("--poll-ms", type=float, default=250.0,
                        help="phase.run's poll_ms (the state's poll where it is not subscribed; default 250).")
    parser.add_argument("--runs", type=int, default=200, help="Runs (and phases) for the CPU figure (default 200).")
    parser.add_argument("--cpu-seconds", type=float, default=15.0, help="The CPU window (default 15 s).")
    parser.add_argument("--recv-timeout-s", type=float, default=1.0,
                        help="timeoutSeconds of the recvCommand loop compared with (default 1.0).")
    parser.add_argument("--only", choices=("latency", "cpu"), default=None, help="One part only.")
    parser.add_argument("--profile", action="store_true", help="Profile the phase gateway of the CPU part.")
    parser.add_argument("--quick", action="store_true", help="10 holds, 20 runs, 5 s windows.")
    args = parser.parse_args()
    if args.quick:
        args.holds, args.runs, args.cpu_seconds = min(args.holds, 10), min(args.runs, 20), min(args.cpu_seconds, 5.0)
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    unknown = set(protocols) - {"opcua", "modbus"}
    if unknown:
        raise SystemExit(f"error: unknown protocol(s) {', '.join(sorted(unknown))} (use opcua, modbus)")
    with stores(args) as s:
        print(machine_note(s.tmp) + "; a real `exchange gateway` process, the PLC in this process")
        for backend in s.names():
            root = Path(tempfile.mkdtemp(prefix=f"phases-{backend}-", dir=s.tmp))
            for protocol in protocols:
                if args.only in (None, "latency"):
                    print(f"[{protocol}] latency on {backend}: {args.holds} HOLD/RESUME pairs, one run, "
                          f"tests/phaseplc's PLC, poll_ms={args.poll_ms:g}")
                    latency(protocol, s.fresh_url(backend), root / f"{protocol}-latency", args.holds, args.poll_ms)
            for protocol in protocols:
                if args.only in (None, "cpu"):
                    print(f"[{protocol}] CPU on {backend}: {args.runs} runs over {args.cpu_seconds:g} s, "
                          f"the simulator's phases")
                    cpu(protocol, s, backend, root, args.runs, args.cpu_seconds, args.poll_ms, args.recv_timeout_s,
                        args.profile)
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
