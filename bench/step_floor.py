"""How far the engine's Python per SQLite step could go down: the step beside the least any Python
around its statement must do.

    .venv/bin/python bench/step_floor.py [--steps 3000] [--rounds 5] [--dir /dev/shm]

Issue 31 asks for at most 20 µs of Python per step beyond the bare commit. This bench puts that
target beside a floor measured on the same machine, in one invocation: per round, on a fresh SQLite
file each, the CPU per step (user + system, all threads) of

- *the bare statement*: the step's own fenced INSERT, spelled beforehand, between BEGIN IMMEDIATE
  and COMMIT on the sqlite3 driver (``steps.step_statement_floor_us``);
- *the least Python around it*: the same, written by hand with only what a durable step cannot do
  without: the output encoded to JSON, the step's record, its parameters, a lock held across the
  transaction (writers share one connection) and the fence's row-count check. No replay, no lease
  or cancel check, no group commit, no retry or fault handling;
- *a store write* (``steps.store_write_us``) and *a step* of a workflow (``steps.one_workflow``).

The files go on ``--dir`` (default ``/dev/shm``, memory, when it exists): there a commit costs no
fsync, so the figures are CPU and the differences between them are the Python. Rounds alternate
the four; medians are printed, and the medians of each round's differences. Compare versions with
``step_work.py`` (bytecodes); this one says how much of the target is left once the least Python
is paid.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import steps
from common import installed_runtime

from exchange._store.records import STEP_SUCCESS, Fence, StepRecord
from exchange._store.runs.runs import Holder
from exchange._store.sql.chain import register_sqlite_function
from exchange._store.sql.spelling import fence_params

TARGET_US = 20.0


def least_python_us(url: str, n: int) -> steps.Cost:
    """CPU per step of a hand-written loop: the step's statement with only the Python a durable step
    cannot go without (see the module docstring)."""
    with installed_runtime(url) as runtime:
        holder = Holder(f"bench/{os.getpid()}", None, 3600.0)
        run_id, _ = runtime.create_run("bench.many_steps", {"n": n}, holder=holder)
        fence = Fence(run_id, holder.owner, 1)
        sql = runtime.store.db.sql.steps
        statements = sql.linked(replace=False, fenced=True)  # the run's chain moved on, then the row
        conn = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
        conn.execute("PRAGMA synchronous=FULL")
        register_sqlite_function(conn)
        cur = conn.cursor()
        lock = threading.Lock()
        fenced = fence_params(fence)
        now = runtime.store.clock.now
        try:
            with steps.measured(n) as cost:
                for seq in range(1, n + 1):
                    started_at = now()
                    rec = StepRecord(seq=seq, name="bench.noop", status=STEP_SUCCESS, attempts=1,
                                     output=json.dumps(seq), skipped_ops=0, started_at=started_at,
                                     finished_at=now())
                    params = {**sql.step_params(run_id, rec), **fenced}
                    with lock:
                        cur.execute("BEGIN IMMEDIATE")
                        for statement in statements:
                            cur.execute(statement.sql, {name: params[name] for name in statement.names})
                            if cur.rowcount != 1:
                                raise RuntimeError("the fence refused the step")
                        cur.execute("COMMIT")
            return cost
        finally:
            conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", default="/dev/shm" if Path("/dev/shm").is_dir() else None,
                        help="where the SQLite files go (default /dev/shm: no fsync, so the figures are CPU)")
    args = parser.parse_args()
    paths: dict[str, Callable[[str, int], steps.Cost]] = {
        "the bare statement": steps.step_statement_floor_us,
        "the least Python around it": least_python_us,
        "a store write": steps.store_write_us,
        "a step": lambda url, n: steps.one_workflow(url, n)[0],
    }
    cpu_us: dict[str, list[float]] = {name: [] for name in paths}
    root = Path(tempfile.mkdtemp(prefix="exchange-floor-", dir=args.dir))
    try:
        for _ in range(args.rounds):
            for name, measure in paths.items():
                cpu_us[name].append(measure(f"sqlite:///{root / uuid.uuid4().hex[:8] / 'exchange.db'}",
                                            args.steps).cpu_us)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in cpu_us.items()}
    print(f"SQLite on {args.dir or tempfile.gettempdir()}, {args.steps} steps a round, {args.rounds} rounds; "
          f"CPU per step (median, and each round):")
    for name, values in cpu_us.items():
        print(f"  {name:28} {medians[name]:6.1f} µs   {' '.join(f'{v:.0f}' for v in values)}")
    # Each round's four are measured one after the other: their differences move less than the
    # figures themselves when the machine's speed moves between rounds.
    bare = cpu_us["the bare statement"]
    least = statistics.median(a - b for a, b in zip(cpu_us["the least Python around it"], bare))
    engine = statistics.median(a - b for a, b in zip(cpu_us["a step"], bare))
    print(f"beyond the bare statement (median of the rounds' differences): the least Python {least:.1f} µs, "
          f"the engine's step {engine:.1f} µs (target {TARGET_US:.0f}); the engine does {engine - least:.1f} µs "
          f"more than the least, for replay, the lease and cancel checks, the group commit and its accounting")

if __name__ == "__main__":
    main()
