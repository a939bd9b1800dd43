"""Several gateways (distinct node ids) on one PostgreSQL: who may execute a run, under real faults.

- kill -9 of a gateway: the survivors take its runs over within the lease (default settings) plus
  2 s, every recorded step ran once, no step ran in two processes at once;
- SIGSTOP of a gateway past its lease, then SIGCONT: it starts no further step of the runs another
  gateway took over and never overwrites their records;
- gateways racing at start-up never run two runs of one partition key at once;
- an ``exchange run`` process killed -9 right after it created its run does not orphan the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PostgresServer
from tests.fault.ownership import (
    assert_never_concurrent,
    assert_recorded_by_last_executor,
    executions,
    lines_of,
    make_envs,
)
from tests.forkserver import ForkServer
from tests.harness import EXCHANGE_CMD, wait_until

DEFAULT_LEASE_SECONDS = 5.0


def _store(postgres: PostgresServer, name: str) -> str:
    return postgres.url(postgres.create_database(name))


# Three gateways: two survivors compete for the killed one's runs, which is the case of two (one
# survivor takes them all) and more. Two gateways' takeovers are also those of test_phase_takeover,
# tests/fault/test_units_faults.py and test_node_lock.
@pytest.mark.parametrize("gateways", [3])
@pytest.mark.timeout(120)
def test_survivors_take_over_a_killed_gateways_runs_within_the_lease(
    tmp_path: Path, postgres: PostgresServer, gateways: int, exchange_zygote: ForkServer
) -> None:
    envs = make_envs(tmp_path, _store(postgres, "takeover"), [f"gw{i}" for i in range(gateways)], exchange_zygote)
    side = tmp_path / "side.txt"
    first, *others = [env.gateway(name=f"gw{i}") for i, env in enumerate(envs)]
    try:
        first.start()
        run_ids = envs[0].start_runs("own.count", [{"path": str(side), "n": 150, "hold_ms": 20}] * 4)
        runtime = envs[0].runtime()
        wait_until(lambda: all(runtime.get_run(r, steps=False, events=False)["status"] == "RUNNING" for r in run_ids)
                   and len({x.run_id for x in lines_of(side)}) == 4, 30, message="the first gateway to run all four")
        for gateway in others:
            gateway.start()
        wait_until(lambda: len(lines_of(side)) > 100, 30, message="steps before the kill")
        first.kill9()
        killed_at = time.time()
        survivors = {g.pid for g in others}
        # Each run's next step comes from a survivor within the default lease plus 2 s.
        delays = []
        for run_id in run_ids:
            taken = wait_until(
                lambda run_id=run_id: next((x.at for x in lines_of(side) if x.run_id == run_id and x.pid in survivors
                                            and x.what == "start"), None),
                DEFAULT_LEASE_SECONDS + 10, message=f"a survivor to take over {run_id}")
            delays.append(taken - killed_at)
        print(f"\nkill -9 -> a survivor's first step, {gateways} gateways: "
              + ", ".join(f"{d:.2f}" for d in sorted(delays)) + " s")
        assert max(delays) <= DEFAULT_LEASE_SECONDS + 2.0, delays
        views = [wait_until(lambda run_id=run_id: (v := runtime.get_run(run_id))["status"] == "SUCCESS" and v, 60,
                            message="SUCCESS") for run_id in run_ids]
        runtime.close()
    finally:
        for gateway in [first, *others]:
            gateway.__exit__()
    lines = lines_of(side)
    repeated = assert_never_concurrent(lines, until=killed_at)
    assert repeated <= len(run_ids)  # at most the step each run had in flight at the kill
    for view in views:
        assert view["result"] == 150 and [s["seq"] for s in view["steps"]] == list(range(1, 151))
        assert_recorded_by_last_executor(view, lines)
        assert view["owner"] is None or not view["owner"].startswith("gw0/")


@pytest.mark.timeout(120)
def test_a_gateway_paused_past_its_lease_starts_no_further_step_and_overwrites_nothing(
    tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer
) -> None:
    envs = make_envs(tmp_path, _store(postgres, "sigstop"), ["paused", "other"], exchange_zygote)
    side = tmp_path / "side.txt"
    paused, other = envs[0].gateway(name="paused"), envs[1].gateway(name="other")
    try:
        paused.start()
        run_ids = envs[0].start_runs("own.count", [{"path": str(side), "n": 400, "hold_ms": 10}] * 3)
        wait_until(lambda: len({x.run_id for x in lines_of(side)}) == 3, 30, message="the runs to start")
        other.start()
        os.kill(paused.pid, signal.SIGSTOP)
        stopped_at = time.time()
        in_flight = {}
        for line in lines_of(side):  # the step each run had in flight when the process froze
            if line.pid == paused.pid and line.what == "start":
                in_flight[line.run_id] = line.seq
        wait_until(lambda: {x.run_id for x in lines_of(side) if x.pid == other.pid} == set(run_ids),
                   DEFAULT_LEASE_SECONDS + 10, message="the other gateway to take every run over")
        assert time.time() - stopped_at >= DEFAULT_LEASE_SECONDS * 0.8
        os.kill(paused.pid, signal.SIGCONT)
        continued_at = time.time()
        runtime = envs[1].runtime()
        views = [wait_until(lambda run_id=run_id: (v := runtime.get_run(run_id))["status"] == "SUCCESS" and v, 90,
                            message="SUCCESS") for run_id in run_ids]
        runtime.close()
        assert paused.alive()  # it lost the runs, not its life
    finally:
        for gateway in (paused, other):
            gateway.__exit__()
    lines = lines_of(side)
    late = [x for x in lines if x.pid == paused.pid and x.what == "start" and x.at >= continued_at]
    # A body frozen between its lease check and its first line may still write it; nothing else starts.
    assert all(x.seq == in_flight.get(x.run_id) for x in late), (late, in_flight)
    for view in views:
        assert view["result"] == 400 and [s["seq"] for s in view["steps"]] == list(range(1, 401))
        assert_recorded_by_last_executor(view, lines)
        taken = [s for s in view["steps"] if s["seq"] > in_flight[view["id"]]]
        assert all(s["output"]["pid"] == other.pid for s in taken)


@pytest.mark.timeout(120)
def test_partition_keys_hold_with_gateways_racing_at_start_up(
    tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer
) -> None:
    envs = make_envs(tmp_path, _store(postgres, "partitions"), ["p0", "p1", "p2"], exchange_zygote,
                     dispatch_poll_ms=5)
    side = tmp_path / "side.txt"
    keys = ["line1", "line2", "line3"]
    run_ids: list[str] = []
    for key in keys:  # ten runs per key, created before any gateway runs
        run_ids += envs[0].start_runs("own.keyed", [{"path": str(side), "key": key, "hold_ms": 40}] * 10,
                                      partitionKey=key)
    gateways = [env.gateway(name=env.root.name) for env in envs]
    try:
        for gateway in gateways:  # all at once: they race for the same runs from their first claim
            gateway.spawn()
        for gateway in gateways:
            gateway.wait_ready()
        runtime = envs[0].runtime()
        wait_until(lambda: all(runtime.get_run(r, steps=False, events=False)["status"] == "SUCCESS" for r in run_ids),
                   90, interval_s=0.1, message="every keyed run to finish")
        runtime.close()
    finally:
        for gateway in gateways:
            gateway.__exit__()
    lines = lines_of(side)
    by_key: dict[str, list[tuple[float, float]]] = {}
    for (_run, _seq), runs in executions(lines).items():
        (pid, start, end), = runs
        key = next(x.key for x in lines if x.pid == pid and x.at == start)
        assert end is not None
        by_key.setdefault(key, []).append((start, end))
    assert sorted(by_key) == keys
    for key, spans in by_key.items():
        spans.sort()
        for (_s1, end1), (start2, _e2) in zip(spans, spans[1:]):
            assert start2 >= end1, f"two runs of partition {key} ran at once: {spans}"
    assert len({x.pid for x in lines}) >= 2  # the gateways really shared the work


@pytest.mark.timeout(120)
def test_a_run_whose_exchange_run_process_was_killed_is_taken_over(
    tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer
) -> None:
    """``exchange run`` creates its run owned, with a lease from that first write: killed at once, the
    run is still taken over by a gateway when the lease runs out (it used to be orphaned for good)."""
    (env,) = make_envs(tmp_path, _store(postgres, "orphan"), ["rescuer"], exchange_zygote)
    side = tmp_path / "side.txt"
    proc = subprocess.Popen(
        [*EXCHANGE_CMD, "--config", str(env.config_path), "run", "own.count", "-p", f"path={side}", "-p", "n=30",
         "-p", "hold_ms=30"],
        cwd=env.root, env=env.process_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: len(lines_of(side)) >= 2, 30, message="the run to start executing")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed_at = time.time()
    finally:
        if proc.poll() is None:
            proc.kill()
    with env.gateway(name="rescuer") as gateway:
        gateway.start()
        run_id = lines_of(side)[0].run_id
        runtime = env.runtime()
        view = wait_until(lambda: (v := runtime.get_run(run_id))["status"] == "SUCCESS" and v,
                          DEFAULT_LEASE_SECONDS + 30, message="the rescuer to finish the orphaned run")
        runtime.close()
    first_rescue = min(x.at for x in lines_of(side) if x.pid == gateway.pid)
    assert first_rescue - max(killed_at, gateway.ready_at) <= DEFAULT_LEASE_SECONDS + 2.0
    assert view["result"] == 30
