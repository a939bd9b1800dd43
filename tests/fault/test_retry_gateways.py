"""Retry and fork across gateway processes on one PostgreSQL, from the command line: a run fails on
one gateway, that gateway is killed with -9, ``exchange retry`` queues the run again and another
gateway (another node) executes it from its failed step; ``exchange fork`` starts a new run that
executes only the steps from its position on.

Each step appends ``label pid`` to a file, so the file says what executed where, and how often.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PostgresServer
from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, read_lines, wait_until

APP = """
import os

from exchange.workflows.bootstrap import step, workflow
from testapps.sidefx import append_line


@step(name="gw.mark")
def mark(path, label):
    append_line(path, "%s %s" % (label, os.getpid()))
    return label


@step(name="gw.post")
def post(path, flag):
    append_line(path, "post %s" % os.getpid())
    if not os.path.exists(flag):
        raise ConnectionError("MES refused the connection")
    return "posted"


@workflow(name="gw.batch")
def batch(path, flag):
    return [mark(path, "a"), mark(path, "b"), post(path, flag), mark(path, "d")]
"""


@pytest.mark.timeout(120)
def test_a_run_failed_on_a_killed_gateway_is_retried_and_forked_on_another(
    tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer,
) -> None:
    store_url = postgres.url(postgres.create_database("retry"))
    envs = []
    for node in ("gw0", "gw1"):
        env = ExchangeEnv.create(tmp_path / node, store_url=store_url, engine={"node_id": node},
                                 zygote=exchange_zygote)
        env.write_app("sidefx", SIDE_EFFECT_MODULE)
        env.write_app("gw", APP)
        envs.append(env)
    side, flag = tmp_path / "side.txt", tmp_path / "mes-is-back"
    first, second = envs[0].gateway(name="gw0"), envs[1].gateway(name="gw1")
    runtime = envs[0].runtime()
    try:
        first.start()
        (run_id,) = envs[0].start_runs("gw.batch", [{"path": str(side), "flag": str(flag)}])
        failed = wait_until(lambda: (v := runtime.get_run(run_id))["status"] == "ERROR" and v, 30,
                            message="the run to fail on the first gateway")
        assert failed["owner_node"] == "gw0"
        first.kill9()
        second.start()

        refused = envs[1].cli("fork", run_id[:8], "--from-step", "9")
        assert refused.returncode == 1
        assert f"from_step 9 is outside 1..4: run {run_id} has 3 recorded step(s)" in refused.stderr

        flag.touch()
        retried = envs[1].cli("retry", run_id[:8], "--reason", "MES back").check()
        assert f"run {run_id} queued again (ENQUEUED)" in retried.stdout
        done = wait_until(lambda: (v := runtime.get_run(run_id))["status"] in ("SUCCESS", "ERROR") and v, 30,
                          message=lambda: f"the retried run to finish\n{second.log_text()}")
        assert done["status"] == "SUCCESS", done["error"]
        assert done["owner_node"] == "gw1" and done["result"] == ["a", "b", "posted", "d"]

        again = envs[1].cli("retry", run_id)
        assert again.returncode == 1
        assert f"run {run_id} is SUCCESS: only an ERROR or CANCELLED run can be retried; nothing changed" in (
            " ".join(again.stderr.split()))

        forked = json.loads(envs[1].cli("fork", run_id, "--from-step", "4", "--reason", "post again",
                                         "--json").check().stdout)
        assert forked["forked_from"] == run_id and forked["from_step"] == 4
        fork_view = wait_until(lambda: (v := runtime.get_run(forked["id"]))["status"] == "SUCCESS" and v, 30,
                               message="the fork to finish")
        assert fork_view["forked_from"] == run_id
        shown = envs[1].cli("show", forked["id"]).check().stdout
        assert f"forked    from run {run_id}" in shown
    finally:
        runtime.close()
        first.__exit__()
        second.__exit__()
    lines = [(label, int(pid)) for label, pid in read_lines(side)]
    pid0, pid1 = first.pids[0], second.pids[0]
    assert lines == [("a", pid0), ("b", pid0), ("post", pid0),  # the first execution, on gw0
                     ("post", pid1), ("d", pid1),  # the retry, on gw1: only the failed step and after it
                     ("d", pid1)]  # the fork from step 4
    retried_event = next(e for e in done["events"] if e["kind"] == "retried")
    assert retried_event["reason"] == "MES back" and "@" in retried_event["actor"]
