"""Group commit under kill -9: many runs' step records share transactions; a gateway killed in the
middle of such a burst loses no step whose call had returned (been reported recorded) to its workflow.

Each workflow appends ``run seq value`` to a file (O_APPEND + fsync) right after a step call returned,
so the file lists what the engine reported durable. After the kill every listed step must be in the
store with that value, and a new gateway finishes every run without running a recorded step again.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from exchange._store import codec
from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, count_lines, read_lines, wait_until

RUNS = 40
STEPS = 60

APP = """
import os

from exchange.workflows.bootstrap import step, workflow
from exchange._engine.execution.context import current_run
from testapps.sidefx import append_line


@step(name="burst.work")
def work(path, i):
    ctx = current_run()
    append_line(path, "%s %s executed" % (ctx.run_id, ctx.step.seq))
    return "v%s" % i


@workflow(name="burst.many")
def many(path, n):
    for i in range(n):
        value = work(path, i)
        ctx = current_run()
        append_line(path, "%s %s reported %s" % (ctx.run_id, ctx.next_seq - 1, value))
    return n
"""


def test_a_kill_during_a_burst_of_many_runs_writes_loses_no_reported_step(
    tmp_path: Path, store_url: str, exchange_zygote: ForkServer
) -> None:
    env = ExchangeEnv.create(tmp_path, store_url=store_url, zygote=exchange_zygote)  # processes forked
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("burst", APP)
    side = tmp_path / "side.txt"
    runtime = env.runtime()
    try:
        with env.gateway(log_level="WARNING") as gateway:
            gateway.start(timeout_s=60)
            run_ids = env.start_runs("burst.many", [{"path": str(side), "n": STEPS}] * RUNS)
            # Kill once the burst is well under way: many runs write at once, none has finished.
            wait_until(lambda: count_lines(side) >= RUNS * STEPS // 2, 120, message="half of the steps executed")
            gateway.kill9()
            lines = read_lines(side)
            reported = [(run_id, int(seq), rest[0]) for run_id, seq, kind, *rest in lines if kind == "reported"]
            executed_before = Counter((run_id, int(seq)) for run_id, seq, kind, *_ in lines if kind == "executed")
            assert len({run_id for run_id, _, _ in reported}) >= RUNS // 2, "the burst did not span many runs"
            lost = []
            for run_id, seq, value in reported:
                record = runtime.store.steps.load(run_id).get(seq)
                if record is None or codec.loads(record.output) != value:
                    lost.append((run_id, seq, value, record))
            assert not lost, f"{len(lost)} step(s) reported recorded are not in the store: {lost[:5]}"

            gateway.restart(timeout_s=60)
            for run_id in run_ids:
                assert runtime.wait_for(run_id, 120)["status"] == "SUCCESS", gateway.all_logs()
            executed = Counter(
                (run_id, int(seq)) for run_id, seq, kind, *_ in read_lines(side) if kind == "executed"
            )
            again = [key for key in {(r, s) for r, s, _ in reported} if executed[key] > executed_before[key]]
            assert not again, f"recorded steps ran again after the restart: {again[:5]}"
            assert all(executed[(r, s)] >= 1 for r in run_ids for s in range(1, STEPS + 1))
    finally:
        runtime.close()
