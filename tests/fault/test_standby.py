"""A hot standby gateway: fully loaded, it waits for the node lock and takes over the moment the
active gateway is killed with -9; every recorded step still ran exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, read_lines, wait_until

APP = """
from exchange.workflows.bootstrap import step, workflow
from testapps.sidefx import append_line


@step(name="standby.tick")
def tick(path, i):
    append_line(path, "%s" % i)
    return i


@workflow(name="standby.count")
def count(path, n):
    for i in range(n):
        tick(path, i)
    return n
"""


def test_the_standby_takes_over_when_the_active_gateway_dies(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("standby_app", APP)
    side = tmp_path / "side.txt"
    with env.gateway(name="active") as active, env.gateway("--standby", name="standby") as standby:
        active.start()
        standby.spawn()
        wait_until(lambda: "standby: waiting" in standby.log_text(), 20, message="the standby to wait")
        assert "ready" not in standby.log_text()  # it must not run anything while the active one lives
        (run_id,) = env.start_runs("standby.count", [{"path": str(side), "n": 3000}])
        wait_until(lambda: len(read_lines(side)) >= 50, 30, message="steps from the active gateway")
        active.kill9()
        standby.wait_ready(20)
        view = wait_until(lambda: (v := env.show(run_id))["status"] == "SUCCESS" and v, 60, message="SUCCESS")
    assert view["result"] == 3000
    counts = Counter(int(line[0]) for line in read_lines(side))
    assert sorted(counts) == list(range(3000))
    assert sum(n - 1 for n in counts.values()) <= 1  # at most the step in flight at the kill ran twice
