"""Operator prompts across real gateway processes on PostgreSQL: a gateway killed with -9 while a
prompt waits, the prompt answered from the command line and the restarted gateway going on; a
prompt answered through one gateway's API while another gateway executes the run; and a prompt's
deadline that passes while its gateway is dead, refused by the API and the command line alike."""

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


TIMED_APP = '''
from exchange.errors import PromptTimeout
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import operator


@workflow(name="prompts.timed")
def timed(timeout_s):
    try:
        answer = operator.prompt("approval", "Approve dosing of batch B-8",
                                 fields={"kg": {"type": "float", "min": 0}}, timeout_s=timeout_s)
    except PromptTimeout as exc:
        return {"timed_out": exc.key}
    return answer
'''


def make_env(root: Path, store_url: str, node: str, zygote: ForkServer | None = None) -> ExchangeEnv:
    env = ExchangeEnv.create(root, store_url=store_url, engine={"node_id": node}, zygote=zygote)
    env.write_app("prompt_app", APP)
    env.write_app("timed_app", TIMED_APP)
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


def test_a_prompt_answered_through_one_gateway_while_another_executes_the_run_and_a_deadline_kept_through_kill_9(
    tmp_path: Path, pg_url: str, exchange_zygote: ForkServer
) -> None:
    """A prompt answered through one gateway's API while another gateway executes the run. Then an
    outage that does not extend timeout_s: the executing gateway is killed with -9 before a second
    prompt's deadline, the answer comes after it through the API (409) and the command line (exit
    1), and the restarted gateway times the prompt out instead of going on with an answer."""
    executing = make_env(tmp_path / "b", pg_url, "node-b", exchange_zygote)
    serving = make_env(tmp_path / "a", pg_url, "node-a", exchange_zygote)
    token = serving.cli("tokens", "create", "op", "--role", "operator").check().stdout.strip()
    auth = {"Authorization": f"Bearer {token}"}
    side = tmp_path / "side.txt"
    runtime = serving.runtime()
    store = runtime.store
    try:
        with executing.gateway("--queue", "line2") as runner, serving.gateway("--queue", "office", "--api",
                                                                                "127.0.0.1:0") as api_gateway:
            runner.start()
            api_gateway.start()
            url = wait_until(lambda: re.findall(r"gateway API listening on (\S+)", api_gateway.log_text()), 20,
                             message="the API's address")[0]
            (run_id,) = executing.start_runs("prompts.dose", [{"path": str(side)}], queue="line2")
            wait_until(lambda: executing.show(run_id)["prompt"], 30, message="the prompt to open")
            answer = requests.post(f"{url}/api/v1/runs/{run_id}/prompts/approval", timeout=20, headers=auth,
                                   json={"values": {"approved": True, "kg": 3}})
            assert answer.status_code == 200, answer.text
            view = wait_until(lambda: (v := executing.show(run_id))["status"] == "SUCCESS" and v, 30,
                              message="SUCCESS")

            (timed_id,) = executing.start_runs("prompts.timed", [{"timeout_s": 3}], queue="line2")
            prompt = wait_until(lambda: store.prompts.get(timed_id, "approval"), 30, interval_s=0.005,
                                message="the timed prompt to open")
            runner.kill9()
            assert store.prompts.get(timed_id, "approval").status == "OPEN"
            assert store.clock.seconds_until(prompt.deadline_at) > 0, "killed after the deadline: too slow"
            wait_until(lambda: store.clock.seconds_until(prompt.deadline_at) < 0, 20, message="the deadline")
            late = requests.post(f"{url}/api/v1/runs/{timed_id}/prompts/approval", timeout=20, headers=auth,
                                 json={"values": {"kg": 3}})
            assert late.status_code == 409 and "timed out at" in late.json()["error"], late.text
            refused = serving.cli("answer", timed_id[:8], "approval", "-v", "kg=3")
            assert refused.returncode == 1 and "timed out at" in refused.stderr, refused.stderr
            assert store.prompts.get(timed_id, "approval").answered_by is None
            runner.start()
            timed = wait_until(lambda: (v := executing.show(timed_id))["status"] == "SUCCESS" and v, 30,
                               message="the timed run's SUCCESS")
    finally:
        runtime.close()
    assert view["owner_node"] == "node-b"
    assert view["result"]["by"] == "token:op" and view["result"]["values"]["kg"] == 3.0
    assert lines(side) == ["before", "after 3.0"]
    assert timed["result"] == {"timed_out": "approval"}
    closed = [e for e in timed["events"] if e["kind"] == "prompt_closed"]
    assert [e["payload"]["status"] for e in closed] == ["TIMED_OUT"]
    assert not [e for e in timed["events"] if e["kind"] == "prompt_answered"]
    assert [s["name"] for s in timed["steps"]].count("exchange.prompt") == 1
