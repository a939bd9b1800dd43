"""A gateway process restarted (kill -9) on an app file whose step was renamed under a run waiting on
a command: it logs a WARNING naming the run, the step and both names, holds the run instead of
failing it (``exchange runs --attention`` reason ``code``, ``exchange show``), and executes no step.
With the file fixed and the gateway restarted, the run stays held until RESUME, then goes on.
(The engine's side, every command, both stores: tests/engine/test_code_hold.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until

APP = '''
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows


def _note(path, line):
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\\n")


@step(name="deploy.fill")
def fill(path):
    _note(path, "fill")


@step(name="deploy.heat")
def heat(path):
    _note(path, "heat")


@workflow(name="deploy.batch")
def batch(path: str):
    fill(path)
    getWorkflows().recvCommand(currentState="RUNNING", timeoutSeconds=60)
    heat(path)
    return "done"
'''
RENAMED = APP.replace('name="deploy.fill"', 'name="deploy.fill_tank"')


def test_a_gateway_holds_a_run_its_new_code_diverges_from_and_resume_goes_on_once_fixed(
    tmp_path: Path, exchange_zygote: ForkServer,
) -> None:
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    notes = tmp_path / "side-effects.txt"
    env.write_app("deploy_app", APP)
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("deploy.batch", [{"path": str(notes)}])
        wait_until(lambda: env.show(run_id)["steps"], 20, message="the run's first step")

        env.write_app("deploy_app", RENAMED)  # a deploy renamed the step, and the gateway died
        gateway.restart()
        warning = f"run {run_id} of deploy.batch is held: its recorded history diverges from the code loaded now " \
                  "at sequence 1: recorded deploy.fill, the code now calls deploy.fill_tank with (str)"
        wait_until(lambda: warning in gateway.log_text(), 20, message=lambda: f"the warning\n{gateway.log_text()}")
        assert "WARNING" in next(line for line in gateway.log_text().splitlines() if warning in line)
        detail = ("history diverges at step 1: recorded deploy.fill, the code now calls deploy.fill_tank; fix the "
                  "code (exchange check-replay) and RESUME")
        rows = json.loads(env.cli("runs", "--attention", "--json").check().stdout)
        assert [(row["run"], row["reason"], row["state"], row["detail"]) for row in rows] == [
            (run_id, "code", "HELD", detail)]
        listed = env.cli("runs", "--attention").check().stdout
        assert f"code      {run_id[:8]}" in listed and "history diverges at step 1" in listed
        shown = env.cli("show", run_id).check().stdout
        assert "HELD ON   its code since" in shown and "recorded deploy.fill" in shown
        assert env.show(run_id)["status"] == "RUNNING"

        env.write_app("deploy_app", APP)  # fixed, deployed again
        gateway.restart()
        wait_until(lambda: "RESUME to go on" in (env.show(run_id)["error"] or {}).get("message", ""), 20,
                   message=lambda: f"the hold to say the code replays\n{gateway.log_text()}")
        env.cli("send", run_id, "RESUME").check()
        wait_until(lambda: (v := env.show(run_id))["state"] == "RUNNING" and v["error"] is None, 20,
                   message="the run to go on")
        env.cli("send", run_id, "HOLD").check()  # what its recvCommand waits for
        done = wait_until(lambda: (v := env.show(run_id))["finished_at"] and v, 20, message="the run's end")
        assert (done["status"], done["result"]) == ("SUCCESS", "done"), done
    # fill ran once, before the deploy; heat once, after RESUME; nothing ran while it was held
    assert notes.read_text(encoding="utf-8").splitlines() == ["fill", "heat"]
