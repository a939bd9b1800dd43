"""Units (issue 43): a release -> the next holder running, and what a thousand runs waiting on a unit cost.

    .venv/bin/python bench/units.py [--backends sqlite,postgresql] [--handoffs 200] [--runs 2]
                                    [--hold-ms 20] [--waiting 1000] [--cpu-seconds 10]
                                    [--recv-timeout-s 3600] [--only handoff|cost] [--quick]

Real ``exchange gateway`` processes (default engine settings; a fresh SQLite store, or a fresh
database of an embedded PostgreSQL, per measurement), ``[units.R1]`` configured.

1. Handoff. ``--runs`` runs (default 2: two runs want R1) each take R1 again and again, holding it
   ``--hold-ms`` (a ``time.sleep`` inside the ``with``), for ``--handoffs`` grants in all. Each run
   notes ``time.time()`` before it asks, as its ``with`` block begins and as it ends (its last
   statement, just before the release), and returns them as its result. A handoff is the time from
   one holder's block end to the next holder's block beginning, counted only when the next holder
   had asked before the release (it was waiting: a release -> grant -> wake, not a free unit taken).
   Printed p50/p90/p99 for one gateway (SQLite, PostgreSQL), and on PostgreSQL for two gateways
   (node ids ``gwA``, ``gwB``, each serving one queue, ``exchange gateway --queue``; the runs
   alternate between the queues, so every handoff crosses from one gateway to the other: the grant's
   mail reaches the other gateway by NOTIFY). Goals: p99 <= 50 ms on one gateway, <= 200 ms across
   gateways on PostgreSQL.

2. Cost. A gateway with one run holding R1 (in ``recvCommand``) and ``--waiting`` runs waiting for
   R1 in ``units.acquire``, against a gateway with the same holder and as many runs waiting in
   ``recvCommand(timeoutSeconds=--recv-timeout-s)`` (default 3600: one long wait, as a unit's wait
   is; 1.0 gives the operator loop the other benches compare with). Once all wait (every request
   made; every run RUNNING) and 2 s more: the gateway's CPU (utime + stime from /proc) over
   ``--cpu-seconds``, its RSS and threads, and the store's work meanwhile (PostgreSQL: the
   database's transactions from ``pg_stat_database``; SQLite: the gateway's read and write system
   calls, /proc/PID/io). Printed side by side with the ratio (target: units / recvCommand <= 1).

Read the figures with the load average printed first: other work on the machine moves them.
``--quick``: 50 handoffs, 200 waiting runs, 5 s windows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import add_store_args, machine_note, percentile, stores

from tests.harness import ExchangeEnv, wait_until

APP = """
import os
import time

from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import units


@workflow(name="bench.units.handoff")
def handoff(rounds, hold_ms, go):
    while not os.path.exists(go):  # every run begins together, once the bench has started them all
        time.sleep(0.005)
    spans = []
    for _ in range(rounds):
        asked = time.time()
        with units.acquire("R1"):
            began = time.time()
            time.sleep(hold_ms / 1000)
            ended = time.time()  # the block's last statement: the release follows
        spans.append([asked, began, ended])
    return spans


@workflow(name="bench.units.holder")
def holder(timeout_s):
    rt = getWorkflows()
    with units.acquire("R1"):
        while True:
            cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=timeout_s, maxMessages=1)
            if cmd and cmd["cmd"] == "STOP":
                return "stopped"


@workflow(name="bench.units.waiter")
def waiter():
    with units.acquire("R1"):
        return "held"


@workflow(name="bench.units.recv")
def receiver(timeout_s):
    rt = getWorkflows()
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=timeout_s, maxMessages=1)
        if cmd and cmd["cmd"] == "STOP":
            return "stopped"
"""

UNITS_TOML = '\n[units.R1]\nclass = "reactor"\n'
START_BATCH = 500  # runs per start_runs subprocess (each within the harness's 60 s)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def make_env(root: Path, url: str, node_id: str | None = None) -> ExchangeEnv:
    env = ExchangeEnv.create(root, store_url=url, apps_package="benchapps",
                             engine={"node_id": node_id} if node_id else None)
    env.write_app("units_bench", APP)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write(UNITS_TOML)
    return env


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return "?"


def ms_summary(values_s: list[float]) -> str:
    ms = [v * 1000 for v in values_s]
    if not ms:
        return "n=0"
    return (f"n={len(ms)} p50={percentile(ms, 50):.1f} ms p90={percentile(ms, 90):.1f} ms "
            f"p99={percentile(ms, 99):.1f} ms max={max(ms):.1f} ms mean={statistics.fmean(ms):.1f} ms")


def finished(runtime: Any, run_ids: list[str], timeout_s: float, logs: Any) -> list[dict[str, Any]]:
    views = [wait_until(lambda run_id=run_id: (v := runtime.get_run(run_id, steps=False, events=False))["status"]
                        in ("SUCCESS", "ERROR", "CANCELLED") and v, timeout_s, interval_s=0.1,
                        message=lambda: f"every handoff run to finish:\n{logs()}")
             for run_id in run_ids]
    errors = [v["error"] for v in views if v["status"] != "SUCCESS"]
    if errors:
        raise SystemExit(f"a handoff run did not succeed: {errors}\n{logs()}")
    return views


def handoffs_of(views: list[dict[str, Any]]) -> tuple[list[float], int]:
    """(the handoff times in seconds, grants not counted: the unit was free when asked for)."""
    spans = sorted((span[1], span[0], span[2], i) for i, v in enumerate(views) for span in v["result"])
    times: list[float] = []
    free_taken = 0
    for (_, _, ended, _), (began, asked, _, _) in zip(spans, spans[1:]):
        if asked < ended:
            times.append(began - ended)
        else:
            free_taken += 1
    return times, free_taken


# ---- 1. release -> next holder running -------------------------------------------------------------

def handoff(url: str, root: Path, handoffs: int, runs: int, hold_ms: float, gateways: int) -> list[float]:
    rounds = -(-(handoffs + 1) // runs)  # ceil: a handoff per grant after the first
    nodes = ["gwA", "gwB"][:gateways] if gateways > 1 else [None]
    envs = [make_env(root / (node or "gw"), url, node) for node in nodes]
    runtime = envs[0].runtime()
    procs = [env.gateway(*(("--queue", f"q{i}") if gateways > 1 else ()), log_level="WARNING", name=f"gw{i}")
             for i, env in enumerate(envs)]

    def logs() -> str:
        return "\n".join(p.log_text() for p in procs)

    try:
        for proc in procs:
            proc.start(timeout_s=60)
        go = root / "go"
        params = {"rounds": rounds, "hold_ms": hold_ms, "go": str(go)}
        ids: list[str] = []
        for i in range(gateways):  # the runs alternate between the gateways' queues
            options = {"queue": f"q{i}"} if gateways > 1 else {}
            ids += envs[i].start_runs("bench.units.handoff", [params] * len(range(i, runs, gateways)), **options)
        wait_until(lambda: int(runtime.store.runs.count_by_status().get("RUNNING", 0)) == runs, 30,
                   message=lambda: f"{runs} handoff runs RUNNING\n{logs()}")
        go.touch()
        views = finished(runtime, ids, 60 + rounds * runs * (hold_ms / 1000 + 0.5), logs)
    finally:
        runtime.close()
        for proc in procs:
            proc.__exit__()
    owners = sorted({str(v.get("owner")) for v in views})
    times, free_taken = handoffs_of(views)
    print(f"  {len(views)} runs x {rounds} grants of R1 (held {hold_ms:g} ms each), executed by {', '.join(owners)}; "
          f"{free_taken} grants of a free unit not counted")
    return times


# ---- 2. what waiting costs -------------------------------------------------------------------------

def store_work(url: str, runtime: Any, pid: int) -> tuple[float, float]:
    """PostgreSQL: (transactions committed + rolled back in the database, rows read); SQLite: the
    gateway's (read system calls, write system calls). Monotonic counters, read around a window."""
    if url.startswith("postgresql"):
        from sqlalchemy import text

        with runtime.store.db.read() as conn:
            conn.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(text("SELECT xact_commit + xact_rollback, tup_returned + tup_fetched "
                                    "FROM pg_stat_database WHERE datname = current_database()")).one()
        return float(row[0]), float(row[1])
    io = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return float(io["syscr"]), float(io["syscw"])


def waiting_cost(url: str, root: Path, waiting: int, seconds: float, kind: str,
                 recv_timeout_s: float) -> dict[str, Any]:
    env = make_env(root, url)
    runtime = env.runtime()
    try:
        with env.gateway(log_level="WARNING") as gateway:
            gateway.start(timeout_s=60)
            (holder,) = env.start_runs("bench.units.holder", [{"timeout_s": recv_timeout_s}])
            wait_until(lambda: [h.run_id for h in runtime.store.units.holders()] == [holder], 30,
                       message=lambda: f"the holder to hold R1\n{gateway.log_text()}")
            started = time.monotonic()
            for first in range(0, waiting, START_BATCH):
                count = min(START_BATCH, waiting - first)
                if kind == "units":
                    env.start_runs("bench.units.waiter", [{}] * count)
                else:
                    env.start_runs("bench.units.recv", [{"timeout_s": recv_timeout_s}] * count)

            def all_wait() -> bool:
                if int(runtime.store.runs.count_by_status().get("RUNNING", 0)) < waiting + 1:
                    return False
                return kind != "units" or len(runtime.store.units.waiting()) >= waiting

            wait_until(all_wait, 300, interval_s=0.5,
                       message=lambda: f"{waiting} runs waiting ({kind})\n{gateway.log_text()}")
            settle_s = time.monotonic() - started
            time.sleep(2.0)  # past the start-up burst
            work_before = store_work(url, runtime, gateway.pid)
            cpu_before, at = cpu_seconds(gateway.pid), time.monotonic()
            time.sleep(seconds)
            elapsed = time.monotonic() - at
            cpu_rate = (cpu_seconds(gateway.pid) - cpu_before) / elapsed
            work_after = store_work(url, runtime, gateway.pid)
            rss = status_field(gateway.pid, "VmRSS")
            threads = status_field(gateway.pid, "Threads")
    finally:
        runtime.close()
    work = [(after - before) / elapsed for before, after in zip(work_before, work_after)]
    return {"cpu": cpu_rate, "rss": rss, "threads": threads, "work": work, "settle_s": settle_s}


def cost(url_of: Any, backend: str, root: Path, waiting: int, seconds: float, recv_timeout_s: float) -> None:
    found = {kind: waiting_cost(url_of(backend), root / kind, waiting, seconds, kind, recv_timeout_s)
             for kind in ("units", "recv")}
    if backend == "postgresql":
        work_names = ("transactions/s in the database", "rows read/s")
    else:
        work_names = ("read syscalls/s by the gateway", "write syscalls/s")
    labels = {"units": 'waiting in units.acquire("R1")',
              "recv": f"waiting in recvCommand(timeoutSeconds={recv_timeout_s:g})"}
    for kind, figures in found.items():
        work = ", ".join(f"{value:.1f} {name}" for value, name in zip(figures["work"], work_names))
        print(f"  {waiting} runs {labels[kind]}: gateway CPU {figures['cpu'] * 100:.2f} % of a core over "
              f"{seconds:g} s, RSS {figures['rss']}, {figures['threads']} threads; store: {work} "
              f"(all waiting {figures['settle_s']:.1f} s after the starts began)")
    units_cpu, recv_cpu = found["units"]["cpu"], found["recv"]["cpu"]
    ratio = units_cpu / recv_cpu if recv_cpu > 0 else float("inf")
    rss_ratio = _kib(found["units"]["rss"]) / max(1, _kib(found["recv"]["rss"]))
    print(f"  units / recvCommand: CPU {ratio:.2f}x, RSS {rss_ratio:.2f}x (target <= 1.00x; CPU figures this "
          f"small are a few clock ticks: read them with the load)")


def _kib(rss: str) -> int:
    try:
        return int(rss.split()[0])
    except (ValueError, IndexError):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--handoffs", type=int, default=200, help="Handoffs timed per setting (default 200).")
    parser.add_argument("--runs", type=int, default=2, help="Runs taking R1 in turn (default 2).")
    parser.add_argument("--hold-ms", type=float, default=20.0, help="How long each grant is held (default 20).")
    parser.add_argument("--waiting", type=int, default=1000, help="Waiting runs for the cost figure (default 1000).")
    parser.add_argument("--cpu-seconds", type=float, default=10.0, help="The CPU window (default 10 s).")
    parser.add_argument("--recv-timeout-s", type=float, default=3600.0,
                        help="timeoutSeconds of the recvCommand waits compared with (default 3600).")
    parser.add_argument("--only", choices=("handoff", "cost"), default=None, help="One part only.")
    parser.add_argument("--quick", action="store_true", help="50 handoffs, 200 waiting runs, 5 s windows.")
    args = parser.parse_args()
    if args.quick:
        args.handoffs, args.waiting = min(args.handoffs, 50), min(args.waiting, 200)
        args.cpu_seconds = min(args.cpu_seconds, 5.0)
    if args.runs < 2:
        raise SystemExit("error: --runs must be at least 2 (a handoff needs a run waiting)")
    with stores(args) as s:
        print(machine_note(s.tmp) + "; real `exchange gateway` processes, default engine settings")
        for backend in s.names():
            root = Path(tempfile.mkdtemp(prefix=f"units-{backend}-", dir=s.tmp))
            if args.only in (None, "handoff"):
                settings = [(1, "p99 <= 50 ms")]
                if backend == "postgresql":
                    settings.append((2, "p99 <= 200 ms"))
                for gateways, goal in settings:
                    where = "one gateway" if gateways == 1 else "two gateways, every handoff across"
                    print(f"[{backend}] release -> next holder running, {where}:")
                    times = handoff(s.fresh_url(backend), root / f"handoff-{gateways}", args.handoffs, args.runs,
                                    args.hold_ms, gateways)
                    print(f"  handoff: {ms_summary(times)}  (goal {goal})")
                    sys.stdout.flush()
            if args.only in (None, "cost"):
                print(f"[{backend}] what waiting costs: {args.waiting} runs and a holder, one gateway:")
                cost(s.fresh_url, backend, root / "cost", args.waiting, args.cpu_seconds, args.recv_timeout_s)
                sys.stdout.flush()
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
