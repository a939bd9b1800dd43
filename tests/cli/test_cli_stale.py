"""A run whose gateway died is shown as such: ``exchange runs`` and ``show`` (text and JSON) say its
owner's lease expired until a gateway takes it over, on both stores.

The gateway is a real process killed with SIGKILL (no cleanup code of it runs); the lease is short so
the test does not wait long for it to expire.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv
from tests.waiting import wait_until

LEASE_SECONDS = 1.0

APP = '''
from exchange.workflows.bootstrap import getWorkflows, workflow


@workflow(name="stale.unit")
def unit():
    rt = getWorkflows()
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.2)
        if cmd and cmd["cmd"] == "STOP":
            return "stopped"
'''


def test_a_run_of_a_killed_gateway_is_stale_until_a_gateway_takes_it_over(
    tmp_path: Path, store_url: str, exchange_zygote: ForkServer
) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", store_url=store_url, engine={"lease_seconds": LEASE_SECONDS},
                             zygote=exchange_zygote)
    env.write_app("stale_app", APP)
    runtime = env.runtime()

    def view(run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = runtime.get_run(run_id, steps=False, events=False)
        return result

    try:
        with env.gateway() as first, env.gateway(name="second") as second:
            first.start()
            run_id = env.cli("start", "stale.unit").check().stdout.strip()
            wait_until(lambda: view(run_id)["state"] == "RUNNING", 20, message="the run to report RUNNING")
            (listed,) = env.cli("runs", "--json").check().json()
            assert listed["owner_alive"] is True and listed["status"] == "RUNNING"
            dead_owner = listed["owner"]
            assert "(stale)" not in env.cli("runs").check().stdout

            first.kill9()
            wait_until(lambda: view(run_id)["owner_alive"] is False, 10 * LEASE_SECONDS,
                       message="the dead gateway's lease to expire")
            (listed,) = env.cli("runs", "--json").check().json()
            assert listed["owner_alive"] is False and listed["status"] == "RUNNING" and listed["owner"] == dead_owner
            assert listed["lease_expires_at"] is not None
            table = env.cli("runs").check().stdout.splitlines()
            (row,) = [line for line in table if line.startswith(run_id)]
            assert "RUNNING (stale)" in row
            assert table[-1].startswith("(stale): the gateway holding the run stopped renewing its lease")
            shown = env.cli("show", run_id[:8]).check().stdout
            stale = [line for line in shown.splitlines() if line.startswith("STALE")]
            assert len(stale) == 1 and f"the lease of {dead_owner} expired " in stale[0] and " s ago" in stale[0]
            assert env.cli("show", run_id[:8], "--json").check().json()["owner_alive"] is False

            second.start()  # the same node: it takes the run back when it starts
            wait_until(lambda: view(run_id)["owner"] != dead_owner and view(run_id)["owner_alive"], 20,
                       message="the new gateway to take the run over")
            (listed,) = env.cli("runs", "--json").check().json()
            assert listed["owner_alive"] is True and listed["owner"] != dead_owner
            assert "(stale)" not in env.cli("runs").check().stdout
            assert "STALE" not in env.cli("show", run_id).check().stdout

            env.cli("send", run_id[:8], "STOP").check()
            assert runtime.wait_for(run_id, 20)["status"] == "SUCCESS"
            assert env.show(run_id[:8])["owner_alive"] is None  # nobody holds a finished run
    finally:
        runtime.close()
