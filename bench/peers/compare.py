"""Exchange and DBOS side by side: the same workloads, the same machine, the same kind of store, one
invocation; every ratio printed is measured here, none is a constant.

    .venv/bin/python bench/peers/compare.py [--backends sqlite,postgresql] [--steps 1000] [--rounds 1]
                                            [--starters 8]

Per backend and round, on a fresh store each: Exchange (``bench/steps.py``'s measurements, default
engine settings) runs one workflow of ``--steps`` no-op steps and ``--steps`` one-step workflows,
started one after another from one thread while they execute, timed from the first start to the last
result (as DBOS's side does; Exchange's execution of runs queued beforehand is printed too), and the
same started by ``--starters`` threads at once (an MES or a line firing starts together); then
DBOS does the same in a child process (``bench/peers/dbos_steps.py``). Targets
(issue 8): a single run's steps >= 5x DBOS; one-step workflows per second >= 5x DBOS. Needs the
``bench`` extra (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BENCH))

from common import add_store_args, machine_note, stores  # noqa: E402
from steps import Throughput, many_workflows, one_workflow, started_and_finished  # noqa: E402

from exchange._config import EngineConfig  # noqa: E402


def dbos_figures(url: str, steps: int, starters: int) -> dict[str, float]:
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("dbos_steps.py")), "--store-url", url,
                           "--steps", str(steps), "--starters", str(starters)],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"DBOS bench failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def cpu_ceiling(backend: str, round_number: int, one: Throughput, n: int, dbos_per_s: float) -> str:
    """What the CPU alone allows: Exchange's process and the store's server share this machine's
    cores, so their CPU per workflow caps the workflows per second, however well they overlap."""
    cores = os.cpu_count() or 1
    both_ms = (one.cpu_s_per_workflow + (one.server_cpu_s_per_workflow or 0.0)) * 1e3
    return (f"[{backend} round {round_number}] the server's CPU per workflow meanwhile: "
            f"{(one.server_cpu_s_per_workflow or 0.0) * 1e3:.2f} ms; with Exchange's, {both_ms:.2f} ms of CPU "
            f"per workflow on {cores} cores: at most {cores / both_ms * 1e3:.0f} workflows/s if nothing ever "
            f"waited (measured {n / one.total_s:.0f}); 5x DBOS is {5 * dbos_per_s:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--starters", type=int, default=8,
                        help="Also start the one-step workflows from this many threads at once, both sides "
                             "(1: one thread only).")
    args = parser.parse_args()
    workers = EngineConfig().workers
    with stores(args) as s:
        print(machine_note(s.tmp))
        for backend in s.names():
            for round_number in range(1, args.rounds + 1):
                step_cost, _settings = one_workflow(s.fresh_url(backend), args.steps)
                exchange_steps = 1e6 / step_cost.wall_us
                _enqueued, executed = many_workflows(s.fresh_url(backend), args.steps, workers)
                one = started_and_finished(s.fresh_url(backend), args.steps, workers,
                                           server_cpu=s.server_cpu_seconds)
                exchange_workflows = args.steps / one.total_s
                concurrent_s = 0.0
                if args.starters > 1:
                    concurrent_s = started_and_finished(s.fresh_url(backend), args.steps, workers,
                                                        args.starters).total_s
                dbos = dbos_figures(s.fresh_url(backend), args.steps, args.starters)
                print(f"[{backend} round {round_number}] DBOS {dbos['version']}; one workflow of {args.steps} "
                      f"steps: Exchange {exchange_steps:.0f} steps/s, "
                      f"DBOS {dbos['one_workflow_steps_per_s']:.0f} steps/s: "
                      f"{exchange_steps / dbos['one_workflow_steps_per_s']:.1f}x (target 5x)")
                print(f"[{backend} round {round_number}] {args.steps} one-step workflows started one after another, "
                      f"first start to last result: Exchange {exchange_workflows:.0f} workflows/s ({workers} workers), "
                      f"DBOS {dbos['many_workflows_per_s']:.0f} workflows/s: "
                      f"{exchange_workflows / dbos['many_workflows_per_s']:.1f}x (target 5x); Exchange executing "
                      f"{args.steps} runs queued beforehand: {args.steps / executed:.0f} workflows/s")
                print(f"[{backend} round {round_number}] process CPU per workflow started one after another "
                      f"(user + system, all threads; the store's server not counted): Exchange "
                      f"{one.cpu_s_per_workflow * 1e3:.2f} ms, DBOS {dbos['cpu_s_per_workflow'] * 1e3:.2f} ms")
                if one.server_cpu_s_per_workflow is not None:
                    print(cpu_ceiling(backend, round_number, one, args.steps, dbos['many_workflows_per_s']))
                if concurrent_s:
                    exchange_concurrent = args.steps / concurrent_s
                    print(f"[{backend} round {round_number}] the same, started by {args.starters} threads at once: "
                          f"Exchange {exchange_concurrent:.0f} workflows/s, DBOS "
                          f"{dbos['concurrent_workflows_per_s']:.0f} workflows/s: "
                          f"{exchange_concurrent / dbos['concurrent_workflows_per_s']:.1f}x")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
