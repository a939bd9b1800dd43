"""Several gateways (distinct node ids) on one PostgreSQL share the work, as real processes.

- runs that wait to start all at once (queued while the gateways were drained, then released) are
  split between the gateways instead of going to the first one to look;
- long-lived runs started one by one in one gateway's process (a parent's children) end up spread
  over all of them, instead of staying with the gateway that started them;
- the runs of a gateway killed with -9 are shared by the survivors, and still taken over within the
  lease plus 2 s.

Each run's step appends ``step run pid`` to a side-effect file (fsync'd), and each execution of a
long-lived run ``execution run pid``: the file says which process executed what, and that no step
ran twice.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import PostgresServer
from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, Gateway, read_lines, wait_until

APP = """
import os

from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange._engine.execution.context import current_run
from testapps.sidefx import append_line


def note(path, what):
    append_line(path, "%s %s %s" % (what, current_run().run_id, os.getpid()))


@step(name="share.mark")
def mark(path):
    note(path, "step")
    return os.getpid()


@workflow(name="share.once")
def once(path):
    return mark(path)


@workflow(name="share.fanout")
def fanout(path, n):
    rt = getWorkflows()
    return [rt.startChild("share.waiting", {"path": path}) for _ in range(n)]


@workflow(name="share.waiting")
def waiting(path):
    note(path, "execution")  # not a step: written by every execution, the replay after a takeover too
    mark(path)
    rt = getWorkflows()
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=30.0, maxMessages=1)
        if cmd and cmd["cmd"] == "STOP":
            return "stopped"
"""

# A run is "meaningfully shared" when each gateway executes at least this fraction of the runs.
MEANINGFUL_SHARE = 0.25


def _envs(tmp_path: Path, postgres: PostgresServer, name: str, nodes: int, zygote: ForkServer,
          **engine: object) -> list[ExchangeEnv]:
    store_url = postgres.url(postgres.create_database(name))
    envs = []
    for i in range(nodes):
        env = ExchangeEnv.create(tmp_path / f"s{i}", store_url=store_url, engine={"node_id": f"s{i}", **engine},
                                 zygote=zygote)
        env.write_app("sidefx", SIDE_EFFECT_MODULE)
        env.write_app("share", APP)
        envs.append(env)
    return envs


def _lines(side: Path, what: str) -> list[tuple[str, int]]:
    """(run, pid) of the ``what`` lines ("step" or "execution")."""
    return [(run_id, int(pid)) for kind, run_id, pid in read_lines(side) if kind == what]


def _assert_each_step_ran_once(side: Path, run_ids: list[str]) -> None:
    steps = Counter(run_id for run_id, _pid in _lines(side, "step"))
    assert set(steps) == set(run_ids), "a run's step did not run"
    assert set(steps.values()) == {1}, [run_id for run_id, n in steps.items() if n > 1]


def _shares(side: Path, what: str, gateways: list[Gateway]) -> dict[str, int]:
    by_pid = Counter(pid for _run, pid in _lines(side, what))
    return {g.name: sum(by_pid[pid] for pid in g.pids) for g in gateways}


@pytest.mark.timeout(60)
def test_runs_released_at_once_are_split_between_the_gateways(
    tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer
) -> None:
    envs = _envs(tmp_path, postgres, "share_burst", 2, exchange_zygote)
    side = tmp_path / "side.txt"
    gateways = [env.gateway(name=env.root.name) for env in envs]
    runtime = envs[0].runtime()
    try:
        envs[0].cli("maintenance", "drain", "--reason", "queue first").check()
        run_ids = envs[0].start_runs("share.once", [{"path": str(side)}] * 200)
        for gateway in gateways:
            gateway.start()
        # Both count as alive for each other (their node rows say so) before the runs are released.
        wait_until(lambda: runtime.store.nodes.count_live(3.0) == 2, 20, message="both gateways to be live")
        envs[0].cli("maintenance", "exit").check()  # both gateways are told, and look at once
        wait_until(lambda: runtime.store.runs.count_by_status().get("SUCCESS", 0) == len(run_ids), 30,
                   interval_s=0.05, message=lambda: f"every run to finish: {runtime.store.runs.count_by_status()}")
    finally:
        runtime.close()
        for gateway in gateways:
            gateway.__exit__()
    _assert_each_step_ran_once(side, run_ids)
    shares = _shares(side, "step", gateways)
    print(f"\nruns released at once, by gateway: {shares}")
    assert min(shares.values()) >= MEANINGFUL_SHARE * len(run_ids), shares


@pytest.mark.timeout(60)
def test_long_lived_runs_started_one_by_one_in_one_gateway_are_spread_over_all(
    tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer
) -> None:
    """A parent run fans out into children (``startChild``) on whichever gateway executes it: each start
    wakes that gateway's dispatcher at once, the others see it at their next turn."""
    envs = _envs(tmp_path, postgres, "share_fanout", 3, exchange_zygote)
    side = tmp_path / "side.txt"
    gateways = [env.gateway(name=env.root.name) for env in envs]
    runtime = envs[0].runtime()
    children = 150
    try:
        for gateway in gateways:
            gateway.start()
        (parent,) = envs[0].start_runs("share.fanout", [{"path": str(side), "n": children}])
        view = wait_until(lambda: (v := runtime.get_run(parent, steps=False, events=False))["status"] == "SUCCESS"
                          and v, 30, message="the parent to start its children")
        run_ids = view["result"]
        wait_until(lambda: len(_lines(side, "step")) == children, 30, interval_s=0.05,
                   message=lambda: f"every child to start: {runtime.store.runs.count_by_status()}")
        running = runtime.store.runs.count_by_status().get("RUNNING", 0)
    finally:
        runtime.close()
        for gateway in gateways:
            gateway.__exit__()
    assert running == children
    _assert_each_step_ran_once(side, run_ids)
    shares = _shares(side, "step", gateways)
    print(f"\nchildren of one parent, by gateway: {shares}")
    assert min(shares.values()) >= MEANINGFUL_SHARE * children, shares


@pytest.mark.timeout(90)
def test_the_survivors_share_a_killed_gateways_runs_within_the_lease(
    tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer
) -> None:
    lease_seconds = 3.0
    envs = _envs(tmp_path, postgres, "share_takeover", 3, exchange_zygote, lease_seconds=lease_seconds)
    side = tmp_path / "side.txt"
    doomed, *survivors = [env.gateway(name=env.root.name) for env in envs]
    runtime = envs[0].runtime()
    try:
        doomed.start()
        run_ids = envs[0].start_runs("share.waiting", [{"path": str(side)}] * 60)
        wait_until(lambda: len(_lines(side, "step")) == len(run_ids), 30,
                   message="the first gateway to start every run")
        for gateway in survivors:
            gateway.start()
        doomed.kill9()
        killed_at = time.time()
        survivor_pids = {g.pid for g in survivors}

        def taken_over() -> bool:
            return {run_id for run_id, pid in _lines(side, "execution") if pid in survivor_pids} == set(run_ids)

        wait_until(taken_over, lease_seconds + 10, interval_s=0.02, message="the survivors to take every run over")
        took_s = time.time() - killed_at
        views = [runtime.get_run(run_id, steps=False, events=False) for run_id in run_ids]
    finally:
        runtime.close()
        for gateway in [doomed, *survivors]:
            gateway.__exit__()
    shares = _shares(side, "execution", survivors)
    print(f"\nkill -9 -> every run taken over in {took_s:.2f} s; by survivor: {shares}")
    assert took_s <= lease_seconds + 2.0
    assert all(view["status"] == "RUNNING" and view["owner_node"] in ("s1", "s2") for view in views)
    _assert_each_step_ran_once(side, run_ids)  # the replay after the takeover ran the recorded step no more
    taken = Counter(run_id for run_id, pid in _lines(side, "execution") if pid in survivor_pids)
    assert set(taken.values()) == {1}, "a run was taken over by both survivors"
    assert min(shares.values()) >= MEANINGFUL_SHARE * len(run_ids), shares
