"""Shared by the multi-gateway fault tests: gateways of different nodes on one store, and the checks
that a run never executed in two processes at once.

Every step of the test workflows appends ``run seq pid start|end time`` lines (fsync'd) around its
body and returns the pid that executed it, which the run records; so the side-effect file shows who
executed what when, and the step rows show whose outcome was recorded.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, read_lines

APP = """
import os
import time

from exchange.workflows.bootstrap import step, workflow
from exchange._engine.execution.context import current_run
from testapps.sidefx import append_line


def mark(path, what, key=None):
    ctx = current_run()
    append_line(path, "%s %s %s %s %r %s" % (ctx.run_id, ctx.step.seq, os.getpid(), what, time.time(), key or "-"))


@step(name="own.tick")
def tick(path, i, hold_ms, key=None):
    mark(path, "start", key)
    time.sleep(hold_ms / 1000.0)
    mark(path, "end", key)
    return {"i": i, "pid": os.getpid()}


@workflow(name="own.count")
def count(path, n, hold_ms=20):
    for i in range(n):
        tick(path, i, hold_ms)
    return n


@workflow(name="own.keyed")
def keyed(path, key, hold_ms=40):
    tick(path, 0, hold_ms, key)
    return key
"""


@dataclass(frozen=True)
class Line:
    run_id: str
    seq: int
    pid: int
    what: str  # "start" | "end"
    at: float
    key: str


def lines_of(path: Path) -> list[Line]:
    return [Line(f[0], int(f[1]), int(f[2]), f[3], float(f[4]), f[5]) for f in read_lines(path)]


def make_envs(
    root: Path, store_url: str, nodes: list[str], zygote: ForkServer | None = None, **engine: Any
) -> list[ExchangeEnv]:
    """One config folder per gateway (each its own node id), all on ``store_url``, same apps; their
    processes are forked from ``zygote`` if given (see ``tests/harness.py``)."""
    envs = []
    for node in nodes:
        env = ExchangeEnv.create(root / node, store_url=store_url, engine={"node_id": node, **engine}, zygote=zygote)
        env.write_app("sidefx", SIDE_EFFECT_MODULE)
        env.write_app("own", APP)
        envs.append(env)
    return envs


def executions(lines: list[Line]) -> dict[tuple[str, int], list[tuple[int, float, float | None]]]:
    """(run, seq) -> [(pid, start, end or None)] in start order."""
    found: dict[tuple[str, int], list[tuple[int, float, float | None]]] = defaultdict(list)
    open_: dict[tuple[str, int, int], float] = {}
    for line in lines:
        key = (line.run_id, line.seq, line.pid)
        if line.what == "start":
            open_[key] = line.at
        else:
            found[(line.run_id, line.seq)].append((line.pid, open_.pop(key), line.at))
    for (run_id, seq, pid), started in open_.items():  # cut off by a kill
        found[(run_id, seq)].append((pid, started, None))
    for runs in found.values():
        runs.sort(key=lambda e: e[1])
    return found


def assert_never_concurrent(lines: list[Line], *, until: float) -> int:
    """No step ran in two processes at once (an execution cut off by a kill counts as running until
    ``until``); returns how many steps ran more than once."""
    repeated = 0
    for (run_id, seq), runs in executions(lines).items():
        for (pid_a, start_a, end_a), (pid_b, start_b, _end_b) in zip(runs, runs[1:]):
            assert start_b >= (end_a if end_a is not None else until) or pid_a == pid_b, (
                f"run {run_id} sequence {seq} ran in process {pid_b} from {start_b} while process {pid_a} "
                f"was still executing it (since {start_a}, until {end_a})")
        repeated += len(runs) - 1
    return repeated


def assert_recorded_by_last_executor(view: dict[str, Any], lines: list[Line]) -> None:
    """Each step's recorded outcome came from the process that executed it last: a process that lost
    the run never overwrote the new owner's record."""
    done = executions(lines)
    for s in view["steps"]:
        runs = [e for e in done.get((view["id"], s["seq"]), []) if e[2] is not None]
        assert runs, f"run {view['id']}: step {s['seq']} recorded but never executed"
        assert s["output"]["pid"] == runs[-1][0], (
            f"run {view['id']}: step {s['seq']} recorded by {s['output']['pid']}, last executed by {runs[-1][0]}")
