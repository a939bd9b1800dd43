"""Scale under default settings: a gateway holds hundreds of long-lived waiting runs, and a command
reaches any of them. A correctness test (all run, nothing is missed), not a timing test: the figures
live in ``bench/scale.py``."""

from __future__ import annotations

import random
from pathlib import Path

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, operator_loop_app, wait_until

RUNS = 300

APP = operator_loop_app("scale.unit")


def test_default_settings_run_every_waiting_run_and_a_command_reaches_any(
    tmp_path: Path, store_url: str, exchange_zygote: ForkServer
) -> None:
    """300 runs that never end on one gateway with the default engine settings: every one is RUNNING
    (none queued behind the others), a HOLD sent from another process reaches runs picked at random
    (the first, the last, and some between), and STOP ends them all."""
    env = ExchangeEnv.create(tmp_path, store_url=store_url, zygote=exchange_zygote)  # processes forked
    env.write_app("scale", APP)
    runtime = env.runtime()
    try:
        with env.gateway(log_level="WARNING") as gateway:
            gateway.start(timeout_s=60)
            run_ids = env.start_runs("scale.unit", [{}] * RUNS)

            def running() -> int:
                return runtime.store.runs.count_by_status().get("RUNNING", 0)

            wait_until(lambda: running() == RUNS, 120,
                       message=lambda: f"all {RUNS} runs RUNNING: {runtime.store.runs.count_by_status()}")
            picked = [run_ids[0], run_ids[-1], *random.Random(3).sample(run_ids[1:-1], 6)]
            for run_id in picked:
                runtime.send_command(run_id, "HOLD", "scale test", actor="test")
            for run_id in picked:
                wait_until(lambda run_id=run_id: runtime.store.runs.get(run_id).state == "HELD", 30,
                           message=f"run {run_id} HELD")
            others = [r for r in run_ids if r not in picked]
            assert all(runtime.store.runs.get(r).state == "RUNNING" for r in random.Random(5).sample(others, 20)), (
                "a HOLD reached a run it was not sent to"
            )
            for run_id in picked:
                runtime.send_command(run_id, "RESUME", "scale test", actor="test")
            for run_id in picked:
                wait_until(lambda run_id=run_id: runtime.store.runs.get(run_id).state == "RUNNING", 30,
                           message=f"run {run_id} RUNNING again")
            for run_id in run_ids:
                runtime.send_command(run_id, "STOP", "scale test", actor="test")
            wait_until(lambda: runtime.store.runs.count_by_status().get("SUCCESS", 0) == RUNS, 120,
                       message=lambda: f"all {RUNS} runs stopped: {runtime.store.runs.count_by_status()}")
            assert gateway.stop() == 0, gateway.log_text()
    finally:
        runtime.close()
