"""Retention while the engine is busy: deletes per second, and what it costs the runs.

    .venv/bin/python bench/retention.py [--backends sqlite,postgresql] [--finished 20000] [--busy 8]

A real gateway runs ``--busy`` workflows that record steps as fast as they can; the store also holds
``--finished`` finished runs, each with 5 steps and 5 events (bulk-inserted, finished 60 days ago).
Printed: the engine's steps/s before and while ``exchange retention apply`` (this process, with
``finished_runs_days = 30``) deletes them, and the deletes per second (issue 13).
"""

from __future__ import annotations

import argparse
import time
import uuid
from pathlib import Path

from common import add_store_args, machine_note, stores
from sqlalchemy import func, insert, select, update

from exchange._config import RetentionConfig
from exchange._engine.gateway.retention import DAY_SECONDS, Retention
from exchange._store import records as r
from exchange._store.tables.schema import events, runs, steps
from tests.harness import ExchangeEnv, wait_until

APP = '''
from exchange.workflows.bootstrap import step, workflow


@step(name="bench.tick")
def tick(i):
    return i


@workflow(name="bench.busy")
def busy(n=10**9):
    for i in range(n):
        tick(i)
'''
SEED_BATCH = 1000


def seed(env: ExchangeEnv, runtime: object, count: int) -> None:
    store = runtime.store  # type: ignore[attr-defined]
    (template_id,) = env.start_runs("bench.busy", [{"n": 1}])
    with store.db.read() as conn:
        template = dict(conn.execute(select(runs).where(runs.c.id == template_id)).mappings().one())
    old = store.clock.now() - 60 * DAY_SECONDS
    with store.db.transaction("bench seed") as conn:
        conn.execute(update(runs).where(runs.c.id == template_id).values(status=r.CANCELLED, finished_at=old))
    for first in range(0, count, SEED_BATCH):
        ids = [str(uuid.uuid4()) for _ in range(min(SEED_BATCH, count - first))]
        with store.db.transaction("bench seed") as conn:
            conn.execute(insert(runs), [{**template, "id": i, "status": r.SUCCESS, "dedup_id": None,
                                         "finished_at": old, "updated_at": old} for i in ids])
            conn.execute(insert(steps), [{"run_id": i, "seq": s, "name": "bench.tick", "status": "SUCCESS",
                                          "attempts": 1, "skipped_ops": 0, "started_at": old, "output": "1"}
                                         for i in ids for s in range(1, 6)])
            conn.execute(insert(events), [{"run_id": i, "kind": "status", "at": old} for i in ids for _ in range(5)])


def steps_per_second(runtime: object, busy: list[str], seconds: float) -> float:
    """Steps the busy runs recorded per second (the newest sequence number of each: an indexed read)."""
    store = runtime.store  # type: ignore[attr-defined]

    def recorded() -> int:
        with store.db.read() as conn:
            return sum(int(conn.execute(select(func.max(steps.c.seq)).where(steps.c.run_id == run_id)).scalar() or 0)
                       for run_id in busy)

    before, started = recorded(), time.monotonic()
    time.sleep(seconds)
    return (recorded() - before) / (time.monotonic() - started)


def measure(url: str, root: Path, args: argparse.Namespace) -> None:
    env = ExchangeEnv.create(root, store_url=url, apps_package="benchretention")
    env.write_app("busy", APP)
    runtime = env.runtime()
    with env.gateway(log_level="WARNING") as gateway:
        gateway.start(timeout_s=60)
        busy = env.start_runs("bench.busy", [{}] * args.busy)
        seed(env, runtime, args.finished)
        wait_until(lambda: runtime.store.lookup.count_by_status().get("RUNNING", 0) >= args.busy, 30, message="busy")
        quiet = steps_per_second(runtime, busy, 3.0)
        retention = Retention(runtime, RetentionConfig(finished_runs_days=30))
        report_box: list[object] = []
        started = time.monotonic()
        import threading

        worker = threading.Thread(target=lambda: report_box.append(retention.apply()))
        worker.start()
        during = steps_per_second(runtime, busy, 2.0)
        worker.join()
        elapsed = time.monotonic() - started
        report = report_box[0]
        deleted = report.by_age  # type: ignore[attr-defined]
        print(f"  deleted {deleted} runs (+{deleted * 10} steps and events) in {elapsed:.1f} s: "
              f"{deleted / elapsed:.0f} runs/s; engine {quiet:.0f} steps/s before, {during:.0f} steps/s "
              f"while deleting ({args.busy} busy runs)")
        gateway.stop()
    runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--finished", type=int, default=20_000, help="Finished runs to delete (default 20000).")
    parser.add_argument("--busy", type=int, default=8, help="Runs recording steps meanwhile (default 8).")
    args = parser.parse_args()
    with stores(args) as s:
        print(machine_note(s.tmp))
        for backend in s.names():
            print(f"[{backend}]")
            measure(s.fresh_url(backend), s.tmp / f"retention-{backend}", args)


if __name__ == "__main__":
    main()
