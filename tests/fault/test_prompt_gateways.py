"""Operator prompts across real gateway processes on PostgreSQL: a gateway killed with -9 while a
prompt waits, the prompt answered from the command line and the restarted gateway going on; and a
prompt answered through one gateway's API while another gateway executes the run."""

from __future__ import annotations

import re
from pathlib import Path

import requests

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until

APP = '''
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.steps import operator


@step(name="prompts.mark")
def mark(path, what):
    with open(path, "a") as f:
        f.write(what + "\\n")
    return what


@workflow(name="prompts.dose")
def dose(path):
    mark(path, "before")
    answer = operator.prompt("approval", "Approve dosing of batch B-7",
                             fields={"approved": {"type": "bool"}, "kg": {"type": "float", "min": 0}})
    mark(path, "after %s" % answer["values"]["kg"])
    return answer
'''


def make_env(root: Path, store_url: str, node: str, zygote: ForkServer) -> ExchangeEnv:
    env = ExchangeEnv.create(root, store_url=store_url, engine={"node_id": node}, zygote=zygote)
    env.write_app("prompt_app", APP)
    return env


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_prompt_survives_kill_9_and_is_answered_on_the_restarted_gateway(
    tmp_path: Path, pg_url: str, exchange_zygote: ForkServer
) -> None:
    env = make_env(tmp_path / "a", pg_url, "node-a", exchange_zygote)
    side = tmp_path / "side.txt"
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("prompts.dose", [{"path": str(side)}])
        wait_until(lambda: env.show(run_id)["prompt"], 30, message="the prompt to open")
        gateway.kill9()
        listed = env.cli("prompts", "--json").check().json()
        assert [(p["run"], p["key"], p["status"]) for p in listed] == [(run_id, "approval", "OPEN")]
        refused = env.cli("answer", run_id[:8], "approval", "-v", "approved=true", "-v", "kg=-1")
        assert refused.returncode == 1 and "field 'kg'" in refused.stderr, refused.stderr
        gateway.start()
        env.cli("answer", run_id[:8], "approval", "-v", "approved=true", "-v", "kg=12.5",
                "--reason", "weighed").check()
        view = wait_until(lambda: (v := env.show(run_id))["status"] == "SUCCESS" and v, 30, message="SUCCESS")
    assert view["result"]["values"] == {"approved": True, "kg": 12.5}
    assert lines(side) == ["before", "after 12.5"]  # nothing before the prompt ran twice
    assert [s["name"] for s in view["steps"]].count("exchange.prompt") == 1


def test_a_prompt_answered_through_one_gateway_while_another_executes_the_run(
    tmp_path: Path, pg_url: str, exchange_zygote: ForkServer
) -> None:
    executing = make_env(tmp_path / "b", pg_url, "node-b", exchange_zygote)
    serving = make_env(tmp_path / "a", pg_url, "node-a", exchange_zygote)
    token = serving.cli("tokens", "create", "op", "--role", "operator").check().stdout.strip()
    side = tmp_path / "side.txt"
    with executing.gateway("--queue", "line2") as runner, serving.gateway("--queue", "office", "--api",
                                                                            "127.0.0.1:0") as api_gateway:
        runner.start()
        api_gateway.start()
        url = wait_until(lambda: re.findall(r"gateway API listening on (\S+)", api_gateway.log_text()), 20,
                         message="the API's address")[0]
        (run_id,) = executing.start_runs("prompts.dose", [{"path": str(side)}], queue="line2")
        wait_until(lambda: executing.show(run_id)["prompt"], 30, message="the prompt to open")
        answer = requests.post(f"{url}/api/v1/runs/{run_id}/prompts/approval", timeout=20,
                               headers={"Authorization": f"Bearer {token}"},
                               json={"values": {"approved": True, "kg": 3}})
        assert answer.status_code == 200, answer.text
        view = wait_until(lambda: (v := executing.show(run_id))["status"] == "SUCCESS" and v, 30,
                          message="SUCCESS")
    assert view["owner_node"] == "node-b"
    assert view["result"]["by"] == "token:op" and view["result"]["values"]["kg"] == 3.0
    assert lines(side) == ["before", "after 3.0"]
