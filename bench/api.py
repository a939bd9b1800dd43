"""The HTTP API under load: listing with 10,000 runs stored, HOLD through the API, SSE fan-out.

    .venv/bin/python bench/api.py [--backends sqlite,postgresql] [--stored 10000] [--requests 200]
                                  [--commands 30] [--clients 50]

A real ``exchange gateway --api 127.0.0.1:0`` on a store holding ``--stored`` finished runs (one real
run, its row copied with new ids and spread creation times) and a few live runs that fill a level and
honour HOLD / RESUME / STOP. Printed (issue 12):

- ``GET /api/v1/runs`` (limit 50, the console's listing; also ``status=SUCCESS&limit=1000`` and one
  run with ``GET /api/v1/runs/{id}``): p50/p99 over ``--requests`` calls, one client;
- ``POST /api/v1/runs/{id}/commands`` HOLD → ``GET /api/v1/runs/{id}`` shows HELD: p50/p99 over
  ``--commands`` runs (each RESUMEd after). The workflow reads its mailbox every 100 ms
  (``control.checkpoint(wait_ms=100)``), which bounds the figure from below on average 0-100 ms;
- ``--clients`` SSE clients on one run's stream while its progress changes: events each client
  received, and the delay from the change being stored (``updated_at``) to each client receiving it,
  p50/p99; the gateway's CPU during the fan-out.

"The API must not slow the engine": ``bench/steps.py --api`` measures the engine with the API
serving a console's load in the same process; compare with ``bench/steps.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import requests
from common import add_store_args, machine_note, percentile, stores, summary_ms
from sqlalchemy import insert, select

from exchange._store.tables.schema import runs as runs_table
from tests.harness import ExchangeEnv, wait_until

APP = '''
from exchange.errors import StopRequested
from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import control


@workflow(name="bench.fill")
def fill(rate=1.0):
    rt = getWorkflows()
    rt.setState("RUNNING")
    level = 0.0
    try:
        while True:
            control.checkpoint(wait_ms=100)
            level = (level + rate) % 100.0
            rt.progress("filling", {"level": level})
    except StopRequested:
        rt.setState("STOPPED")
        return {"level": level}


@workflow(name="bench.done")
def done(i=0):
    return {"i": i}
'''
_LISTENING = re.compile(r"gateway API listening on (\S+)")
SEED_BATCH = 1000


def seed_finished_runs(runtime: Any, template_id: str, count: int) -> float:
    """Copy the finished run ``template_id`` ``count`` times (new ids, creation times spread over the
    last 30 days); returns the seconds it took."""
    started = time.monotonic()
    with runtime.store.db.read() as conn:
        row = dict(conn.execute(select(runs_table).where(runs_table.c.id == template_id)).mappings().one())
    now = time.time()
    for first in range(0, count, SEED_BATCH):
        batch = []
        for i in range(first, min(count, first + SEED_BATCH)):
            created = now - 30 * 86400 * (i + 1) / count
            batch.append({**row, "id": str(uuid.uuid4()), "created_at": created, "started_at": created,
                          "finished_at": created + 0.01, "updated_at": created + 0.01, "dedup_id": None})
        with runtime.store.db.transaction("bench seed") as conn:
            conn.execute(insert(runs_table), batch)
    return time.monotonic() - started


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_gets(session: requests.Session, url: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        answer = session.get(url, timeout=30)
        times.append(time.perf_counter() - started)
        answer.raise_for_status()
    return times


def sse_client(url: str, headers: dict[str, str], stop: threading.Event, delays: list[float],
               counts: list[int], ready: threading.Barrier) -> None:
    received = 0
    with requests.get(url, headers=headers, stream=True, timeout=60) as answer:
        ready.wait()
        for line in answer.iter_lines(decode_unicode=True):
            if stop.is_set():
                break
            if line and line.startswith("data: "):
                now = time.time()
                event = json.loads(line[len("data: "):])
                received += 1
                if received > 1 and event.get("updated_at"):  # the first event is the state at connect
                    delays.append(now - datetime.fromisoformat(event["updated_at"]).timestamp())
    counts.append(received)


def measure(url: str, root: Path, args: argparse.Namespace) -> None:
    env = ExchangeEnv.create(root, store_url=url, apps_package="benchapi")
    env.write_app("fill", APP)
    token = env.cli("tokens", "create", "bench", "--role", "admin").check().stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    runtime = env.runtime()
    with env.gateway("--api", "127.0.0.1:0", log_level="WARNING") as gateway:
        gateway.start(timeout_s=60)
        found: list[str] = []
        wait_until(lambda: bool(found.extend(_LISTENING.findall(gateway.log_text())) or found), 30,
                   message="the API's address")
        base = found[0]
        session = requests.Session()
        session.headers.update(headers)
        template_id = env.start_runs("bench.done", [{"i": 1}])[0]
        wait_until(lambda: runtime.get_run(template_id, steps=False, events=False)["status"] == "SUCCESS", 30,
                   message="the template run to finish")
        seconds = seed_finished_runs(runtime, template_id, args.stored - 1)
        print(f"  stored {args.stored} finished runs in {seconds:.1f} s")

        live = env.start_runs("bench.fill", [{"rate": 1.0}] * args.live)
        wait_until(lambda: all(runtime.get_run(r, steps=False, events=False)["state"] == "RUNNING" for r in live), 30,
                   message="the live runs to run")
        timed_gets(session, f"{base}/api/v1/runs?limit=50", 10)  # warm-up
        listing = timed_gets(session, f"{base}/api/v1/runs?limit=50", args.requests)
        print(f"  GET /api/v1/runs?limit=50: {summary_ms(listing)}")
        big = timed_gets(session, f"{base}/api/v1/runs?status=SUCCESS&limit=1000", max(10, args.requests // 10))
        print(f"  GET /api/v1/runs?status=SUCCESS&limit=1000: {summary_ms(big)}")
        one = timed_gets(session, f"{base}/api/v1/runs/{live[0]}?steps=20&events=20", args.requests)
        print(f"  GET /api/v1/runs/ID?steps=20&events=20: {summary_ms(one)}")

        held: list[float] = []
        for i in range(args.commands):
            run_id = live[i % len(live)]
            sent = time.perf_counter()
            answer = session.post(f"{base}/api/v1/runs/{run_id}/commands", json={"cmd": "HOLD", "reason": "bench"},
                                  timeout=30)
            assert answer.status_code == 202, answer.text
            while session.get(f"{base}/api/v1/runs/{run_id}?steps=0&events=0", timeout=30).json()["state"] != "HELD":
                time.sleep(0.002)
            held.append(time.perf_counter() - sent)
            session.post(f"{base}/api/v1/runs/{run_id}/commands", json={"cmd": "RESUME", "reason": "bench"},
                         timeout=30).raise_for_status()
            wait_until(lambda run_id=run_id: session.get(f"{base}/api/v1/runs/{run_id}?steps=0&events=0",
                                                         timeout=30).json()["state"] == "RUNNING", 30,
                       interval_s=0.01, message="RESUME")
        print(f"  HOLD via POST /commands -> GET shows HELD: {summary_ms(held)}")

        stop = threading.Event()
        delays: list[float] = []
        counts: list[int] = []
        ready = threading.Barrier(args.clients + 1)
        clients = [threading.Thread(target=sse_client, daemon=True,
                                    args=(f"{base}/api/v1/runs/{live[0]}/stream", headers, stop, delays, counts,
                                          ready))
                   for _ in range(args.clients)]
        for client in clients:
            client.start()
        ready.wait(timeout=60)
        cpu_before, at_before = cpu_seconds(gateway.pid), time.monotonic()
        time.sleep(args.fanout_seconds)
        cpu_used = cpu_seconds(gateway.pid) - cpu_before
        elapsed = time.monotonic() - at_before
        stop.set()
        session.post(f"{base}/api/v1/runs/{live[0]}/commands", json={"cmd": "STOP", "reason": "bench end"},
                     timeout=30).raise_for_status()  # ends the streams: the run finishes
        for client in clients:
            client.join(timeout=30)
        print(f"  SSE fan-out, {args.clients} clients on one run's stream for {elapsed:.0f} s: events per client "
              f"min {min(counts) if counts else 0} max {max(counts) if counts else 0}; stored -> received "
              f"{summary_ms(delays) if delays else 'no events'}; gateway CPU {cpu_used / elapsed * 100:.0f} % "
              f"of one core (engine + {args.live} live runs + streams)")
        if delays:
            p99_ms = percentile([d * 1000 for d in delays], 99)
            print(f"  (streams of one run share one read of it every 250 ms: the delay is 0-250 ms plus delivery; "
                  f"p99 {p99_ms:.0f} ms)")
        for run_id in live[1:]:
            session.post(f"{base}/api/v1/runs/{run_id}/commands", json={"cmd": "STOP", "reason": "bench end"},
                         timeout=30)
    runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--stored", type=int, default=10_000, help="Finished runs in the store (default 10000).")
    parser.add_argument("--live", type=int, default=5, help="Live runs filling a level (default 5).")
    parser.add_argument("--requests", type=int, default=200, help="GETs per listing measurement (default 200).")
    parser.add_argument("--commands", type=int, default=30, help="HOLDs measured (default 30).")
    parser.add_argument("--clients", type=int, default=50, help="SSE clients (default 50).")
    parser.add_argument("--fanout-seconds", type=float, default=10.0, help="SSE measurement time (default 10).")
    args = parser.parse_args()
    with stores(args) as s:
        print(machine_note(s.tmp))
        for backend in s.names():
            print(f"[{backend}]")
            measure(s.fresh_url(backend), s.tmp / f"api-{backend}", args)


if __name__ == "__main__":
    main()
