"""Many long-lived waiting runs on one gateway (default settings): how many run, and what waiting costs.

    .venv/bin/python bench/scale.py [--backends sqlite,postgresql] [--runs 1000] [--idle-seconds 20]
                                    [--samples 40] [--engine key=value ...] [--loop recv-sleep|recv]

A real ``exchange gateway`` process (default config unless ``--engine`` says otherwise) gets ``--runs``
runs of the operator loop a plant runs per unit: ``recvCommand(timeoutSeconds=0.2)`` then
``sleep_chunked(total_ms=1000, chunk_ms=250)``, honouring HOLD / RESUME / STOP (``--loop recv``: the
same loop waiting in its receive alone, ``recvCommand(timeoutSeconds=1.2)`` and no sleep). Printed:

- how many reach RUNNING (and how long that took);
- the gateway's CPU while they all wait (% of one core, from /proc over ``--idle-seconds``), its RSS
  and its thread count;
- ``sendCommand(HOLD)`` from this (another) process until ``getRun`` shows HELD, for ``--samples``
  runs, p50/p90/p99 (each run is RESUMEd after). The default loop reads its mailbox only in its
  0.2 s receive windows, so a HOLD sent during its 1 s sleep waits for the next window whatever the
  engine does; the engine's own share is printed too: the time to HELD from the send, or from the
  opening of the window that took the command if that came later (each loop keeps in memory when
  its window opened, and writes it to a file only for the window that took a HOLD);
- on PostgreSQL, the connections the gateway holds;
- the floor under the CPU figure, measured after the gateway stopped: as many bare Python threads
  making the loop's timed waits and nothing else, and how far the gateway is above it.

Targets (issue 8): all RUNNING, CPU <= 5 % of a core, RSS <= 300 MB, HOLD -> HELD p99 <= 50 ms,
PostgreSQL connections <= 20.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import add_store_args, machine_note, parse_engine, percentile, stores

from exchange.errors import StoreError
from tests.harness import ExchangeEnv, operator_loop_app, wait_until

PROBE = """
import os
import time

from exchange._engine.execution.context import current_run

PHASES = os.environ.get("BENCH_PHASE_DIR")
_window_opened_at = {}


def note_window():
    # When this receive window opens: kept in memory, written out only for a window that took a
    # HOLD (a file written by every loop would itself stall the runs the bench times).
    _window_opened_at[current_run().run_id] = time.time()


def note_hold(cmd):
    if cmd and cmd["cmd"] == "HOLD" and PHASES:
        run_id = current_run().run_id
        path = os.path.join(PHASES, run_id)
        with open(path + ".tmp", "w") as f:
            f.write(repr(_window_opened_at[run_id]))
        os.replace(path + ".tmp", path)
"""

# The loops measured: (the receive's timeout in seconds, the sleep in ms; 0: none).
LOOPS = {"recv-sleep": (0.2, 1000), "recv": (1.2, 0)}


def app(loop: str) -> str:
    recv_timeout_seconds, sleep_ms = LOOPS[loop]
    return operator_loop_app("bench.waiting", prelude=PROBE, before_recv="note_window()", after_recv="note_hold(cmd)",
                             recv_timeout_seconds=recv_timeout_seconds, sleep_ms=sleep_ms)


# The same waits with nothing else: bare threads in a process of their own, each blocking on a lock
# for the loop's waits in turn, e.g. 0.2 s then 1 s (what a thread per run costs the OS and the GIL,
# before any engine).
FLOOR = """
import random, sys, threading, time
runs, seconds, waits = int(sys.argv[1]), float(sys.argv[2]), [float(w) for w in sys.argv[3].split(",")]
def loop():
    bell = threading.Lock()
    bell.acquire()
    time.sleep(random.random() * sum(waits))
    while True:
        for wait in waits:
            bell.acquire(timeout=wait)
for _ in range(runs):
    threading.Thread(target=loop, daemon=True).start()
time.sleep(3.0)
cpu, at = time.process_time(), time.monotonic()
time.sleep(seconds)
print((time.process_time() - cpu) / (time.monotonic() - at))
"""

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
START_BATCH = 1000


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def store_bytes_written(url: str, runtime: Any, pid: int) -> int:
    """PostgreSQL: the server's WAL bytes so far (pg_stat_wal); SQLite: what the gateway process has
    written to files (its log and database, /proc/PID/io)."""
    if url.startswith("postgresql"):
        from sqlalchemy import text

        with runtime.store.db.read() as conn:
            return int(conn.execute(text("SELECT wal_bytes FROM pg_stat_wal")).scalar_one())
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


def status_field(pid: int, name: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return "?"


def measure(url: str, root: Path, runs: int, idle_seconds: float, samples: int, engine: dict[str, object],
            loop: str) -> None:
    env = ExchangeEnv.create(root, store_url=url, apps_package="benchapps", engine=engine)
    env.write_app("waiting", app(loop))
    runtime = env.runtime()
    phases = root / "phases"
    phases.mkdir(parents=True, exist_ok=True)
    run_ids: list[str] = []

    def start_all() -> None:
        for first in range(0, runs, START_BATCH):  # each batch within the harness's time limit
            run_ids.extend(env.start_runs("bench.waiting", [{}] * min(START_BATCH, runs - first)))

    # Beyond a batch, the runs are queued before the gateway starts: a gateway taking thousands of
    # runs at once holds SQLite's write lock longer than another process's start waits for it.
    queued_first = runs > START_BATCH
    if queued_first:
        start_all()
    with env.gateway(log_level="WARNING") as gateway:
        gateway.start(timeout_s=120, extra_env={"BENCH_PHASE_DIR": str(phases)})
        started = time.monotonic()
        if not queued_first:
            start_all()

        def running() -> int:
            return runtime.store.runs.count_by_status().get("RUNNING", 0)

        last = (-1, time.monotonic())
        while running() < runs:  # until all run, or the count stops growing for 10 s
            count = running()
            if count != last[0]:
                last = (count, time.monotonic())
            elif time.monotonic() - last[1] > 10:
                break
            time.sleep(0.2)
        counts = runtime.store.runs.count_by_status()
        print(f"  {counts.get('RUNNING', 0)} of {runs} RUNNING after {time.monotonic() - started:.1f} s "
              f"(by status: {dict(sorted(counts.items()))})")
        time.sleep(3.0)  # let the start-up burst settle before measuring the idle cost
        written_before = store_bytes_written(url, runtime, gateway.pid)
        cpu_before, at_before = cpu_seconds(gateway.pid), time.monotonic()
        time.sleep(idle_seconds)  # the measured idle period
        written = store_bytes_written(url, runtime, gateway.pid) - written_before
        cpu_used = cpu_seconds(gateway.pid) - cpu_before
        elapsed = time.monotonic() - at_before
        gateway_percent = cpu_used / elapsed * 100
        print(f"  gateway while they wait: CPU {gateway_percent:.1f} % of one core over {elapsed:.0f} s, "
              f"RSS {status_field(gateway.pid, 'VmRSS')}, {status_field(gateway.pid, 'Threads')} threads; "
              f"store written meanwhile: {written / elapsed / 1024:.1f} kB/s "
              f"({'PostgreSQL WAL' if url.startswith('postgresql') else 'bytes the gateway wrote to files'})")
        if url.startswith("postgresql"):
            with runtime.store.db.read() as conn:
                from sqlalchemy import text

                total = conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                )).scalar_one()
            print(f"  PostgreSQL connections to the store: {int(total) - 1} from the gateway (+1 of this bench)")
        running_ids = [r.id for r in runtime.store.runs.list("RUNNING", limit=runs)]
        latencies: list[float] = []
        engine_share: list[float] = []
        for run_id in random.Random(7).sample(running_ids, min(samples, len(running_ids))):
            sent_wall = time.time()
            sent = time.monotonic()
            try:
                runtime.send_command(run_id, "HOLD", "bench", actor="bench")
                wait_until(lambda run_id=run_id: runtime.store.runs.get(run_id).state == "HELD", 30, interval_s=0.002)
                latencies.append(time.monotonic() - sent)
            except (AssertionError, StoreError) as exc:  # not HELD in 30 s, or the send itself failed
                print(f"  HOLD of {run_id} failed: {exc}")
                latencies.append(float("inf"))
                engine_share.append(float("inf"))
                continue
            # The engine's share starts when the receive window that took the HOLD opened (the run
            # wrote that down before reporting HELD), or at the send if that came later.
            held_wall = sent_wall + latencies[-1]
            noted = phases / run_id
            window_opened = float(noted.read_text()) if noted.exists() else 0.0
            noted.unlink(missing_ok=True)
            engine_share.append(max(0.0, held_wall - max(sent_wall, window_opened)))
            try:
                runtime.send_command(run_id, "RESUME", "bench", actor="bench")
            except StoreError as exc:
                print(f"  RESUME of {run_id} failed: {exc}")
            time.sleep(random.Random(run_id).uniform(0.0, 0.3))  # not in step with the runs' loops
        for label, values in (("sendCommand(HOLD) from another process -> HELD", latencies),
                              ("  of which the engine's (from the send, or the receive window that took it)",
                               engine_share)):
            if values:
                ms = [x * 1000 for x in values]
                print(f"  {label}: n={len(ms)} p50={percentile(ms, 50):.1f} ms p90={percentile(ms, 90):.1f} ms "
                      f"p99={percentile(ms, 99):.1f} ms max={max(ms):.1f} ms")
    runtime.close()
    waits = [seconds for seconds in (LOOPS[loop][0], LOOPS[loop][1] / 1000) if seconds]
    floor_percent = waits_floor(runs, idle_seconds, waits)
    print(f"  the waits alone ({runs} bare Python threads, {' then '.join(f'{w:g} s' for w in waits)} on a lock, "
          f"nothing else): {floor_percent:.1f} % of one core; the gateway above them: "
          f"{gateway_percent - floor_percent:.1f} points")


def waits_floor(runs: int, idle_seconds: float, waits: list[float]) -> float:
    """CPU (% of one core) of ``runs`` bare threads making the loop's timed ``waits`` (seconds), measured now."""
    proc = subprocess.run([sys.executable, "-c", FLOOR, str(runs), str(idle_seconds), ",".join(map(str, waits))],
                          capture_output=True, text=True, timeout=idle_seconds + 60, check=True)
    return float(proc.stdout.strip()) * 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--samples", type=int, default=40, help="Runs sent a HOLD to time it.")
    parser.add_argument("--engine", action="append", default=[], metavar="KEY=VALUE",
                        help="An [engine] setting for the gateway (default: none, the defaults).")
    parser.add_argument("--loop", choices=sorted(LOOPS), default="recv-sleep",
                        help="recv-sleep: recvCommand(0.2 s) then sleep_chunked(1000) (issue 8's loop); recv: "
                             "recvCommand(1.2 s) alone.")
    args = parser.parse_args()
    engine = parse_engine(args.engine)
    with stores(args) as s:
        print(machine_note(s.tmp))
        for backend in s.names():
            recv_timeout_seconds, sleep_ms = LOOPS[args.loop]
            shape = f"recvCommand({recv_timeout_seconds:g} s)"
            if sleep_ms:
                shape += f" + sleep_chunked({sleep_ms}, 250)"
            print(f"[{backend}] {args.runs} runs of {shape}; engine settings: {engine or 'defaults'}")
            measure(s.fresh_url(backend), s.tmp / f"scale-{backend}", args.runs, args.idle_seconds, args.samples,
                    engine, args.loop)


if __name__ == "__main__":
    main()
