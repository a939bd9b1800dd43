"""DBOS's side of the peers bench: the same two workloads as ``bench/steps.py``, printed as JSON.

    .venv/bin/python bench/peers/dbos_steps.py --store-url URL [--steps 1000] [--starters 1]

Run by ``bench/peers/compare.py`` in its own process (DBOS is a process-wide singleton), on a fresh
store of the same kind as Exchange's: one workflow of ``--steps`` no-op steps, then ``--steps``
one-step workflows started one after another with ``DBOS.start_workflow`` (DBOS's own executor runs
them), and with ``--starters N`` the same started by N threads at once.
Needs the ``bench`` extra (``pip install -e '.[bench]'``: DBOS 3.4).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import sys
import time
from pathlib import Path

from dbos import DBOS, DBOSConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import start_from_threads  # noqa: E402


@DBOS.step()
def noop(i: int) -> int:
    return i


@DBOS.workflow()
def many_steps(n: int) -> int:
    for i in range(n):
        noop(i)
    return n


@DBOS.workflow()
def one_step(i: int) -> int:
    return noop(i)


def dbos_url(store_url: str) -> str:
    """DBOS takes a plain ``postgresql://`` URL (it picks its driver itself)."""
    return store_url.replace("postgresql+psycopg://", "postgresql://", 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store-url", required=True)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--starters", type=int, default=1, help="Also start the one-step workflows from this many "
                        "threads at once (1: one thread only).")
    args = parser.parse_args()
    if args.store_url.startswith("sqlite:///"):
        Path(args.store_url[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    config: DBOSConfig = {"name": "exchange-peers-bench", "system_database_url": dbos_url(args.store_url),
                          "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    logging.getLogger("dbos").setLevel(logging.WARNING)
    try:
        many_steps(10)  # warm-up: schema, connections
        started = time.perf_counter()
        assert many_steps(args.steps) == args.steps
        one_workflow_s = time.perf_counter() - started
        cpu_before = os.times()
        many_workflows_s, enqueued_s = started_and_finished(args.steps, 1)
        cpu_after = os.times()
        cpu_s = (cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system) / args.steps
        figures = {"many_workflows_per_s": args.steps / many_workflows_s, "start_s": enqueued_s,
                   "cpu_s_per_workflow": cpu_s}
        if args.starters > 1:
            concurrent_s, _ = started_and_finished(args.steps, args.starters)
            figures["concurrent_workflows_per_s"] = args.steps / concurrent_s
    finally:
        DBOS.destroy()
    print(json.dumps({
        "version": importlib.metadata.version("dbos"),
        "one_workflow_steps_per_s": args.steps / one_workflow_s,
        **figures,
    }))


def started_and_finished(n: int, starters: int) -> tuple[float, float]:
    """Start ``n`` one-step workflows, ``starters`` threads at once each one after another (1: this
    thread alone), and wait for every result: (seconds from the first start to the last result,
    seconds to start them)."""
    started = time.perf_counter()
    handles = start_from_threads(n, starters, lambda i: DBOS.start_workflow(one_step, i))
    enqueued_s = time.perf_counter() - started
    assert [h.get_result() for h in handles][-1] == n - 1
    return time.perf_counter() - started, enqueued_s


if __name__ == "__main__":
    main()
