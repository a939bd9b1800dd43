"""``/metrics`` reports each device's link as the gateway last found it: up for the simulated plant's
Modbus server, down for a device nobody listens for, measured through a real workflow's reads."""

from __future__ import annotations

import socket
from pathlib import Path

from simulators.plant_servers import PlantServers
from tests.api.conftest import start_api_gateway
from tests.cli.plant_env import LEVEL, plant_env
from tests.forkserver import ForkServer
from tests.harness import wait_until

READER = '''
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import tags


@workflow(name="links.read")
def read(path):
    return tags.read([path])[0]["quality"]
'''


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_metrics_show_which_device_links_are_up(tmp_path: Path, sim_plant: PlantServers,
                                                exchange_zygote: ForkServer) -> None:
    extra = f"""
[devices.dead_plc]
driver = "modbus"
host = "127.0.0.1"
port = {_closed_port()}
unit_id = 1
timeout_ms = 500

[tags."[dead]Level"]
device = "dead_plc"
address = "HR1"
"""
    env = plant_env(tmp_path / "project", sim_plant, exchange_zygote, extra)
    env.write_app("links_app", READER)
    gateways = start_api_gateway(env)
    api = next(gateways)
    try:
        assert "exchange_device_link_up{" not in api.call("GET", "/metrics").text  # nobody asked a device yet
        qualities = {}
        for path in (LEVEL, "[dead]Level"):
            answer = api.call("POST", "/api/v1/runs", "engineer", json={"workflow": "links.read",
                                                                         "params": {"path": path}})
            assert answer.status_code == 201, answer.text
            run_id = answer.json()["id"]
            wait_until(lambda run_id=run_id: api.run(run_id)["status"] == "SUCCESS", 30, message=f"reading {path}")
            qualities[path] = api.run(run_id)["result"]
        assert qualities == {LEVEL: "Good", "[dead]Level": "Bad_NotConnected"}
        metrics = api.call("GET", "/metrics").text
        assert 'exchange_device_link_up{device="sim_modbus"} 1.0' in metrics
        assert 'exchange_device_link_up{device="dead_plc"} 0.0' in metrics
        assert 'exchange_device_link_changed_timestamp_seconds{device="dead_plc"}' in metrics
    finally:
        gateways.close()
