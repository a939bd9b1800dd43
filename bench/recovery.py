"""Gateway restart after kill -9 → first resumed step (target <= 0.3 s), cold and with a hot standby.

    .venv/bin/python bench/recovery.py [--backends sqlite,postgresql] [--store-url URL] [--rounds 7] [--surfaces]
                                       [--devices]

A gateway executes a few long runs of small steps; each step appends ``pid wall-time cpu-time`` to a
file (fsync'd). Each round kills the gateway with SIGKILL, spawns a new ``exchange gateway`` process
and measures from the spawn to the first line written by a resumed step in the new process, and the
CPU time that process had used by then. The gateway's own log (INFO, millisecond timestamps; its
``start-up:`` line, see exchange/_cli/startup.py) splits that into phases, printed as medians over
the rounds: the interpreter's start, the imports, the config, the store (open, migration check), the
apps, the services' checks, the node lock and take-over of the node's runs (until the first
"recovering run" line), then the hand-over to workers and the replay of each run's history up to its
first step executed again. ``--surfaces`` starts the gateway with the HTTP API and the OPC UA server
of runs (which it serves after the recovery); ``--devices`` configures a plant's devices (OPC UA,
Modbus, EtherNet/IP, a tag each) that the runs do not use: their checks are part of the start.

Before the rounds, ``python -X importtime`` of the modules a gateway imports before its first resumed
step says where the import time goes, by the package that pulled each module in (median of 5).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from common import ROOT, add_store_args, machine_note, stores

from tests.harness import EXCHANGE_CMD, SIDE_EFFECT_MODULE, ExchangeEnv, count_lines, wait_until

APP = """
import os
import time

from exchange.workflows.bootstrap import step, workflow
from benchapps.sidefx import append_line


@step(name="bench.tick")
def tick(path, i):
    append_line(path, "%s %r %r" % (os.getpid(), time.time(), time.process_time()))
    time.sleep(0.002)
    return i


@workflow(name="bench.recover")
def recover(path, n):
    for i in range(n):
        tick(path, i)
    return n
"""


def log_time(line: str) -> float:
    """Epoch seconds of a log line's ``asctime`` (local time, milliseconds)."""
    stamp = line[:23]
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def new_lines_from(path: Path, offset: int) -> tuple[list[tuple[int, float, float]], int]:
    """The complete lines from ``offset`` on: (pid, wall time, the process's CPU time), and the new offset."""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    lines = []
    for raw in data[:end].decode().splitlines():
        pid, ts, cpu = raw.split()
        lines.append((int(pid), float(ts), float(cpu)))
    return lines, offset + end


# What a gateway imports before its first resumed step (the CLI, the dispatcher, the apps' loader).
GATEWAY_IMPORTS = ("import exchange._cli.main, exchange._cli.startup, exchange._cli.surfaces, "
                   "exchange._engine.gateway.dispatcher, exchange.workflows.apps, exchange.workflows.bootstrap")
# The packages that import time is charged to (a module of another package is charged to the nearest
# of these that imported it: asyncio pulled in by SQLAlchemy counts as SQLAlchemy's).
OWNERS = ("sqlalchemy", "psycopg", "click", "croniter", "dateutil", "requests", "inotify_simple", "asyncua",
          "uvicorn", "fastapi", "starlette", "pydantic", "pymodbus", "pycomm3", "exchange")
STARTUP_PHASES = ("imports", "config", "store", "apps", "services", "recovery")


def importtime_by_owner(store_modules: str, repeat: int = 5) -> tuple[float, dict[str, float]]:
    """Median wall time of ``python -c IMPORTS`` and the median ``-X importtime`` self time (ms) per
    owner package (:data:`OWNERS`; the interpreter's own start-up modules apart)."""
    # As the gateway does (exchange._cli.common.collector_paused): the collector paused while importing.
    code = f"import gc; gc.disable(); {GATEWAY_IMPORTS}, {store_modules}"
    walls: list[float] = []
    runs: list[dict[str, float]] = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        walls.append(time.perf_counter() - started)
        err = subprocess.run([sys.executable, "-X", "importtime", "-c", code], check=True, cwd=ROOT,
                             capture_output=True, text=True).stderr
        rows = []  # (self us, depth, module), children before their parent
        for line in err.splitlines():
            if line.startswith("import time:") and "self [us]" not in line:
                own, _cumulative, name = line[len("import time:"):].split("|")
                rows.append((int(own), (len(name) - len(name.lstrip()) - 1) // 2, name.strip()))
        owners: dict[str, float] = {}
        for i, (own, depth, name) in enumerate(rows):
            chain = [name]
            for _own, d, parent in rows[i + 1:]:
                if d < depth:
                    chain.append(parent)
                    depth = d
                if depth == 0:
                    break
            owner = "interpreter start-up (site, encodings)" if chain[-1] in ("site", "encodings") else next(
                (m.split(".")[0] for m in chain if m.split(".")[0] in OWNERS), "other (stdlib)")
            owners[owner] = owners.get(owner, 0.0) + own / 1000
        runs.append(owners)
    names = {name for run in runs for name in run}
    return statistics.median(walls), {name: statistics.median(run.get(name, 0.0) for run in runs) for name in names}


def print_importtime(backend: str) -> None:
    store_modules = ("psycopg, sqlalchemy.dialects.postgresql" if backend == "postgresql"
                     else "sqlalchemy.dialects.sqlite, exchange._store.gateways.file_changes")
    wall, owners = importtime_by_owner(store_modules)
    print(f"  python -c '<the gateway's imports>' (interpreter start + imports): median {wall * 1000:.0f} ms; "
          f"-X importtime self time by the package that pulled it in (ms, median of 5; importtime's own "
          f"overhead included):")
    print("    " + ", ".join(f"{name} {ms:.0f}" for name, ms in sorted(owners.items(), key=lambda kv: -kv[1])
                             if ms >= 1))


def startup_phases(log: str, spawned: float, first_step: float) -> dict[str, float]:
    """Seconds per start-up phase of one gateway start, from its ``start-up:`` and first
    ``recovering run`` log lines (see exchange/_cli/startup.py); they add up to the spawn -> first
    resumed step time. The gateway's ``recovery`` phase is split at the first "recovering run" line:
    the node lock and the take-over of the node's runs before it; after it the runs are handed to
    workers, which replay their history and execute a step again while the gateway goes on with its
    start (so the last phase is measured to the first step, not to the end of ``recovery``)."""
    line = next(line for line in log.splitlines() if " start-up: " in line)
    began = float(re.search(r"\(began ([0-9.]+)\)", line).group(1))  # type: ignore[union-attr]
    spans = {name: float(ms) / 1000 for name, ms in re.findall(r"(\w+) (\d+) ms", line)}
    phases = {"interpreter": began - spawned}
    at = began
    for name in STARTUP_PHASES[:-1]:
        phases[name] = spans[name]
        at += spans[name]
    recovering = [log_time(x) for x in log.splitlines() if "recovering run" in x]
    first_recovering = recovering[0] if recovering else at + spans["recovery"]
    phases["lock + take-over"] = first_recovering - at
    phases["to workers, replay, 1st step"] = first_step - first_recovering
    return phases


# A plant's devices, unreachable and unused by the runs: the gateway checks their settings and their
# tags' addresses at start-up (--devices).
DEVICES = """
[devices.line]
driver = "opcua"
url = "opc.tcp://127.0.0.1:1/line/"

[devices.dosing]
driver = "modbus"
host = "127.0.0.1"
port = 1

[devices.packer]
driver = "enip"
host = "127.0.0.1"

[tags."[plant]Line1/Tank/Level"]
device = "line"
address = "ns=2;s=Line1.Tank.Level"
type = "Float64"

[tags."[plant]Dosing/Flow"]
device = "dosing"
address = "HRF1"

[tags."[plant]Packer/Count"]
device = "packer"
address = "Packer_Count"
type = "Int32"
"""


def measure(url: str, root: Path, rounds: int, runs: int, surfaces: bool, devices: bool = False) -> None:
    env = ExchangeEnv.create(root, store_url=url, apps_package="benchapps")
    if devices:
        env.config_path.write_text(env.config_path.read_text() + DEVICES, encoding="utf-8")
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("recover", APP)
    side = root / "ticks.txt"
    side.touch()
    results: list[float] = []
    cpus: list[float] = []  # the gateway's CPU time (all threads) at its first resumed step
    split: list[dict[str, float]] = []
    extra = ("--api", "127.0.0.1:0", "--opcua-server", "opc.tcp://127.0.0.1:0/bench/") if surfaces else ()
    with env.gateway(*extra, log_level="INFO") as gateway:
        gateway.start()
        env.start_runs("bench.recover", [{"path": str(side), "n": 10_000_000}] * runs)
        for _ in range(rounds):
            base = count_lines(side)
            wait_until(lambda base=base: count_lines(side) >= base + 50, 30, message="progress before the kill")
            gateway.kill9()
            offset = side.stat().st_size
            gateway.spawn()
            spawned = gateway.spawned_at

            def first_resumed() -> tuple[float, float] | None:
                nonlocal offset
                lines, offset = new_lines_from(side, offset)
                for pid, ts, cpu in lines:
                    if pid == gateway.pid:
                        return ts, cpu
                return None

            first, cpu = wait_until(first_resumed, 30, interval_s=0.002,
                                    message=lambda: f"a resumed step\n{gateway.log_text()}")
            gateway.wait_ready(timeout_s=60)
            results.append(first - spawned)
            cpus.append(cpu)
            split.append(startup_phases(gateway.log_text(), spawned, first))
        steps = count_lines(side)
        gateway.kill9()
    median = statistics.median(results)
    print(f"  spawn -> first resumed step: median {median * 1000:.0f} ms, min {min(results) * 1000:.0f} ms, "
          f"max {max(results) * 1000:.0f} ms over {rounds} kills ({runs} runs in flight, {steps} steps recorded "
          f"in all at the end)" + ("  [target 300 ms: met]" if median <= 0.3 else "  [target 300 ms: MISSED]"))
    print(f"    CPU time the gateway process had used by then (user + system, all threads; less sensitive to "
          f"other load than the wall time): median {statistics.median(cpus) * 1000:.0f} ms")
    print("    by phase (the gateway's own log; median over the kills, ms):")
    for name in split[0]:
        print(f"      {name:<30} {statistics.median(s[name] for s in split) * 1000:6.0f}")


def measure_standby(url: str, root: Path, rounds: int, runs: int) -> None:
    """kill -9 of the active gateway → first step resumed by a hot standby (``gateway --standby``)."""
    env = ExchangeEnv.create(root, store_url=url, apps_package="benchapps")
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("recover", APP)
    side = root / "ticks.txt"
    side.touch()
    # Both with --standby: the first takes the free lock at once; each killed one comes back as standby.
    gateways = [env.gateway("--standby", log_level="INFO", name=name) for name in ("a", "b")]
    totals: list[float] = []
    try:
        active, standby = gateways[0], gateways[1]
        active.start()
        env.start_runs("bench.recover", [{"path": str(side), "n": 10_000_000}] * runs)
        standby.spawn()
        for _ in range(rounds):
            wait_until(lambda sb=standby: "standby: waiting" in sb.log_text(), 30, message="the standby to wait")
            base = count_lines(side)
            wait_until(lambda base=base: count_lines(side) >= base + 50, 30, message="progress before the kill")
            offset = side.stat().st_size
            killed_at = time.time()
            active.kill9()

            def first_resumed(sb: Any = standby) -> float | None:
                nonlocal offset
                lines, offset = new_lines_from(side, offset)
                for pid, ts, _cpu in lines:
                    if pid == sb.pid:
                        return ts
                return None

            first = wait_until(first_resumed, 30, interval_s=0.002,
                               message=lambda sb=standby: f"a resumed step\n{sb.log_text()}")
            totals.append(first - killed_at)
            active, standby = standby, active  # the killed one comes back as the new standby
            standby.spawn()
    finally:
        for gateway in gateways:
            if gateway.alive():
                gateway.kill9()
    median = statistics.median(totals)
    print(f"  with a hot standby (gateway --standby): kill -9 -> first resumed step: median "
          f"{median * 1000:.0f} ms, min {min(totals) * 1000:.0f} ms, max {max(totals) * 1000:.0f} ms over "
          f"{rounds} kills" + ("  [target 300 ms: met]" if median <= 0.3 else "  [target 300 ms: MISSED]"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--runs", type=int, default=4, help="Runs in flight at each kill.")
    parser.add_argument("--surfaces", action="store_true",
                        help="Start the gateway with the HTTP API and the OPC UA server of runs.")
    parser.add_argument("--devices", action="store_true",
                        help="Configure an OPC UA, a Modbus and an EtherNet/IP device with a tag each (unused).")
    args = parser.parse_args()
    assert EXCHANGE_CMD[0] == sys.executable
    with stores(args) as s:
        print(machine_note(s.tmp))
        for backend in s.names():
            print(f"[{backend}]")
            print_importtime(backend)
            measure(s.fresh_url(backend), s.tmp / f"recovery-{backend}", args.rounds, args.runs, args.surfaces,
                    args.devices)
            measure_standby(s.fresh_url(backend), s.tmp / f"standby-{backend}", args.rounds, args.runs)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
