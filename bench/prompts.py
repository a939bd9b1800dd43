"""A thousand runs waiting on operator prompts: what the wait costs, and how fast an answer lands.

    .venv/bin/python bench/prompts.py [--backends sqlite,postgresql] [--runs 1000] [--idle-seconds 20]
                                      [--samples 40]

A real ``exchange gateway`` process with the HTTP API gets ``--runs`` runs, each waiting on
``operator.prompt`` (no timeout) for its answer; beside them, as the yardstick the issue names, the
same number of runs waiting in ``recvCommand(timeoutSeconds=3600)``, measured the same way in a
gateway of their own. Printed for each:

- how long until every prompt is open (every run waits);
- the gateway's CPU while they all wait (% of one core, from /proc over ``--idle-seconds``), its RSS
  and its thread count;
- for prompts, ``--samples`` answers POSTed to ``/api/v1/runs/{id}/prompts/{key}`` by this (another)
  process, each timed from the POST until the workflow returned from ``prompt`` (the workflow notes
  the time, one machine's clock): p50, p90, p99.

Target (issue 28): the prompts' CPU and RSS those of the runs waiting in ``recvCommand``.
"""

from __future__ import annotations

import argparse
import random
import re
import time
from pathlib import Path

import requests
from common import add_store_args, machine_note, percentile, stores
from scale import START_BATCH, cpu_seconds, status_field

from tests.harness import ExchangeEnv, wait_until

APP = """
import time

from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import operator


@workflow(name="bench.prompt")
def prompt():
    answer = operator.prompt("lab", "Lab result?", fields={"density": {"type": "float", "min": 0.5, "max": 2.0}})
    return {"returned_at": time.time(), "density": answer["values"]["density"]}


@workflow(name="bench.recv")
def recv():
    return getWorkflows().recvCommand(timeoutSeconds=3600)
"""


def measure(url: str, root: Path, workflow: str, runs: int, idle_seconds: float, samples: int) -> None:
    env = ExchangeEnv.create(root, store_url=url, apps_package="benchapps")
    env.write_app("waiting", APP)
    token = env.cli("tokens", "create", "bench", "--role", "operator").check().stdout.strip()
    runtime = env.runtime()
    run_ids: list[str] = []
    for first in range(0, runs, START_BATCH):
        run_ids.extend(env.start_runs(workflow, [{}] * min(START_BATCH, runs - first)))
    with env.gateway("--api", "127.0.0.1:0", log_level="WARNING") as gateway:
        started = time.monotonic()
        gateway.start(timeout_s=120)
        api = wait_until(lambda: re.findall(r"gateway API listening on (\S+)", gateway.log_text()), 30,
                         message="the API's address")[0]

        def waiting() -> int:
            if workflow == "bench.prompt":
                return len(runtime.open_prompts(limit=10_000))
            return int(runtime.store.runs.count_by_status().get("RUNNING", 0))

        wait_until(lambda: waiting() >= runs, 300, interval_s=0.5, message=lambda: f"{waiting()} of {runs} waiting")
        print(f"  all {runs} waiting after {time.monotonic() - started:.1f} s")
        time.sleep(3.0)  # the start-up burst settles before the idle cost is measured
        cpu_before, at_before = cpu_seconds(gateway.pid), time.monotonic()
        time.sleep(idle_seconds)  # the measured idle period
        elapsed = time.monotonic() - at_before
        percent = (cpu_seconds(gateway.pid) - cpu_before) / elapsed * 100
        print(f"  gateway while they wait: CPU {percent:.1f} % of one core over {elapsed:.0f} s, "
              f"RSS {status_field(gateway.pid, 'VmRSS')}, {status_field(gateway.pid, 'Threads')} threads")
        if workflow != "bench.prompt":
            runtime.close()
            return
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {token}"
        latencies: list[float] = []
        for run_id in random.Random(7).sample(run_ids, min(samples, len(run_ids))):
            posted = time.time()
            answer = session.post(f"{api}/api/v1/runs/{run_id}/prompts/lab", json={"values": {"density": 1.0}},
                                  timeout=30)
            assert answer.status_code == 200, answer.text
            view = wait_until(lambda run_id=run_id: (v := runtime.get_run(run_id, steps=False, events=False))["status"]
                              == "SUCCESS" and v, 30, interval_s=0.005, message="the run to return")
            latencies.append(view["result"]["returned_at"] - posted)
            time.sleep(random.Random(run_id).uniform(0.0, 0.2))
        ms = [x * 1000 for x in latencies]
        print(f"  API answer -> the workflow returns from prompt: n={len(ms)} p50={percentile(ms, 50):.1f} ms "
              f"p90={percentile(ms, 90):.1f} ms p99={percentile(ms, 99):.1f} ms max={max(ms):.1f} ms")
    runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_store_args(parser)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--samples", type=int, default=40, help="Prompts answered through the API to time it.")
    args = parser.parse_args()
    with stores(args) as s:
        print(machine_note(s.tmp))
        for backend in s.names():
            for workflow, shape in (("bench.prompt", "operator.prompt (no timeout)"),
                                    ("bench.recv", "recvCommand(3600 s), the yardstick")):
                print(f"[{backend}] {args.runs} runs waiting in {shape}")
                measure(s.fresh_url(backend), s.tmp / f"{workflow}-{backend}", workflow, args.runs,
                        args.idle_seconds, args.samples)


if __name__ == "__main__":
    main()
