"""What an idle operator loop costs the store: rows, bytes and commits per hour.

    .venv/bin/python bench/idle_store.py [--backends sqlite,postgresql] [--store-url URL] [--seconds 60]

The workflow is the operator-control pattern at rest: ``recvCommand(timeoutSeconds=0.2)`` then
``sleep_chunked(total_ms=--sleep-ms, chunk_ms=250)``, forever, with nobody sending anything. It runs
for ``--seconds`` (after a short warm-up) and the growth is extrapolated to one hour. Rows are counted
per table; bytes are the SQLite file after a WAL checkpoint (and the WAL file, which SQLite reuses
rather than grows), or the PostgreSQL relations (tables + indexes + TOAST) and the WAL it generated.
Commits are counted on the store's engine.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from common import add_store_args, machine_note, make_runtime, stores
from sqlalchemy import event, text

from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.operator.runtime import Runtime
from exchange._store.tables.schema import metadata
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows, set_runtime
from exchange.workflows.steps.sleep import sleep_chunked

LOOPS = [0]


@workflow(name="bench.idle")
def idle(poll_seconds: float, sleep_ms: int, chunk_ms: int) -> int:
    rt = getWorkflows()
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=poll_seconds)
        if cmd is not None and cmd["cmd"] == "STOP":
            return LOOPS[0]
        sleep_chunked(total_ms=sleep_ms, chunk_ms=chunk_ms)
        LOOPS[0] += 1


def snapshot(runtime: Runtime) -> dict[str, Any]:
    db = runtime.store.db
    with db.read() as conn:
        rows = {t.name: int(conn.execute(text(f"SELECT count(*) FROM {t.name}")).scalar_one())
                for t in metadata.sorted_tables}
    snap: dict[str, Any] = {"rows": rows, "at": time.monotonic(), "loops": LOOPS[0]}
    if db.backend.name == "sqlite":
        path = Path(db.engine.url.database or "")
        with db.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            page = int(conn.exec_driver_sql("PRAGMA page_size").scalar_one())
            free = int(conn.exec_driver_sql("PRAGMA freelist_count").scalar_one())
        wal = Path(f"{path}-wal")
        snap["bytes"] = path.stat().st_size
        snap["used_bytes"] = path.stat().st_size - free * page
        snap["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
    else:
        with db.read() as conn:
            snap["bytes"] = int(conn.execute(text(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND n.nspname = 'public' AND c.relname LIKE 'exchange_%'"
            )).scalar_one())
            snap["wal_lsn"] = str(conn.execute(text("SELECT pg_current_wal_lsn()")).scalar_one())
            snap["dead_tuples"] = int(conn.execute(text(
                "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relname LIKE 'exchange_%'"
            )).scalar_one())
    return snap


def wal_bytes_between(runtime: Runtime, lsn_a: str, lsn_b: str) -> int:
    with runtime.store.db.read() as conn:
        return int(conn.execute(text("SELECT pg_wal_lsn_diff(:b, :a)"), {"a": lsn_a, "b": lsn_b}).scalar_one())


def measure(url: str, seconds: float, poll_seconds: float, sleep_ms: int, chunk_ms: int) -> None:
    runtime = make_runtime(url, workers=2)
    set_runtime(runtime)
    commits = Counter()  # "run": the run's own writes; "gateway": lease renewals and other upkeep

    def count() -> None:
        commits["run" if threading.current_thread().name.startswith("exchange-run") else "gateway"] += 1

    event.listen(runtime.store.db.engine, "commit", lambda _conn: count())
    db = runtime.store.db
    raw_unit = db.unit

    def counted_unit(*args: Any, **kwargs: Any) -> Any:  # the hot path commits without SQLAlchemy
        result = raw_unit(*args, **kwargs)
        count()
        return result

    db.unit = counted_unit  # type: ignore[method-assign]
    dispatcher = Dispatcher(runtime, claim=False)
    LOOPS[0] = 0
    try:
        run_id = dispatcher.create_and_submit(
            "bench.idle", {"poll_seconds": poll_seconds, "sleep_ms": sleep_ms, "chunk_ms": chunk_ms}
        )
        dispatcher.start()
        while LOOPS[0] < 2:
            time.sleep(0.05)
        before, commits_before = snapshot(runtime), Counter(commits)
        time.sleep(seconds)  # the measured idle period
        after, commits_after = snapshot(runtime), Counter(commits)
        scale = 3600 / (after["at"] - before["at"])
        loops = after["loops"] - before["loops"]
        grown = {t: after["rows"][t] - before["rows"][t] for t in after["rows"]}
        print(f"  {loops} loops in {after['at'] - before['at']:.1f} s ({loops * scale:.0f} per hour)")
        print(f"  rows per hour: {sum(grown.values()) * scale:.0f} in all "
              + ", ".join(f"{t}={n * scale:+.0f}" for t, n in grown.items()))
        run_commits = commits_after["run"] - commits_before["run"]
        gateway_commits = commits_after["gateway"] - commits_before["gateway"]
        print(f"  commits per hour by the run: {run_commits * scale:.0f} ({run_commits / max(loops, 1):.2f} per "
              f"loop); by the gateway's lease keeping (one per renewal, whatever the number of runs): "
              f"{gateway_commits * scale:.0f}")
        if "wal_lsn" in after:
            wal = wal_bytes_between(runtime, before["wal_lsn"], after["wal_lsn"])
            print(f"  relation bytes per hour: {(after['bytes'] - before['bytes']) * scale:+.0f} "
                  f"(now {after['bytes']} bytes; dead tuples {after['dead_tuples']}, autovacuum reclaims them)")
            print(f"  WAL generated per hour: {wal * scale / 1e6:.1f} MB")
        else:
            print(f"  database file bytes per hour: {(after['bytes'] - before['bytes']) * scale:+.0f} "
                  f"(used {(after['used_bytes'] - before['used_bytes']) * scale:+.0f}; file now "
                  f"{after['bytes']} bytes; WAL file {after['wal_bytes']} bytes after checkpoint)")
        runtime.send_command(run_id, "STOP", reason="bench done")
        done = runtime.wait_for(run_id, 30)
        assert done["status"] == "SUCCESS", done
    finally:
        dispatcher.stop()
        runtime.close()
        set_runtime(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--seconds", type=float, default=60.0, help="Measured idle time (default 60).")
    parser.add_argument("--poll-seconds", type=float, default=0.2)
    parser.add_argument("--sleep-ms", type=int, default=1000)
    parser.add_argument("--chunk-ms", type=int, default=250)
    args = parser.parse_args()
    with stores(args) as s:
        print(machine_note(s.tmp))
        for backend in s.names():
            print(f"[{backend}] loop: recvCommand(timeoutSeconds={args.poll_seconds}) + "
                  f"sleep_chunked(total_ms={args.sleep_ms}, chunk_ms={args.chunk_ms}), {args.seconds:.0f} s")
            measure(s.fresh_url(backend), args.seconds, args.poll_seconds, args.sleep_ms, args.chunk_ms)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
