"""Durable no-op steps per second: one workflow of N steps, and N one-step workflows.

    .venv/bin/python bench/steps.py [--backends sqlite,postgresql] [--store-url URL] [--steps 1000]
                                    [--starters 8] [--api] [--rounds 3]

The one workflow's time per step is printed beside the floor, a bare-driver INSERT + COMMIT on the
same store and settings, measured in alternating rounds, and their ratio (target: 1.1x); and beside
the step's own self-fenced INSERT + COMMIT run bare (the statement's cost apart from the engine's).
The process CPU of each (steadier than the wall time: it leaves the disk's and the server's waits
out) splits a step's cost into its statement, the store's write path (the same outcomes recorded
through ``StepTable.record``, no workflow) and the engine's stepper.

Each step's outcome is committed durably (SQLite: WAL + synchronous=FULL; PostgreSQL:
synchronous_commit=on) before the next one starts. The ratios to DBOS are measured side by side,
in the same run, by ``bench/peers/compare.py`` (target: 5x for both figures).

``--api``: the HTTP API serves in the same process while the engine is measured, with a console's
load on it (the runs page's live listing stream and a listing every 0.5 s): compare with a run
without it (issue 12: the API must not slow the engine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import add_store_args, installed_runtime, machine_note, start_from_threads, store_settings, stores

from exchange._config import EngineConfig
from exchange._engine.execution.execution_lease import Lease
from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.gateway.executor import execute_run
from exchange._engine.operator.runtime import Runtime
from exchange._store.records import STEP_SUCCESS, Fence, StepRecord
from exchange._store.runs.runs import Holder
from exchange._store.sql.chain import register_sqlite_function
from exchange._store.sql.spelling import fence_params
from exchange.workflows.bootstrap import step, workflow


@step(name="bench.noop")
def noop(i: int) -> int:
    return i


@workflow(name="bench.many_steps")
def many_steps(n: int) -> int:
    for i in range(n):
        noop(i)
    return n


@workflow(name="bench.one_step")
def one_step(i: int) -> int:
    return noop(i)


@dataclass
class Cost:
    """What one operation of a measured loop cost: wall time, and the process's CPU time (user +
    system, all threads). The CPU time leaves out the waits for the disk and the server, which
    move most from round to round on a shared machine."""

    wall_us: float = 0.0
    cpu_us: float = 0.0


@contextmanager
def measured(operations: int) -> Iterator[Cost]:
    """Fill the yielded :class:`Cost` with the block's wall and CPU time per operation."""
    cost = Cost()
    started, cpu_before = time.perf_counter(), process_cpu_seconds()
    yield cost
    cost.wall_us = (time.perf_counter() - started) / operations * 1e6
    cost.cpu_us = (process_cpu_seconds() - cpu_before) / operations * 1e6


def commit_floor_us(url: str, n: int = 500) -> Cost:
    """Microseconds per one-row INSERT + COMMIT through the bare DBAPI driver on the same store and
    settings (SQLite: WAL + synchronous=FULL): the durable floor that no engine can go under."""
    from sqlalchemy import create_engine

    if url.startswith("sqlite"):
        import sqlite3

        path = Path(url[len("sqlite:///"):])
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE IF NOT EXISTS floor (k INTEGER PRIMARY KEY, v TEXT)")
        with measured(n) as cost:
            for i in range(n):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO floor (k, v) VALUES (?, ?)", (i, "x" * 40))
                conn.execute("COMMIT")
        conn.close()
        return cost
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute("CREATE TABLE IF NOT EXISTS bench_floor (k INTEGER PRIMARY KEY, v TEXT)")
        raw.commit()
        with measured(n) as cost:
            for i in range(n):
                cur.execute("INSERT INTO bench_floor (k, v) VALUES (%s, %s)", (i, "x" * 40))
                raw.commit()
        cur.execute("DROP TABLE bench_floor")
        raw.commit()
        return cost
    finally:
        raw.close()
        engine.dispose()


def step_statement_floor_us(url: str, n: int = 500) -> Cost:
    """Microseconds per step outcome written as the engine writes it (the same two fenced
    statements: the run's audit chain moved on, then the INSERT into the steps table with its link)
    but bare: the driver's BEGIN, those statements, spelled beforehand, and COMMIT, no engine. What the engine adds per
    step is the step's cost less this; what this adds to :func:`commit_floor_us` is the
    statement's own cost."""
    with installed_runtime(url) as runtime:
        holder = Holder(f"bench/{os.getpid()}", None, 3600.0)
        run_id, _ = runtime.create_run("bench.many_steps", {"n": n}, holder=holder)
        fence = Fence(run_id, holder.owner, 1)
        sql = runtime.store.db.sql.steps
        now = runtime.store.clock.now()

        def spelled(seq: int) -> list[tuple[str, Any]]:
            """The step's two statements (the run's audit chain moved on, then the row), spelled."""
            rec = StepRecord(seq=seq, name="bench.noop", status=STEP_SUCCESS, attempts=1, output=str(seq),
                             skipped_ops=0, started_at=now, finished_at=now)
            params = {**sql.step_params(run_id, rec), **fence_params(fence)}
            return [statement.spelled({name: params[name] for name in statement.names})
                    for statement in sql.linked(replace=False, fenced=True)]

        sqlite = url.startswith("sqlite")
        if sqlite:
            import sqlite3

            conn: Any = sqlite3.connect(url[len("sqlite:///"):], isolation_level=None)
            conn.execute("PRAGMA synchronous=FULL")  # WAL is the file's own setting already
            register_sqlite_function(conn)  # the chain's hash, as the store's connections have it
        else:
            conn = runtime.store.db.engine.raw_connection()  # psycopg: a transaction begins by itself
        try:
            cur = conn.cursor()
            spelled_steps = [spelled(seq) for seq in range(1, n + 1)]
            with measured(n) as cost:
                for statements in spelled_steps:
                    if sqlite:
                        cur.execute("BEGIN IMMEDIATE")
                    for statement, values in statements:
                        cur.execute(statement, values)
                        assert cur.rowcount == 1
                    if sqlite:
                        cur.execute("COMMIT")
                    else:
                        conn.commit()
            return cost
        finally:
            conn.close()


@contextmanager
def api_load(runtime: Runtime, enabled: bool) -> Iterator[None]:
    """With ``enabled``: the API serving ``runtime`` on a free port, watched like an open console."""
    if not enabled:
        yield
        return
    import requests

    from exchange._api.server import ApiServer
    from exchange._auth.accounts import Accounts
    from exchange._config import ApiConfig

    server = ApiServer(runtime, ApiConfig(), "127.0.0.1:0")
    base = server.start()
    token = Accounts(runtime.store.accounts).create_token(f"bench{uuid.uuid4().hex[:6]}", "viewer", actor="bench")
    headers = {"Authorization": f"Bearer {token}"}
    stop = threading.Event()

    def listing_stream() -> None:
        with requests.get(f"{base}/api/v1/streams/runs?since=1h", headers=headers, stream=True, timeout=60) as answer:
            for _line in answer.iter_lines():
                if stop.is_set():
                    return

    def listing_polls() -> None:
        while not stop.wait(0.5):
            requests.get(f"{base}/api/v1/runs?limit=50", headers=headers, timeout=30).raise_for_status()

    threads = [threading.Thread(target=target, daemon=True) for target in (listing_stream, listing_polls)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        server.stop()


def store_write_us(url: str, n: int = 500) -> Cost:
    """The cost per step outcome recorded through the store alone (``StepTable.record``: the same
    statement, bound and sent by the group commit), no workflow: what lies between the bare
    statement and a step is split into the store's write path and the engine's stepper."""
    with installed_runtime(url) as runtime:
        holder = Holder(f"bench/{os.getpid()}", None, 3600.0)
        run_id, _ = runtime.create_run("bench.many_steps", {"n": n}, holder=holder)
        fence = Fence(run_id, holder.owner, 1)
        now = runtime.store.clock.now()
        records = [StepRecord(seq=seq, name="bench.noop", status=STEP_SUCCESS, attempts=1, output=str(seq),
                              skipped_ops=0, started_at=now, finished_at=now) for seq in range(1, n + 1)]
        with measured(n) as cost:
            for rec in records:
                runtime.store.steps.record(fence, rec, replace=False)
        return cost


def held_run(runtime: Runtime, n: int) -> Lease:
    """A new run of ``bench.many_steps`` (``n`` steps), held by this process to execute here."""
    holder = Holder(f"bench/{os.getpid()}", None, runtime.config.engine.lease_seconds)
    run_id, _ = runtime.create_run("bench.many_steps", {"n": n}, holder=holder)
    return Lease.pending(Fence(run_id, holder.owner, 1), holder.lease_seconds)


def one_workflow(url: str, n: int, api: bool = False) -> tuple[Cost, str]:
    """The cost per step of one run of ``n`` steps (its start and end included), executed on this
    thread; plus the store settings."""
    with installed_runtime(url) as runtime, api_load(runtime, api):
        execute_run(runtime, held_run(runtime, 10))
        with measured(n) as cost:
            lease = held_run(runtime, n)
            status = execute_run(runtime, lease)
        assert status == "SUCCESS", status
        assert len(runtime.store.steps.load(lease.run_id)) == n
        return cost, store_settings(runtime)


def many_workflows(url: str, n: int, workers: int, api: bool = False) -> tuple[float, float]:
    """(seconds to enqueue ``n`` one-step runs, seconds for a dispatcher to execute them all)."""
    with installed_runtime(url, workers=workers, dispatch_poll_ms=20) as runtime, api_load(runtime, api):
        started = time.perf_counter()
        ids = [runtime.start("bench.one_step", {"i": i}) for i in range(n)]
        enqueued = time.perf_counter() - started
        dispatcher = Dispatcher(runtime)
        started = time.perf_counter()
        dispatcher.start()
        while runtime.store.runs.count_by_status().get("SUCCESS", 0) < n:
            time.sleep(0.05)  # coarse: a busy poll here would steal CPU from the workers
        executed = time.perf_counter() - started
        dispatcher.stop()
        assert runtime.get_run(ids[-1], events=False)["result"] == n - 1
        return enqueued, executed


@dataclass
class Throughput:
    """One-step workflows started while a dispatcher executes them (:func:`started_and_finished`)."""

    start_s: float  # to start them all
    total_s: float  # from the first start to the last run's end
    cpu_s_per_workflow: float  # this process's CPU (all threads, user + system) meanwhile
    server_cpu_s_per_workflow: float | None  # the store's server's CPU meanwhile, when it is known


def started_and_finished(
    url: str, n: int, workers: int, starters: int = 1, server_cpu: Callable[[], float | None] = lambda: None,
) -> Throughput:
    """DBOS's way (``bench/peers/dbos_steps.py``): with a dispatcher already executing, start ``n``
    one-step runs and wait for every result; ``starters`` threads start them at once, each one after
    another (1: from this thread alone). The end is the store's ``finished_at`` of the last run, so
    the polling here adds nothing to it; the CPU time (all threads, user + system, polling included)
    moves less than the wall time on a busy box. ``server_cpu``: the store server's CPU seconds so
    far (see ``Stores.server_cpu_seconds``), read at the same moments as this process's."""
    with installed_runtime(url, workers=workers) as runtime:
        dispatcher = Dispatcher(runtime)
        dispatcher.start()
        try:
            runtime.wait_for(runtime.start("bench.one_step", {"i": -1}), 30)  # warm-up: connections, statements
            began_at, started = runtime.store.clock.now(), time.perf_counter()
            cpu_before, server_before = process_cpu_seconds(), server_cpu()
            ids = start_from_threads(n, starters, lambda i: runtime.start("bench.one_step", {"i": i}))
            start_s = time.perf_counter() - started
            while runtime.store.runs.count_by_status().get("SUCCESS", 0) < n + 1:
                time.sleep(0.02)
            cpu_s = (process_cpu_seconds() - cpu_before) / n
            server_after = server_cpu()
            server_s = None if server_before is None or server_after is None else (server_after - server_before) / n
            with runtime.store.db.read() as conn:
                from sqlalchemy import func, select

                from exchange._store.tables.schema import runs

                ended_at = conn.execute(select(func.max(runs.c.finished_at))).scalar_one()
            assert runtime.get_run(ids[-1], events=False)["result"] == n - 1
            return Throughput(start_s, float(ended_at) - began_at, cpu_s, server_s)
        finally:
            dispatcher.stop()


def server_note(figures: Throughput) -> str:
    if figures.server_cpu_s_per_workflow is None:
        return ""
    return f", the PostgreSQL server's {figures.server_cpu_s_per_workflow * 1e3:.2f} ms"


def median_of(costs: list[Cost], field: str) -> float:
    return statistics.median(getattr(cost, field) for cost in costs)


def process_cpu_seconds() -> float:
    """This process's CPU time, all threads, user + system: the kernel's per-process clock, in ns
    (``os.times()`` counts 10 ms ticks)."""
    return time.process_time()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--steps", type=int, default=1000, help="Steps in the one workflow, and runs (default 1000).")
    parser.add_argument("--workers", type=int, default=EngineConfig().workers,
                        help="Dispatcher workers for the many-runs case (default: the engine's default).")
    parser.add_argument("--starters", type=int, default=8,
                        help="Threads starting the one-step workflows at once, measured besides one (1: only one).")
    parser.add_argument("--api", action="store_true", help="Serve the HTTP API with a console's load meanwhile.")
    parser.add_argument("--rounds", type=int, default=3,
                        help="Rounds of (bare commit floor, one workflow of N steps), alternated (default 3).")
    args = parser.parse_args()
    with stores(args) as s:
        print(machine_note(s.tmp) + ("; the HTTP API serving a console's load in this process" if args.api else ""))
        for backend in s.names():
            # The floor and the steps alternate, round by round, on the same disk: a machine whose
            # speed changes meanwhile moves both, and the ratio of each round stays comparable.
            floors: list[Cost] = []
            statements: list[Cost] = []
            writes: list[Cost] = []
            steps: list[Cost] = []
            settings = ""
            for _ in range(max(1, args.rounds)):
                floors.append(commit_floor_us(s.fresh_url(backend)))
                statements.append(step_statement_floor_us(s.fresh_url(backend)))
                writes.append(store_write_us(s.fresh_url(backend)))
                step_cost, settings = one_workflow(s.fresh_url(backend), args.steps, args.api)
                steps.append(step_cost)
            ratios = [step.wall_us / floor.wall_us for step, floor in zip(steps, floors)]
            statement_ratios = [step.wall_us / statement.wall_us for step, statement in zip(steps, statements)]
            step_us = median_of(steps, "wall_us")
            print(f"[{backend}] {settings}; bare-driver INSERT+COMMIT floor {median_of(floors, 'wall_us'):.0f} us; "
                  f"the step's own fenced INSERT+COMMIT bare {median_of(statements, 'wall_us'):.0f} us (medians of "
                  f"{len(floors)} rounds)")
            print(f"[{backend}] one workflow of {args.steps} steps: {step_us:.0f} us/step, "
                  f"{1e6 / step_us:.0f} steps/s (median of {len(steps)} rounds); "
                  f"step / floor {statistics.median(ratios):.2f}x (median of the rounds' ratios: "
                  f"{', '.join(f'{ratio:.2f}' for ratio in ratios)}; target <= 1.10x); step / its statement "
                  f"bare {statistics.median(statement_ratios):.2f}x "
                  f"({', '.join(f'{ratio:.2f}' for ratio in statement_ratios)})")
            # The CPU time leaves the fsync's and the server's waits out: what a step costs beyond
            # its statement is the engine's Python (issue 31: <= 20 us), split into the store's
            # write path (binding, the group commit) and the stepper (replay, encoding, the call).
            engine_us = [step.cpu_us - statement.cpu_us for step, statement in zip(steps, statements)]
            store_us = [write.cpu_us - statement.cpu_us for write, statement in zip(writes, statements)]
            stepper_us = [step.cpu_us - write.cpu_us for step, write in zip(steps, writes)]
            print(f"[{backend}] process CPU per operation (medians): floor commit "
                  f"{median_of(floors, 'cpu_us'):.0f} us, the step's statement bare "
                  f"{median_of(statements, 'cpu_us'):.0f} us, the same through the store "
                  f"{median_of(writes, 'cpu_us'):.0f} us, a step {median_of(steps, 'cpu_us'):.0f} us; "
                  f"the engine's own per step (a step less its statement, round by round): "
                  f"{statistics.median(engine_us):.0f} us ({', '.join(f'{us:.0f}' for us in engine_us)}): "
                  f"the store's write path {statistics.median(store_us):.0f} us, the stepper "
                  f"{statistics.median(stepper_us):.0f} us")
            enqueued, executed = many_workflows(s.fresh_url(backend), args.steps, args.workers, args.api)
            print(f"[{backend}] {args.steps} one-step workflows queued first: enqueue {enqueued:.3f} s "
                  f"({args.steps / enqueued:.0f} runs/s); execute with {args.workers} workers {executed:.3f} s "
                  f"({args.steps / executed:.0f} workflows/s = steps/s, {executed / args.steps * 1e6:.0f} us "
                  f"per workflow)")
            one = started_and_finished(s.fresh_url(backend), args.steps, args.workers,
                                       server_cpu=s.server_cpu_seconds)
            print(f"[{backend}] {args.steps} one-step workflows started one after another while a dispatcher "
                  f"runs: starts {one.start_s:.3f} s ({one.start_s / args.steps * 1e6:.0f} us each), first start "
                  f"to last end {one.total_s:.3f} s ({args.steps / one.total_s:.0f} workflows/s); process CPU "
                  f"{one.cpu_s_per_workflow * 1e3:.2f} ms per workflow{server_note(one)}")
            if args.starters > 1:
                many = started_and_finished(s.fresh_url(backend), args.steps, args.workers, args.starters,
                                            server_cpu=s.server_cpu_seconds)
                print(f"[{backend}] the same, started by {args.starters} threads at once: starts "
                      f"{many.start_s:.3f} s, first start to last end {many.total_s:.3f} s "
                      f"({args.steps / many.total_s:.0f} workflows/s); process CPU "
                      f"{many.cpu_s_per_workflow * 1e3:.2f} ms per workflow{server_note(many)}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
