"""Trigger latency and schedule lateness with a real gateway (issue 13).

    .venv/bin/python bench/plant_features.py [--edges 30] [--ticks 20]

- Trigger: a tag goes high in a real simulated PLC (this process); the time until the triggered run is
  RUNNING (``started_at``, store clock, same machine) p50/p99 over ``--edges`` edges, twice: a Modbus
  coil watched by the batched poll (``poll_ms = 50``: the poll adds 0-50 ms; each edge comes at a random
  phase of the poll) and an OPC UA tag watched through the driver's subscription.
- Schedule: a 6-field cron every second; each run's ``started_at`` minus its tick, p50/p99 over
  ``--ticks`` ticks.
SQLite store (``--store-url`` for another).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from common import percentile

from exchange._engine.operator.runtime import Runtime
from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from simulators.servers.opcua import OpcUaSimServer
from tests.harness import ExchangeEnv, wait_until

APP = '''
from exchange.workflows.bootstrap import workflow


@workflow(name="bench.pressed")
def pressed(trigger_at=None):
    return trigger_at


@workflow(name="bench.ua_pressed")
def ua_pressed(trigger_at=None):
    return trigger_at


@workflow(name="bench.tick")
def tick(scheduled_at=None):
    return scheduled_at
'''


UA_NODE = "ns=2;s=Line1.Start"


def _config(port: int, ua_url: str) -> str:
    return f"""
[devices.plc]
driver = "modbus"
host = "127.0.0.1"
port = {port}
unit_id = 1

[devices.ua]
driver = "opcua"
url = "{ua_url}"

[tags."[ua]Start"]
device = "ua"
address = "{UA_NODE}"

[triggers.ua_start]
tag = "[ua]Start"
workflow = "bench.ua_pressed"
poll_ms = 60000

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


def _edge_latencies(runtime: Runtime, trigger: str, workflow: str, edges: int,
                    press: Callable[[bool], None], phase_s: float) -> list[float]:
    """Milliseconds from each rising edge to its run's ``started_at``."""
    latencies: list[float] = []
    for edge in range(1, edges + 1):
        time.sleep(random.uniform(0, phase_s))  # not locked to the poll's phase
        pressed_at = time.time()
        press(True)

        def started(edge: int = edge) -> bool:
            runs = runtime.list_runs(workflow=workflow, limit=edge + 5)
            return len(runs) >= edge and runs[0]["started_at"] is not None

        wait_until(started, 30, interval_s=0.002, message=f"the run {trigger} started")
        first = runtime.list_runs(workflow=workflow, limit=1)[0]
        latencies.append((datetime.fromisoformat(first["started_at"]).timestamp() - pressed_at) * 1000)
        press(False)
        wait_until(lambda: runtime.store.plant.get("trigger", trigger).last_value is False, 30, interval_s=0.005,
                   message=f"{trigger} low seen")
    return latencies


def _report(label: str, ms: list[float]) -> None:
    print(f"{label} over {len(ms)} edges: p50 {percentile(ms, 50):.0f} ms, p99 {percentile(ms, 99):.0f} ms, "
          f"max {max(ms):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", type=int, default=30)
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--store-url", default=None)
    args = parser.parse_args()
    root = Path(f"/tmp/exchange-bench-plant-{time.time_ns()}")
    plc = ModbusSimServer([SimPoint("C1", DataType.BOOLEAN, False)])
    plc.start()
    ua = OpcUaSimServer([SimPoint(UA_NODE, DataType.BOOLEAN, False)])
    ua.start()
    env = ExchangeEnv.create(root, store_url=args.store_url, apps_package="benchplant")
    env.write_app("plant", APP)
    with env.config_path.open("a", encoding="utf-8") as file:
        file.write(_config(plc.port, ua.url))
    runtime = env.runtime()
    with env.gateway(log_level="WARNING") as gateway:
        gateway.start(timeout_s=60)
        for trigger in ("start", "ua_start"):
            wait_until(lambda t=trigger: runtime.store.plant.get("trigger", t) is not None, 30, message=trigger)
        modbus_ms = _edge_latencies(runtime, "start", "bench.pressed", args.edges,
                                    lambda high: plc.set("C1", high), 0.05)
        opcua_ms = _edge_latencies(runtime, "ua_start", "bench.ua_pressed", args.edges,
                                   lambda high: ua.set(UA_NODE, high), 0.05)
        wait_until(lambda: len(runtime.list_runs(workflow="bench.tick", limit=1000)) >= args.ticks, 120,
                   message="the ticks")
        ticks = runtime.list_runs(workflow="bench.tick", limit=1000)
        gateway.stop()
    plc.stop()
    ua.stop()
    _report("trigger, Modbus coil polled every 50 ms: high -> run RUNNING", modbus_ms)
    _report("trigger, OPC UA tag through the subscription: high -> run RUNNING", opcua_ms)
    late_ms = [(datetime.fromisoformat(r["started_at"]).timestamp()
                - datetime.fromisoformat(r["params"]["scheduled_at"]).timestamp()) * 1000
               for r in ticks if r["started_at"]]
    print(f"schedule: tick -> run RUNNING over {len(late_ms)} ticks: p50 {percentile(late_ms, 50):.0f} ms, "
          f"p99 {percentile(late_ms, 99):.0f} ms")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
