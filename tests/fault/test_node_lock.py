"""The node lock under faults: an active gateway and its hot standby (one node id, two processes).

- PostgreSQL restarts under them: the session advisory lock dies with the server; the standby rides
  out the outage instead of exiting, and whichever gateway holds the lock afterwards runs the node's
  runs — never both at once, and no recorded step twice.
- SIGTERM reaches the active gateway while a step is longer than the stop timeout: it must not hand
  the lock to the standby while the step body still runs; it ends its process, the standby resumes
  the run, and the run ends SUCCESS (it used to end ERROR, never resumed).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import PostgresServer
from tests.fault.ownership import assert_never_concurrent, assert_recorded_by_last_executor, lines_of, make_envs
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until
from tests.integrations.fixtures import controlled_postgres, running_postgres  # noqa: F401
from tests.integrations.pg_control import ControlledPostgres


@pytest.mark.timeout(180)
def test_a_store_restart_under_a_gateway_and_its_standby_runs_no_step_twice_at_once(
    tmp_path: Path, running_postgres: ControlledPostgres, exchange_zygote: ForkServer  # noqa: F811
) -> None:
    url = running_postgres.socket_url(running_postgres.create_database("nodelock"))
    (env,) = make_envs(tmp_path, url, ["plant"], exchange_zygote)
    side = tmp_path / "side.txt"
    active, standby = env.gateway(name="active"), env.gateway("--standby", name="standby")
    try:
        active.start()
        standby.spawn()
        wait_until(lambda: "standby: waiting" in standby.log_text(), 20, message="the standby to wait")
        run_ids = env.start_runs("own.count", [{"path": str(side), "n": 250, "hold_ms": 20}] * 3)
        wait_until(lambda: len(lines_of(side)) > 60, 30, message="steps before the restart")
        running_postgres.stop()
        time.sleep(3.0)  # the outage lasts a while (fault injection, not a wait for a condition)
        running_postgres.start()
        runtime = env.runtime()
        views = [wait_until(lambda run_id=run_id: (v := runtime.get_run(run_id))["status"] == "SUCCESS" and v, 90,
                            interval_s=0.1, message=lambda: f"SUCCESS\n{active.log_text()}\n{standby.log_text()}")
                 for run_id in run_ids]
        runtime.close()
        assert active.alive(), active.log_text()
        assert standby.alive(), standby.log_text()  # it used to exit 1 on the store error of its lock poll
    finally:
        for gateway in (active, standby):
            gateway.__exit__()
    lines = lines_of(side)
    repeated = assert_never_concurrent(lines, until=time.time())
    assert repeated <= len(run_ids), repeated  # at most the step each run had in flight at the outage
    for view in views:
        assert view["result"] == 250 and [s["seq"] for s in view["steps"]] == list(range(1, 251))
        assert_recorded_by_last_executor(view, lines)


def _sigterm_mid_step(env: ExchangeEnv, side: Path) -> None:
    active, standby = env.gateway(name="active"), env.gateway("--standby", name="standby")
    try:
        active.start()
        standby.spawn()
        wait_until(lambda: "standby: waiting" in standby.log_text(), 20, message="the standby to wait")
        (run_id,) = env.start_runs("own.count", [{"path": str(side), "n": 2, "hold_ms": 2500}])
        wait_until(lambda: len(lines_of(side)) == 1, 30, message="the first (long) step to start")
        assert active.stop() == 0, active.log_text()  # SIGTERM; stop_timeout_seconds is 1 s
        stopped_at = time.time()
        assert "still inside a step" in active.log_text()
        standby.wait_ready(20)
        runtime = env.runtime()
        view = wait_until(lambda: (v := runtime.get_run(run_id))["status"] == "SUCCESS" and v, 60,
                          message=lambda: f"SUCCESS\n{standby.log_text()}")
        runtime.close()
    finally:
        for gateway in (active, standby):
            gateway.__exit__()
    lines = lines_of(side)
    assert assert_never_concurrent(lines, until=stopped_at) == 1  # the interrupted step, after the active ended
    assert view["result"] == 2 and view["executions"] == 2
    assert_recorded_by_last_executor(view, lines)
    assert {x.pid for x in lines if x.what == "end"} == {standby.pid}


@pytest.mark.timeout(90)
def test_sigterm_during_a_long_step_hands_over_without_running_it_twice_at_once_sqlite(
    tmp_path: Path, exchange_zygote: ForkServer
) -> None:
    (env,) = make_envs(tmp_path, f"sqlite:///{tmp_path / 'var' / 'exchange.db'}", ["plant"], exchange_zygote,
                       stop_timeout_seconds=1.0)
    _sigterm_mid_step(env, tmp_path / "side.txt")


@pytest.mark.timeout(90)
def test_sigterm_during_a_long_step_hands_over_without_running_it_twice_at_once_postgresql(
    tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer
) -> None:
    url = postgres.url(postgres.create_database("sigterm"))
    (env,) = make_envs(tmp_path, url, ["plant"], exchange_zygote, stop_timeout_seconds=1.0)
    _sigterm_mid_step(env, tmp_path / "side.txt")
