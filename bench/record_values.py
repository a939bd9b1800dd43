"""What the batch record's process values cost a gateway (issue 44, item 2): the ``[record]`` sampler.

    .venv/bin/python bench/record_values.py [--tags 50] [--runs 10] [--interval-ms 100]
        [--changing 0.1] [--seconds 10]

A simulated Modbus PLC in a child process (as a PLC on its own machine: it does not take this
process's CPU) holds ``--tags`` Float32 holding registers; a thread there changes ``--changing`` of
them (a fraction) every interval, the others stay flat. This process is a gateway: a runtime and its
dispatcher on a fresh SQLite store (WAL, ``synchronous=FULL``), ``--runs`` runs of one workflow
waiting in ``recv`` (they cost nothing while they wait), and ``[record] tags`` = every tag, sampled
every ``--interval-ms``.

Measured over ``--seconds`` twice, the same runs waiting: without the sampler (the baseline) and
with it. Printed:

- the gateway's CPU (user + system of this process) in % of one core, both times, and the
  sampler's share per sampled tag (the difference divided by the tags);
- tags read per second (one batched read per interval serves every run), rows written per second
  (a row per run and tag when the value changed, or at the keep-alive), transactions per second;
- bytes per row in the store: the table and its index (SQLite's ``dbstat``) over the rows.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sqlite3
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from exchange._config import config_from_dict  # noqa: E402
from exchange._engine.gateway.dispatcher import Dispatcher  # noqa: E402
from exchange._engine.operator.runtime import Runtime  # noqa: E402
from exchange._plant.record_values import ValueSampler  # noqa: E402
from exchange._values import DataType  # noqa: E402
from exchange.workflows._services import TAGS, preflight  # noqa: E402
from exchange.workflows.bootstrap import getWorkflows, workflow  # noqa: E402
from exchange.workflows.engine.instance import set_runtime  # noqa: E402
from simulators.servers.base import SimPoint  # noqa: E402


@workflow(name="bench.batch")
def batch() -> None:
    getWorkflows().recv("done", timeoutSeconds=3600)


def _plc(tags: int, changing: float, interval_s: float, pipe: Connection) -> None:
    """The child process: the PLC, and its program moving ``changing`` of the values each interval."""
    from simulators.servers.modbus import ModbusSimServer

    server = ModbusSimServer([SimPoint(f"HRF{1 + 2 * i}", DataType.FLOAT32, 20.0) for i in range(tags)])
    server.start()
    pipe.send(server.port)
    moving = max(0, round(tags * changing))
    stop = threading.Event()

    def program() -> None:
        step = 0
        while not stop.wait(interval_s):
            step += 1
            for i in range(moving):
                server.set(f"HRF{1 + 2 * i}", 20.0 + step % 50 + i / 10)

    threading.Thread(target=program, daemon=True).start()
    pipe.recv()  # until the bench is done
    stop.set()
    server.stop()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _measure(seconds: float) -> float:
    """This process's CPU over ``seconds``, in % of one core."""
    cpu, wall = _cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return (_cpu_seconds() - cpu) / (time.monotonic() - wall) * 100


def _table_bytes(path: Path) -> int:
    """The record values' table and index in the SQLite file (dbstat), after a checkpoint."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        try:
            rows = conn.execute("SELECT name, SUM(pgsize) FROM dbstat WHERE name IN "
                                "('exchange_record_values', 'ix_exchange_record_values_run') GROUP BY name").fetchall()
        except sqlite3.OperationalError:  # no dbstat in this SQLite: the file's growth is not this table's alone
            return -1
    return sum(int(size) for _name, size in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tags", type=int, default=50)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--changing", type=float, default=0.1, help="fraction of the tags that change each interval")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()

    context = multiprocessing.get_context("spawn")
    here, there = context.Pipe()
    plc = context.Process(target=_plc, args=(args.tags, args.changing, args.interval_ms / 1000, there), daemon=True)
    plc.start()
    port = here.recv()
    folder = Path(tempfile.mkdtemp(prefix="bench-record-values-"))
    paths = [f"[plant]Line/T{i}" for i in range(args.tags)]
    config = config_from_dict({
        "store": {"url": f"sqlite:///{folder / 'exchange.db'}"},
        "apps": {"paths": []},
        "engine": {"node_id": "bench"},
        "devices": {"plc": {"driver": "modbus", "host": "127.0.0.1", "port": port}},
        "tags": {path: {"device": "plc", "address": f"HRF{1 + 2 * i}", "access": "ro"}
                 for i, path in enumerate(paths)},
        "record": {"tags": paths, "interval_ms": args.interval_ms},
    }, base_dir=folder)
    runtime = Runtime(config)
    set_runtime(runtime)
    preflight(runtime)
    dispatcher = Dispatcher(runtime)
    dispatcher.start()
    run_ids = [runtime.start("bench.batch", {}) for _ in range(args.runs)]
    while runtime.local_runs.count() < args.runs:
        time.sleep(0.01)
    runtime.services.get(TAGS).read(paths)  # connected before either measurement

    baseline = _measure(args.seconds)
    sampler = ValueSampler(runtime, runtime.services.get(TAGS), config.record)
    sampler.start()
    time.sleep(args.interval_ms / 1000 * 3)  # the first rows (every value is new) out of the way
    ticks, reads, rows = sampler.ticks, sampler.reads, sampler.rows
    read_s, store_s = sampler.read_seconds, sampler.store_seconds
    wall = time.monotonic()
    sampling = _measure(args.seconds)
    elapsed = time.monotonic() - wall
    ticks, reads, rows = sampler.ticks - ticks, sampler.reads - reads, sampler.rows - rows
    read_s, store_s = sampler.read_seconds - read_s, sampler.store_seconds - store_s
    sampler.stop()
    for run_id in run_ids:
        runtime.send(run_id, "done", True)
    for run_id in run_ids:
        runtime.wait_for(run_id, 30)
    dispatcher.stop()
    total_rows = sum(len(runtime.store.record_values.of_run(run_id)) for run_id in run_ids)
    runtime.close()
    here.send("done")
    plc.join(10)
    table_bytes = _table_bytes(folder / "exchange.db")

    share = sampling - baseline
    print(f"record values: {args.tags} tags x {args.runs} runs, every {args.interval_ms} ms, "
          f"{args.changing:.0%} of the tags changing each interval, {args.seconds:.0f} s each (SQLite)")
    print(f"  gateway CPU: {baseline:.1f} % without the sampler, {sampling:.1f} % with it: "
          f"{share:.1f} % for {args.tags} tags, {share / args.tags:.3f} % of a core per sampled tag "
          f"({share / args.tags * args.interval_ms / 1000:.4f} % per tag at 1 sample/s)")
    print(f"  {ticks / elapsed:.1f} reads/s of {args.tags} tags ({reads / elapsed:.0f} tag values/s), "
          f"{rows / elapsed:.0f} rows/s written in {ticks / elapsed:.1f} transactions/s "
          f"({rows / max(1, ticks):.1f} rows per transaction; {args.runs * args.tags} run-tags sampled)")
    print(f"  per interval: the read {read_s / max(1, ticks) * 1000:.2f} ms, the transaction "
          f"{store_s / max(1, ticks) * 1000:.2f} ms (wall time)")
    if table_bytes > 0:
        print(f"  store: {table_bytes / total_rows:.0f} bytes per row (table and index, {total_rows} rows, "
              f"{table_bytes / 1e6:.1f} MB)")
    else:
        print(f"  store: {total_rows} rows (this SQLite has no dbstat: bytes per row not measured)")


if __name__ == "__main__":
    main()
