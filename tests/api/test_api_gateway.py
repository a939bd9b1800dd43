"""The API in the gateway process: on PostgreSQL too, a bad --api value, a port already in use (the
gateway stops before it runs anything), and a clean stop."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.api.conftest import start_api_gateway
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until


def test_start_hold_and_audit_through_the_api_on_postgresql(
    tmp_path: Path, pg_url: str, exchange_zygote: ForkServer
) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", store_url=pg_url, zygote=exchange_zygote)
    gateways = start_api_gateway(env)
    api = next(gateways)
    try:
        run_id = api.start(target_level=5.0)
        wait_until(lambda: api.run(run_id)["state"] == "RUNNING", 20, message="RUNNING")
        hold = api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator", json={"cmd": "HOLD", "reason": "pg"})
        assert hold.status_code == 202
        wait_until(lambda: api.run(run_id)["state"] == "HELD", 20, message="HELD")
        stop = api.call("POST", f"/api/v1/runs/{run_id}/commands", "admin", json={"cmd": "STOP", "reason": "done"})
        assert stop.status_code == 202
        wait_until(lambda: api.run(run_id)["status"] == "SUCCESS", 20, message="SUCCESS")
        actors = {(e["actor"], e["reason"]) for e in api.run(run_id)["events"] if e["kind"] == "command_sent"}
        assert actors == {("token:operator-token", "pg"), ("token:admin-token", "done")}
        metrics = api.call("GET", "/metrics").text
        assert 'exchange_runs{status="SUCCESS"} 1.0' in metrics
        assert "exchange_command_latency_seconds_count" in metrics
        api.gateway.stop()
        assert "gateway stopping" in api.gateway.log_text()
    finally:
        gateways.close()


def test_a_bad_api_address_is_a_usage_error(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    result = env.cli("gateway", "--api", "localhost")
    assert result.returncode == 2 and "--api" in result.stderr and "HOST:PORT" in result.stderr


@pytest.mark.parametrize("taken_by", ["api", "opcua"])
def test_a_port_in_use_stops_the_gateway_before_it_runs_anything(
        tmp_path: Path, exchange_zygote: ForkServer, taken_by: str) -> None:
    """The API's port, or the OPC UA server's (whose server starts only after recovery), taken by
    another process: one line naming the address, exit 1, and no run executed."""
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    env.write_app("noop", "from exchange.workflows.bootstrap import workflow\n\n\n@workflow(name='noop')\n"
                          "def noop():\n    return 1\n")
    run_id = env.cli("start", "noop").check().stdout.strip()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        where = (["--api", f"127.0.0.1:{port}"] if taken_by == "api"
                 else ["--api", "127.0.0.1:0", "--opcua-server", f"opc.tcp://127.0.0.1:{port}/x/"])
        result = env.cli("gateway", *where, timeout_s=60)
    assert result.returncode == 1, result
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines and f"127.0.0.1:{port}" in lines[0], result.stderr
    if taken_by == "opcua":
        assert "the OPC UA server could not start on" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert env.show(run_id)["status"] == "ENQUEUED"  # nothing ran
