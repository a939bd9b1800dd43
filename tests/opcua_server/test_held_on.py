"""A run held on a step's failure (``on_step_error="hold"``) says why on every surface of one real
gateway: the OPC UA server of runs (``HeldOn``, read by a real asyncua client), the console's run
page and the REST API; an operator's RESUME written over OPC UA runs the step again."""

from __future__ import annotations

import re
from pathlib import Path

import requests

from tests.api.conftest import console_sign_in
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until
from tests.opcua_server.test_opcua_server import _read_or_none, start_runs_server, value, write

HELD_APP = """
from pathlib import Path
from exchange.workflows.bootstrap import step, workflow

@step(name="opcua.post")
def post(folder):
    if not (Path(folder) / "mes_up").exists():
        raise ConnectionRefusedError("MES refused the connection")
    return "posted"

@workflow(name="opcua.held", on_step_error="hold")
def held(folder):
    return post(folder)
"""
_API_LISTENING = re.compile(r"gateway API listening on (\S+)")


def test_a_held_run_says_why_over_opc_ua_in_the_console_and_the_api(
    tmp_path: Path, exchange_zygote: ForkServer
) -> None:
    env = ExchangeEnv.create(tmp_path / "env", zygote=exchange_zygote)
    env.write_app("held_app", HELD_APP)
    folder = tmp_path / "work"
    folder.mkdir()
    servers = start_runs_server(env, "--api", "127.0.0.1:0")
    server = next(servers)
    try:
        found: list[str] = []
        wait_until(lambda: found.extend(_API_LISTENING.findall(server.gateway.log_text())) or found, 20,
                   message="the API's address")
        api_url = found[0]
        (run_id,) = env.start_runs("opcua.held", [{"folder": str(folder)}])
        expected = "step 1 opcua.post: ConnectionRefusedError: MES refused the connection"
        with server.client("operator-user") as operator:
            wait_until(lambda: _read_or_none(operator, f"Runs/{run_id}/HeldOn") == expected, 20,
                       message=lambda: f"HeldOn: {_read_or_none(operator, f'Runs/{run_id}/HeldOn')!r}")
            assert value(operator, f"Runs/{run_id}/State") == "HELD"

            session = requests.Session()
            answer = console_sign_in(session, api_url, "operator-user")
            assert answer.status_code == 303, answer.text
            page = session.get(f"{api_url}/runs/{run_id}", timeout=20).text
            assert "Held on step 1 <code>opcua.post</code>" in page
            assert "ConnectionRefusedError: MES refused the connection" in page
            assert 'value="RESUME" data-cmd="RESUME" class="command">' in page  # HELD accepts RESUME
            assert 'value="HOLD" data-cmd="HOLD" class="command" disabled>' in page  # and drops HOLD
            held_on = session.get(f"{api_url}/api/v1/runs/{run_id}", timeout=20).json()["held_on"]
            assert (held_on["seq"], held_on["step"], held_on["attempts"], held_on["in_doubt"]) == (
                1, "opcua.post", 1, False)

            (folder / "mes_up").touch()
            write(operator, f"Runs/{run_id}/Command", "RESUME")
            wait_until(lambda: value(operator, f"Runs/{run_id}/Status") == "SUCCESS", 20, message="SUCCESS")
            assert value(operator, f"Runs/{run_id}/HeldOn") == ""
        view = env.show(run_id)
        assert view["result"] == "posted" and view["held_on"] is None
        (resume,) = [e for e in view["events"] if e["kind"] == "command"]
        assert (resume["payload"]["cmd"], resume["actor"]) == ("RESUME", "opcua:operator-user")
    finally:
        servers.close()
