"""The command dict of ``recvCommand`` has snake_case keys (``sent_at``), also when a run replays a
command an older version recorded as ``sentAt``: a run in flight across the upgrade reads one key.

The run executes on a real gateway process; the older record is made by rewriting the recorded
step's output in the SQLite store while no gateway runs (what the older version stored), then a new
gateway replays the run.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, update

from exchange._store.tables.schema import steps
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv
from tests.waiting import wait_until

APP = '''
from exchange.workflows.bootstrap import getWorkflows, workflow


@workflow(name="keys.hold_then_report")
def hold_then_report():
    rt = getWorkflows()
    while True:
        held = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.2)
        if held and held["cmd"] == "HOLD":
            break
    while True:
        stop = rt.recvCommand(currentState="HELD", timeoutSeconds=0.2)
        if stop and stop["cmd"] == "STOP":
            return {"hold_sent_at": held["sent_at"], "hold_keys": sorted(held), "stop_keys": sorted(stop)}
'''


def test_a_command_recorded_with_sentAt_replays_as_sent_at(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    env.write_app("keys_app", APP)
    runtime = env.runtime()
    try:
        with env.gateway() as first, env.gateway(name="second") as second:
            first.start()
            run_id = env.cli("start", "keys.hold_then_report").check().stdout.strip()
            wait_until(lambda: runtime.get_run(run_id)["state"] == "RUNNING", 20, message="state RUNNING")
            env.cli("send", run_id, "HOLD").check()
            wait_until(lambda: runtime.get_run(run_id)["state"] == "HELD", 20, message="state HELD")
            (recorded,) = [s for s in runtime.get_run(run_id)["steps"] if isinstance(s["output"], dict)]
            sent_at = recorded["output"]["sent_at"]
            dead_owner = runtime.get_run(run_id)["owner"]
            first.kill9()

            with runtime.store.db.transaction("an older version's record") as conn:
                changed = conn.execute(
                    update(steps)
                    .where(steps.c.run_id == run_id, steps.c.seq == recorded["seq"])
                    .values(output=func.replace(steps.c.output, '"sent_at"', '"sentAt"'))
                ).rowcount
            assert changed == 1
            (old,) = [s for s in runtime.get_run(run_id)["steps"] if s["seq"] == recorded["seq"]]
            assert "sentAt" in old["output"] and "sent_at" not in old["output"]

            second.start()  # replays the run: the recorded HOLD comes back from the store
            wait_until(lambda: runtime.get_run(run_id)["owner"] != dead_owner, 20,
                       message="the new gateway to take the run")
            env.cli("send", run_id, "STOP").check()
            view = runtime.wait_for(run_id, 20)
    finally:
        runtime.close()
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"]["hold_sent_at"] == sent_at
    assert "sent_at" in view["result"]["hold_keys"] and "sentAt" not in view["result"]["hold_keys"]
    assert "sent_at" in view["result"]["stop_keys"]
