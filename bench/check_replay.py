"""``exchange check-replay --all-active`` over many runs in flight: how many runs a second it replays.

    .venv/bin/python bench/check_replay.py [--backends sqlite] [--runs 1000] [--steps 8] [--rounds 3]

A dispatcher in this process executes ``--runs`` runs of a batch that records ``--steps`` steps (a
``patched`` decision among them) and then waits for a command; once every run waits, the dispatcher
stops (the runs stay in flight, RUNNING) and ``Runtime.check_replay(all_active=True)`` replays them
all, ``--rounds`` times: printed, the median time and runs/s, with the share of it spent reading the
store (the run rows, then one read of each run's steps). Every run must come back ``ok``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from common import add_store_args, installed_runtime, machine_note, stores

from exchange._engine import Dispatcher
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows

WAITING = "WAITING"


@step(name="bench.dose")
def dose(batch: int, i: int) -> dict[str, Any]:
    return {"batch": batch, "i": i, "litres": 10.0 * i}


@workflow(name="bench.check_replay")
def batch(batch_no: int, steps: int) -> str:
    rt = getWorkflows()
    for i in range(steps):
        if i == 1 and rt.patched("bench-dose-check"):
            pass
        dose(batch_no, i)
    rt.setState(WAITING)
    rt.recvCommand(currentState=WAITING, timeoutSeconds=3600)
    return "done"


def measure(store_url: str, runs: int, steps: int, rounds: int) -> None:
    with installed_runtime(store_url, workers=runs + 8, progress_interval_ms=0) as runtime:
        dispatcher = Dispatcher(runtime)
        dispatcher.start()
        started = time.monotonic()
        for n in range(runs):
            runtime.start("bench.check_replay", {"batch_no": n, "steps": steps})
        while len(runtime.list_runs(state=WAITING, limit=runs)) < runs:
            if time.monotonic() - started > 600:
                raise SystemExit("the runs did not all reach their wait within 600 s")
            time.sleep(0.2)
        print(f"  {runs} runs waiting after {time.monotonic() - started:.1f} s "
              f"({steps} steps + a patched marker each)")
        dispatcher.stop()  # the runs stay in flight (RUNNING), as during a deploy
        times, reads = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            outcomes = runtime.check_replay(all_active=True)
            times.append(time.perf_counter() - t0)
            bad = [o for o in outcomes if not o.ok]
            if len(outcomes) != runs or bad:
                raise SystemExit(f"expected {runs} ok, got {len(outcomes)} with {len(bad)} not ok: {bad[:1]}")
            t0 = time.perf_counter()
            for rec in runtime.store.lookup.list(_unfinished(runtime), runs):
                runtime.store.steps.load(rec.id)
            reads.append(time.perf_counter() - t0)
        median = statistics.median(times)
        print(f"  check-replay --all-active: {median * 1000:.0f} ms median of {rounds} "
              f"({runs / median:.0f} runs/s); reading the store alone: {statistics.median(reads) * 1000:.0f} ms")


def _unfinished(runtime: Any) -> Any:
    from exchange._engine.operator import run_lookup

    return run_lookup.run_filter(runtime.store, status="RUNNING", workflow=None, state=None, code_version=None,
                                 since=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.set_defaults(backends="sqlite")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with stores(args) as s:
        print(machine_note(Path(s.tmp)))
        for backend in s.names():
            print(f"[{backend}]")
            measure(s.fresh_url(backend), args.runs, args.steps, args.rounds)


if __name__ == "__main__":
    main()
