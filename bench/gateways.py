"""Several gateways on one PostgreSQL: does each take a share of the runs, and do they add capacity?

    .venv/bin/python bench/gateways.py [--gateways 3] [--runs 3000] [--waiting 3000] [--quick]
                                       [--engine key=value ...]

Real ``exchange gateway`` processes (distinct node ids, default settings unless ``--engine`` says
otherwise) on one embedded PostgreSQL, first one alone, then ``--gateways`` of them, each time on a
fresh database:

- ``--runs`` one-step workflows, queued while the gateways are drained (``maintenance drain``) and
  released at once when every gateway is ready (``maintenance exit``): the time from the release to
  the last run's SUCCESS, as workflows per second;
- ``--waiting`` long-lived runs, each waiting in ``recvCommand(timeoutSeconds=30)`` after its first
  step, queued and released the same way: how many are RUNNING with their first step done (a
  gateway executes at most ``[engine] workers`` runs at once, 2,000 by default) and how fast.

Printed for each: each gateway's share of the runs (by the process that executed each run's step,
from a side-effect file, and by the run's ``owner_node``), the throughput against one gateway, the
PostgreSQL connections of each gateway while the waiting runs wait (``pg_stat_activity`` by
``application_name``, set per gateway in its store URL), and whether any step ran twice (a line per
step execution in the side-effect file). Targets (issue 31): no gateway above 50 % of the runs, and
the gateways together at least as fast as one. ``--quick``: 300 runs of each kind.

The machine's cores are shared by every gateway: on 2 cores, three gateways cannot be three times as
fast as one; what they must not be is slower, and what they add is room (workers, memory, a second
machine's cores in production).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import machine_note, make_runtime, parse_engine, stores

from exchange._engine.gateway.maintenance import Maintenance
from exchange._engine.operator.runtime import Runtime
from tests.harness import ExchangeEnv, Gateway, count_lines

APP = """
import os

from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange._engine.execution.context import current_run

SIDE = os.environ.get("BENCH_SIDE_FILE", "")  # set for the gateways only


@step(name="bench.mark")
def mark():
    # One line per execution of the step (O_APPEND: whole lines from every process). No fsync: the
    # bench kills nothing, and it must measure the gateways, not the disk.
    fd = os.open(SIDE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, ("%s %s\\n" % (current_run().run_id, os.getpid())).encode())
    finally:
        os.close(fd)
    return os.getpid()


@workflow(name="bench.once")
def once():
    return mark()


@workflow(name="bench.waiting")
def waiting():
    mark()
    rt = getWorkflows()
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=30.0, maxMessages=1)
        if cmd and cmd["cmd"] == "STOP":
            return "stopped"
"""

START_BATCH = 1000  # runs per starting process (each within the harness's time limit)
SHARE_TARGET = 0.5


@dataclass
class Result:
    gateways: int
    runs: int
    reached: int  # runs that reached the awaited status
    seconds: float
    by_pid: dict[str, int]  # gateway name -> step executions
    by_owner: dict[str, int]  # owner_node -> runs
    twice: int  # steps executed more than once
    connections: dict[str, int]

    @property
    def per_second(self) -> float:
        return self.reached / self.seconds if self.seconds > 0 else float("nan")

    def shares(self) -> str:
        total = sum(self.by_pid.values()) or 1
        return ", ".join(f"{name} {n} ({n / total:.0%})" for name, n in sorted(self.by_pid.items()))

    def largest_share(self) -> float:
        total = sum(self.by_pid.values()) or 1
        return max(self.by_pid.values(), default=0) / total


def with_app_name(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


def count_status(runtime: Runtime, status: str) -> int:
    return runtime.store.runs.count_by_status().get(status, 0)


def owners(runtime: Runtime) -> dict[str, int]:
    from sqlalchemy import func, select

    from exchange._store.tables.schema import runs

    with runtime.store.db.read() as conn:
        rows = conn.execute(select(runs.c.owner_node, func.count()).group_by(runs.c.owner_node)).all()
    return {str(node) if node else "(none: ENQUEUED)": int(n) for node, n in rows}


def connections(runtime: Runtime) -> dict[str, int]:
    from sqlalchemy import text

    with runtime.store.db.read() as conn:
        rows = conn.execute(text(
            "SELECT application_name, count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "GROUP BY application_name"
        )).all()
    return {str(name or "?"): int(n) for name, n in rows}


def wait_for(count: Any, target: int, stall_seconds: float) -> tuple[int, float]:
    """Poll ``count()`` until it reaches ``target`` or stops growing for ``stall_seconds``; returns the
    last count and the time it was first seen (monotonic)."""
    last, last_at = -1, time.monotonic()
    while True:
        n = count()
        if n != last:
            last, last_at = n, time.monotonic()
        if n >= target or time.monotonic() - last_at > stall_seconds:
            return last, last_at
        time.sleep(0.02)


def measure(url: str, root: Path, gateways: int, runs: int, workflow: str, status: str,
            engine: dict[str, object]) -> Result:
    side = root / "side.txt"
    envs = []
    for i in range(gateways):
        env = ExchangeEnv.create(root / f"gw{i}", store_url=with_app_name(url, f"gw{i}"), apps_package="benchapps",
                                 engine={"node_id": f"gw{i}", **engine})
        env.write_app("gatewaysbench", APP)
        envs.append(env)
    runtime = make_runtime(with_app_name(url, "bench"), base_dir=root)
    Maintenance(runtime).drain(actor="bench", reason="queue first")
    for first in range(0, runs, START_BATCH):
        envs[0].start_runs(workflow, [{}] * min(START_BATCH, runs - first))
    procs: list[Gateway] = [env.gateway(name=f"gw{i}", log_level="WARNING") for i, env in enumerate(envs)]
    try:
        for gateway in procs:
            gateway.spawn({"BENCH_SIDE_FILE": str(side)})
        for gateway in procs:
            gateway.wait_ready(120)
        released = time.monotonic()
        Maintenance(runtime).exit(actor="bench", reason="release")
        if status == "SUCCESS":
            reached, at = wait_for(lambda: count_status(runtime, status), runs, stall_seconds=10.0)
        else:  # RUNNING: claimed and executing, counted once its first step ran (its line is written)
            reached, at = wait_for(lambda: count_lines(side), runs, stall_seconds=10.0)
        held = connections(runtime)
        by_owner = owners(runtime)
    finally:
        for gateway in procs:
            gateway.__exit__()
    runtime.close()
    lines = [line.split() for line in side.read_text().splitlines()] if side.exists() else []
    pid_names = {pid: gateway.name for gateway in procs for pid in gateway.pids}
    by_pid = Counter(pid_names.get(int(pid), f"pid {pid}") for _run, pid in lines)
    twice = sum(n - 1 for n in Counter(run for run, _pid in lines).values() if n > 1)
    held.pop("bench", None)
    return Result(gateways, runs, reached, at - released, dict(by_pid), by_owner, twice, held)


def report(label: str, status: str, one: Result, many: Result) -> list[str]:
    missed = []
    for r in (one, many):
        print(f"  {r.gateways} gateway(s): {r.reached} of {r.runs} {status} in {r.seconds:.2f} s "
              f"({r.per_second:.0f} runs/s); step executions by gateway: {r.shares()}; "
              f"runs by owner_node: {dict(sorted(r.by_owner.items()))}; steps run twice: {r.twice}")
        print(f"    connections to PostgreSQL by gateway (after the runs): {dict(sorted(r.connections.items()))}")
        if r.twice:
            missed.append(f"{label}: {r.twice} step(s) ran twice with {r.gateways} gateway(s)")
    ratio = many.per_second / one.per_second if one.per_second else float("nan")
    print(f"  {many.gateways} gateways against 1: {ratio:.2f}x the throughput; largest share "
          f"{many.largest_share():.0%} (target <= {SHARE_TARGET:.0%})")
    if many.largest_share() > SHARE_TARGET:
        missed.append(f"{label}: a gateway executed {many.largest_share():.0%} of the runs")
    if ratio < 1.0:
        missed.append(f"{label}: {many.gateways} gateways are {ratio:.2f}x as fast as one")
    return missed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateways", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3000, help="One-step workflows.")
    parser.add_argument("--waiting", type=int, default=3000, help="Runs that wait in recvCommand.")
    parser.add_argument("--quick", action="store_true", help="300 runs of each kind.")
    parser.add_argument("--engine", action="append", default=[], metavar="KEY=VALUE",
                        help="An [engine] setting for every gateway (default: none, the defaults).")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.waiting = 300, 300
    engine = parse_engine(args.engine)
    missed: list[str] = []
    with stores(argparse.Namespace(store_url=None, backends="postgresql")) as s:
        print(machine_note(s.tmp))
        print(f"[postgresql] {args.gateways} gateways against 1; engine settings: {engine or 'defaults'}")
        for label, workflow, count, status in (
            (f"{args.runs} one-step workflows", "bench.once", args.runs, "SUCCESS"),
            (f"{args.waiting} waiting runs", "bench.waiting", args.waiting, "RUNNING"),
        ):
            if count <= 0:
                continue
            print(f" {label}, queued then released at once:")
            results = [measure(s.fresh_url("postgresql"), s.tmp / f"{workflow}-{n}", n, count, workflow, status,
                               engine) for n in (1, args.gateways)]
            missed += report(label, status, *results)
            sys.stdout.flush()
    print("targets: " + ("met" if not missed else "missed: " + "; ".join(missed)))


if __name__ == "__main__":
    main()
