"""Trigger latency and schedule lateness with a real gateway (issue 13).

    .venv/bin/python bench/plant_features.py [--edges 30] [--ticks 20]

- Trigger: a coil of a real Modbus server (this process) goes high; the time until the triggered run
  is RUNNING (``started_at``, store clock, same machine) p50/p99 over ``--edges`` edges
  (``poll_ms = 50``: the poll bounds it from below, 0-50 ms).
- Schedule: a 6-field cron every second; each run's ``started_at`` minus its tick, p50/p99 over
  ``--ticks`` ticks.
SQLite store (``--store-url`` for another).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path

from common import percentile

from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.harness import ExchangeEnv, wait_until

APP = '''
from exchange.workflows.bootstrap import workflow


@workflow(name="bench.pressed")
def pressed(trigger_at=None):
    return trigger_at


@workflow(name="bench.tick")
def tick(scheduled_at=None):
    return scheduled_at
'''


def _config(port: int) -> str:
    return f"""
[devices.plc]
driver = "modbus"
host = "127.0.0.1"
port = {port}
unit_id = 1

[tags."[b]Start"]
device = "plc"
address = "C1"

[triggers.start]
tag = "[b]Start"
workflow = "bench.pressed"
poll_ms = 50

[schedules.every_second]
workflow = "bench.tick"
cron = "* * * * * *"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=30)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--store-url", default=None)
    args = parser.parse_args()
    root = Path(f"/tmp/exchange-bench-plant-{time.time_ns()}")
    plc = ModbusSimServer([SimPoint("C1", DataType.BOOLEAN, False)])
    plc.start()
    env = ExchangeEnv.create(root, store_url=args.store_url, apps_package="benchplant")
    env.write_app("plant", APP)
    with env.config_path.open("a", encoding="utf-8") as file:
        file.write(_config(plc.port))
    runtime = env.runtime()
    latencies: list[float] = []
    with env.gateway(log_level="WARNING") as gateway:
        gateway.start(timeout_s=60)
        wait_until(lambda: runtime.store.plant.get("trigger", "start") is not None, 30, message="the trigger")
        for edge in range(1, args.edges + 1):
            pressed_at = time.time()
            plc.set("C1", True)

            def started(edge: int = edge) -> bool:
                runs = runtime.listRuns(workflow="bench.pressed", limit=edge + 5)
                return len(runs) >= edge and runs[0]["started_at"] is not None

            wait_until(started, 30, interval_s=0.002, message="the triggered run")
            first = runtime.listRuns(workflow="bench.pressed", limit=1)[0]
            latencies.append(datetime.fromisoformat(first["started_at"]).timestamp() - pressed_at)
            plc.set("C1", False)
            wait_until(lambda: runtime.store.plant.get("trigger", "start").last_value is False, 30, interval_s=0.005,
                       message="low seen")
        wait_until(lambda: len(runtime.listRuns(workflow="bench.tick", limit=1000)) >= args.ticks, 120,
                   message="the ticks")
        ticks = runtime.listRuns(workflow="bench.tick", limit=1000)
        gateway.stop()
    plc.stop()
    late = [datetime.fromisoformat(r["started_at"]).timestamp() - datetime.fromisoformat(r["params"]["scheduled_at"]
                                                                                          ).timestamp()
            for r in ticks if r["started_at"]]
    ms = [v * 1000 for v in latencies]
    print(f"trigger: coil high -> run RUNNING over {len(ms)} edges: p50 {percentile(ms, 50):.0f} ms, "
          f"p99 {percentile(ms, 99):.0f} ms, max {max(ms):.0f} ms (poll_ms 50)")
    late_ms = [v * 1000 for v in late]
    print(f"schedule: tick -> run RUNNING over {len(late_ms)} ticks: p50 {percentile(late_ms, 50):.0f} ms, "
          f"p99 {percentile(late_ms, 99):.0f} ms")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
