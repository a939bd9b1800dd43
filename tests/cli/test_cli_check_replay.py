"""``exchange check-replay`` and ``exchange export-run`` as a deploy runs them: a gateway process executes a
run that waits on a command; the CLI loads the apps from disk, reports ok (exit 0), and once the app
file renames a step reports where the run diverges (exit 1, the same in ``--json``). ``export-run``
prints the versioned history the test API replays. (Every kind of change, on both stores:
tests/engine/test_check_replay.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until

APP = '''
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows


@step(name="deploy.fill")
def fill(litres):
    return {"litres": litres}


@workflow(name="deploy.batch")
def batch(litres: int = 5):
    fill(litres)
    getWorkflows().recvCommand(currentState="RUNNING", timeoutSeconds=60)
    return "done"
'''


def test_check_replay_exits_1_naming_the_divergence_and_export_run_prints_the_history(
    tmp_path: Path, exchange_zygote: ForkServer,
) -> None:
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    env.write_app("deploy_app", APP)
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("deploy.batch", [{"litres": 7}])
        wait_until(lambda: env.show(run_id)["steps"], 20, message="the run's first step")

        same = env.cli("check-replay").check()
        assert same.stdout.startswith(f"ok        {run_id}  deploy.batch  replays 1 recorded step(s) to sequence 2")
        assert "1 run(s) checked: 1 ok, 0 not" in same.stderr

        env.write_app("deploy_app", APP.replace('name="deploy.fill"', 'name="deploy.fill_tank"'))
        changed = env.cli("check-replay", run_id[:8])
        assert changed.returncode == 1, changed
        assert (f"DIVERGES  {run_id}  deploy.batch  at sequence 1: recorded deploy.fill (SUCCESS, output "
                "{'litres': int}); now calls deploy.fill_tank with (int) [step]") in changed.stdout
        as_json = env.cli("check-replay", "--all-active", "--since", "1h", "--json")
        assert as_json.returncode == 1
        (outcome,) = json.loads(as_json.stdout)
        assert outcome["status"] == "diverges" and outcome["divergence"]["kind"] == "step"
        assert (outcome["divergence"]["seq"], outcome["divergence"]["called"]) == (1, "deploy.fill_tank")

        history = json.loads(env.cli("export-run", run_id).check().stdout)
        assert (history["format"], history["version"], history["run"], history["params"]) == (
            "exchange-run-history", 1, run_id, {"litres": 7})
        assert [(s["seq"], s["name"], s["output"]) for s in history["steps"]] == [(1, "deploy.fill", {"litres": 7})]
        env.cli("send", run_id, "STOP").check()
