"""A long soak of one gateway under a plant's steady load: does anything it holds keep growing?

    .venv/bin/python bench/soak.py [--backends sqlite|postgresql] [--minutes 20] [--rate 5] [--waiting 100]
                                   [--schedule-seconds 2] [--max-finished 2000] [--retention-minutes 1]
                                   [--sample-seconds 10] [--warmup-minutes 2] [--window-minutes 30]
                                   [--via python|api] [--csv FILE] [--gateway-env KEY=VALUE ...]
    .venv/bin/python bench/soak.py --summarize FILE.csv [--warmup-minutes 2] [--window-minutes 30]

A real ``exchange gateway`` process (log level WARNING) on a fresh store (SQLite by default; the
embedded PostgreSQL with ``--backends postgresql``) with, for ``--minutes``:

- ``--waiting`` runs of the operator loop a plant runs per unit (``recvCommand(timeoutSeconds=0.2)``
  then ``sleep_chunked(1000, 250)``, the loop of ``bench/scale.py``), started first and never ending;
- ``--rate`` short runs a second (two steps each) started from this process as a MES would: through
  the Python API (``getWorkflows().start``, the default) or ``POST /api/v1/runs`` with an engineer's
  token (``--via api``, the gateway then serves the API);
- a schedule every ``--schedule-seconds`` (a 6-field cron) starting a short run;
- retention on: ``max_finished_runs = --max-finished`` applied every ``--retention-minutes``, so it
  deletes all along (``finished_runs_days`` cannot go below an hour).

Every ``--sample-seconds`` one line goes to the CSV (``--csv``, default ``bench-out/soak-<backend>.csv``):
the gateway's RSS, RssAnon and RssFile (/proc/PID/status), open fds, threads, CPU seconds; the store's
size (SQLite: the database file and its WAL; PostgreSQL: ``pg_database_size`` and the WAL files on
disk, ``pg_ls_waldir``); this process's short runs started and finished (a run deleted by retention
was finished), start errors, the unfinished runs in the store; this process's own RSS and the load
average. At the end (or on Ctrl-C / SIGTERM) it prints a summary: RSS at the start, after the warm-up,
at each quarter and at the end, and for every measure the least-squares slope per hour of each half
and of each ``--window-minutes`` window. ``--summarize`` prints that summary from an earlier CSV.
``--gateway-env MALLOC_ARENA_MAX=2`` (say) starts the gateway with that variable set.

This process's own work is a start every 1/rate s and a sample (a few /proc reads and a query or two)
every ``--sample-seconds``; it keeps the ids of its runs only until it has seen them finish.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import ROOT, Stores, machine_note
from sqlalchemy import select, text

from exchange._store import records as r
from exchange._store.tables.schema import runs
from tests.harness import ExchangeEnv, operator_loop_app

SHORT_APP = '''
from exchange.workflows.bootstrap import step, workflow


@step(name="soak.weigh")
def weigh(i):
    return i * 2


@step(name="soak.record")
def record(i, weight):
    return {"i": i, "weight": weight}


@workflow(name="soak.short")
def short(i: int = 0):
    return record(i, weigh(i))


@workflow(name="soak.tick")
def tick(scheduled_at=None):
    return record(0, weigh(0))
'''

FIELDS = ["t_s", "rss_kb", "rss_anon_kb", "rss_file_kb", "fds", "threads", "gw_cpu_s", "db_bytes", "wal_bytes",
          "started", "finished", "failed", "start_errors", "unfinished", "bench_rss_kb", "load1"]
# What the summary reports on, with its unit and the divisor from the CSV's figure.
MEASURES = [("rss_kb", "RSS", "MB", 1024.0), ("rss_anon_kb", "RssAnon", "MB", 1024.0),
            ("rss_file_kb", "RssFile", "MB", 1024.0), ("fds", "fds", "", 1.0), ("threads", "threads", "", 1.0),
            ("db_bytes", "DB", "MB", 1024.0 * 1024), ("wal_bytes", "WAL", "MB", 1024.0 * 1024),
            ("unfinished", "unfinished runs", "", 1.0), ("bench_rss_kb", "this bench's RSS", "MB", 1024.0)]


def status_kb(pid: int | str) -> dict[str, int]:
    """VmRSS, RssAnon, RssFile (kB) and Threads from /proc/PID/status."""
    wanted = {"VmRSS", "RssAnon", "RssFile", "Threads"}
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            found[key] = int(value.split()[0])
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Soak:
    """One soak: the env, the gateway, the starts and the samples."""

    def __init__(self, url: str, root: Path, args: argparse.Namespace) -> None:
        self.url, self.root, self.args = url, root, args
        self.env = ExchangeEnv.create(root, store_url=url, apps_package="soakapps")
        self.env.write_app("short", SHORT_APP)
        self.env.write_app("waiting", operator_loop_app("soak.waiting"))
        self.api_url: str | None = None
        extra = [
            "", "[schedules.soak_tick]", 'workflow = "soak.tick"',
            f'cron = "*/{args.schedule_seconds} * * * * *"', 'catch_up = "none"',
            "", "[retention]", f"max_finished_runs = {args.max_finished}",
            f"interval_minutes = {args.retention_minutes}",
        ]
        if args.via == "api":
            import socket

            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            extra += ["", "[api]", f'listen = "127.0.0.1:{port}"']
            self.api_url = f"http://127.0.0.1:{port}/api/v1/runs"
        with open(self.env.config_path, "a", encoding="utf-8") as f:
            f.write("\n".join(extra) + "\n")
        self.runtime = self.env.runtime()
        self.pending: list[str] = []  # started, not yet seen finished
        self.started = self.finished = self.failed = self.start_errors = 0

    # ----- starting runs ------------------------------------------------------------------------
    def starter(self) -> Callable[[int], str]:
        if self.args.via == "api":
            token = self.env.cli("tokens", "create", "soak-mes", "--role", "engineer").check().stdout.split()[-1]
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            url = self.api_url
            assert url is not None

            def start_by_api(i: int) -> str:
                body = json.dumps({"workflow": "soak.short", "params": {"i": i}}).encode()
                request = urllib.request.Request(url, data=body, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=30) as response:
                    return str(json.loads(response.read())["id"])

            return start_by_api
        from exchange.workflows import apps
        from exchange.workflows.engine.instance import getWorkflows, set_runtime

        set_runtime(self.runtime)
        apps.load(self.runtime.config)
        return lambda i: getWorkflows().start("soak.short", {"i": i})

    # ----- sampling -----------------------------------------------------------------------------
    def count_finished(self) -> None:
        still: list[str] = []
        for first in range(0, len(self.pending), 500):
            chunk = self.pending[first:first + 500]
            with self.runtime.store.db.read() as conn:
                status = dict(conn.execute(select(runs.c.id, runs.c.status).where(runs.c.id.in_(chunk))).all())
            for run_id in chunk:
                done = status.get(run_id)  # None: deleted by retention, so it had finished
                if done in r.UNFINISHED_STATUSES:
                    still.append(run_id)
                else:
                    self.finished += 1
                    self.failed += done in (r.ERROR, r.CANCELLED)
        self.pending = still

    def store_bytes(self) -> tuple[int, int]:
        path = self.env.sqlite_path
        if path is not None:
            def size(p: Path) -> int:
                return p.stat().st_size if p.exists() else 0
            return size(path), size(Path(f"{path}-wal"))
        with self.runtime.store.db.read() as conn:
            db = conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
            wal = conn.execute(text("SELECT coalesce(sum(size), 0) FROM pg_ls_waldir()")).scalar_one()
        return int(db), int(wal)

    def sample(self, pid: int, t_s: float) -> dict[str, Any]:
        self.count_finished()
        gw = status_kb(pid)
        db, wal = self.store_bytes()
        counts = self.runtime.store.runs.count_by_status()
        return {
            "t_s": round(t_s, 1), "rss_kb": gw["VmRSS"], "rss_anon_kb": gw["RssAnon"], "rss_file_kb": gw["RssFile"],
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": gw["Threads"], "gw_cpu_s": round(cpu_seconds(pid), 2),
            "db_bytes": db, "wal_bytes": wal, "started": self.started, "finished": self.finished,
            "failed": self.failed, "start_errors": self.start_errors,
            "unfinished": sum(counts.get(s, 0) for s in r.UNFINISHED_STATUSES),
            "bench_rss_kb": status_kb("self")["VmRSS"], "load1": round(os.getloadavg()[0], 2),
        }

    # ----- the soak -----------------------------------------------------------------------------
    def run(self, csv_path: Path) -> list[dict[str, Any]]:
        args = self.args
        extra_env = dict(item.split("=", 1) for item in args.gateway_env)
        rows: list[dict[str, Any]] = []
        with self.env.gateway(log_level="WARNING") as gateway, open(csv_path, "w", newline="") as out:
            gateway.start(timeout_s=120, extra_env=extra_env)
            print(f"  gateway pid {gateway.pid}{' with ' + ' '.join(args.gateway_env) if args.gateway_env else ''}; "
                  f"log {gateway.log_path}; CSV {csv_path}", flush=True)
            self.env.start_runs("soak.waiting", [{}] * args.waiting)
            start = self.starter()
            writer = csv.DictWriter(out, fieldnames=FIELDS)
            writer.writeheader()
            began = time.monotonic()
            end = began + args.minutes * 60
            next_start = next_sample = began
            try:
                while True:
                    now = time.monotonic()
                    if now >= next_sample:
                        rows.append(self.sample(gateway.pid, now - began))
                        writer.writerow(rows[-1])
                        out.flush()
                        next_sample += args.sample_seconds
                        if now >= end:
                            break
                    if now >= next_start:
                        try:
                            self.pending.append(start(self.started))
                            self.started += 1
                        except Exception as exc:  # a busy store, a refused request: counted, the soak goes on
                            self.start_errors += 1
                            if self.start_errors <= 5:
                                print(f"  start failed: {exc!r}", file=sys.stderr)
                        next_start += 1 / args.rate
                        if now - next_start > 5:  # far behind (a stalled store): do not burst to catch up
                            next_start = now
                    time.sleep(max(0.0, min(next_start, next_sample) - time.monotonic()))
            except KeyboardInterrupt:
                print("  interrupted: summary of the samples so far", flush=True)
            if not gateway.alive():
                print(f"  the gateway died:\n{gateway.log_text()[-3000:]}")
            else:
                gateway.stop(timeout_s=60)
        warnings = [line for line in gateway.log_text().splitlines() if " ERROR " in line or "Traceback" in line]
        if warnings:
            print(f"  gateway log: {len(warnings)} error line(s), first: {warnings[0][:200]}")
        self.runtime.close()
        return rows


# ----- the summary ------------------------------------------------------------------------------
def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """The least-squares slope of (seconds, value) points, per hour; None with fewer than 3."""
    if len(points) < 3:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return None
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var * 3600


def at(rows: list[dict[str, Any]], t_s: float) -> dict[str, Any]:
    """The sample nearest ``t_s``."""
    return min(rows, key=lambda row: abs(float(row["t_s"]) - t_s))


def spans(last_t: float, window_minutes: float) -> list[tuple[str, float, float]]:
    """(label, from s, to s): the two halves, then each whole window of ``window_minutes`` when
    the soak lasted at least two of them."""
    found = [("1st half", 0.0, last_t / 2), ("2nd half", last_t / 2, last_t)]
    window_s = window_minutes * 60
    if last_t >= 2 * window_s:
        lo = 0.0
        while lo + window_s <= last_t + 1:
            found.append((f"{lo / 60:.0f}-{(lo + window_s) / 60:.0f} min", lo, lo + window_s))
            lo += window_s
    return found


def measure_line(rows: list[dict[str, Any]], key: str, label: str, unit: str, divisor: float,
                 periods: list[tuple[str, float, float]]) -> str:
    values = [(float(row["t_s"]), float(row[key]) / divisor) for row in rows]
    per = f" {unit}/h" if unit else "/h"
    slopes = []
    for name, lo, hi in periods:
        slope = slope_per_hour([(t, v) for t, v in values if lo <= t <= hi])
        slopes.append(f"{name} {'n/a' if slope is None else f'{slope:+.2f}'}")
    return (f"  {label}: start {values[0][1]:.1f}, end {values[-1][1]:.1f}, max {max(v for _, v in values):.1f}"
            f"{' ' + unit if unit else ''}; slope{per} " + ", ".join(slopes))


def summarize(rows: list[dict[str, Any]], warmup_minutes: float, window_minutes: float) -> None:
    """Print the summary of a soak's samples (see the module docstring)."""
    if len(rows) < 2:
        print("  fewer than two samples: no summary")
        return
    last_t = float(rows[-1]["t_s"])
    marks = [("start", 0.0), (f"after warm-up ({warmup_minutes:g} min)", warmup_minutes * 60)]
    marks += [(f"{q}/4", last_t * q / 4) for q in (1, 2, 3)] + [("end", last_t)]
    print(f"  {len(rows)} samples over {last_t / 60:.1f} min")
    print("  RSS (MB): " + ", ".join(
        f"{label} {float(at(rows, t)['rss_kb']) / 1024:.1f} @ {float(at(rows, t)['t_s']) / 60:.1f} min"
        for label, t in marks))
    periods = spans(last_t, window_minutes)
    windows = [(name, lo, hi) for name, lo, hi in periods[2:]]
    if windows:
        print("  RSS mean (MB) per window: " + ", ".join(
            f"{name} {statistics.fmean(float(r['rss_kb']) / 1024 for r in rows if lo <= float(r['t_s']) <= hi):.1f}"
            for name, lo, hi in windows))
    for key, label, unit, divisor in MEASURES:
        print(measure_line(rows, key, label, unit, divisor, periods))
    first, end = rows[0], rows[-1]
    started, finished = int(end["started"]), int(end["finished"])
    cpu = float(end["gw_cpu_s"]) - float(first["gw_cpu_s"])
    loads = [float(row["load1"]) for row in rows]
    print(f"  short runs: {started} started ({started / last_t:.2f}/s), {finished} finished "
          f"({int(end['failed'])} of them ERROR/CANCELLED), {int(end['start_errors'])} start errors; "
          f"gateway CPU {cpu / last_t * 100:.1f} % of a core; load average (1 min) "
          f"start {loads[0]:.2f}, mean {statistics.fmean(loads):.2f}, max {max(loads):.2f}, end {loads[-1]:.2f}")


def read_csv(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite", help="sqlite (default) or postgresql (embedded), or both.")
    parser.add_argument("--store-url", default=None, help="Soak this store instead (SQLAlchemy URL; must be empty).")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=5.0, help="Short runs started per second (default 5).")
    parser.add_argument("--waiting", type=int, default=100, help="Runs waiting in their operator loop (default 100).")
    parser.add_argument("--schedule-seconds", type=int, default=2, help="The schedule's period (default 2 s).")
    parser.add_argument("--max-finished", type=int, default=2000, help="[retention] max_finished_runs (default 2000).")
    parser.add_argument("--retention-minutes", type=float, default=1.0,
                        help="[retention] interval_minutes (default 1).")
    parser.add_argument("--sample-seconds", type=float, default=10.0)
    parser.add_argument("--warmup-minutes", type=float, default=2.0, help="Where the summary's 'after warm-up' is.")
    parser.add_argument("--window-minutes", type=float, default=30.0, help="The summary's slope windows (default 30).")
    parser.add_argument("--via", choices=["python", "api"], default="python",
                        help="Start the short runs through the Python API (default) or POST /api/v1/runs.")
    parser.add_argument("--csv", type=Path, default=None, help="Default bench-out/soak-<backend>.csv.")
    parser.add_argument("--gateway-env", action="append", default=[], metavar="KEY=VALUE",
                        help="An environment variable for the gateway (e.g. MALLOC_ARENA_MAX=2).")
    parser.add_argument("--summarize", type=Path, default=None, metavar="CSV", help="Summarize this CSV and exit.")
    args = parser.parse_args()
    if args.summarize:
        summarize(read_csv(args.summarize), args.warmup_minutes, args.window_minutes)
        return
    # SIGTERM (kill PID) ends the soak as Ctrl-C does: the summary, and the gateway stopped.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    s = Stores(args)
    try:
        print(machine_note(s.tmp), flush=True)
        for backend in s.names():
            csv_path = args.csv or ROOT / "bench-out" / f"soak-{backend}.csv"
            if len(s.names()) > 1 and args.csv:
                csv_path = args.csv.with_name(f"{args.csv.stem}-{backend}{args.csv.suffix}")
            csv_path.parent.mkdir(parents=True, exist_ok=True)
            print(f"[{backend}] {args.minutes:g} min: {args.rate:g} runs/s via {args.via}, {args.waiting} waiting, "
                  f"a schedule every {args.schedule_seconds} s, retention max_finished_runs={args.max_finished} "
                  f"every {args.retention_minutes:g} min", flush=True)
            rows = Soak(s.fresh_url(backend), s.tmp / f"soak-{backend}", args).run(csv_path)
            summarize(rows, args.warmup_minutes, args.window_minutes)
            print(f"  {machine_note(s.tmp)}", flush=True)
    finally:
        s.close()


if __name__ == "__main__":
    main()
