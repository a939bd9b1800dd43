"""A takeover while a phase runs: the gateway following the phase is frozen (SIGSTOP) past its lease,
a second gateway on the same PostgreSQL takes the run over and re-attaches to the phase in the state
the PLC reports, and the operator's HOLD and RESUME reach the phase through it. The frozen gateway,
continued, writes nothing more to the PLC: every command it could send is committed first, fenced."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from simulators import config_out
from simulators.engine import SimulatedPlant
from tests.conftest import PostgresServer
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until
from tests.phases.conftest import PHASE, plant_document, sections_for
from tests.waiting import holds_for

APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import phase

@workflow(name="phase_takeover.charge")
def charge():
    return phase.run("R1/Charge", params={"target_l": 7.0}, poll_ms=20)
"""
LEASE_SECONDS = 1.0


@pytest.fixture
def plant() -> Iterator[SimulatedPlant]:
    with SimulatedPlant.from_document(plant_document(duration_s=600), free_ports=True).start() as sim:
        yield sim


@pytest.mark.timeout(120)
def test_a_second_gateway_takes_the_phase_over_and_the_first_writes_nothing(
        tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer, plant: SimulatedPlant) -> None:
    store_url = postgres.url(postgres.create_database("phase_takeover"))
    envs = []
    for node in ("frozen", "taker"):
        env = ExchangeEnv.create(tmp_path / node, store_url=store_url, zygote=exchange_zygote,
                                 engine={"node_id": node, "lease_seconds": LEASE_SECONDS})
        env.write_app("phase_takeover", APP)
        with env.config_path.open("a", encoding="utf-8") as config:
            config.write("\n" + config_out.dumps(sections_for(plant)))
        envs.append(env)
    frozen, taker = envs[0].gateway(name="frozen"), envs[1].gateway(name="taker")
    runtime = envs[1].runtime()
    try:
        frozen.start()
        (run_id,) = envs[0].start_runs("phase_takeover.charge", [{}])
        wait_until(lambda: plant.phase_state(PHASE) == "RUNNING", 30, message="the phase running")
        taker.start()
        os.kill(frozen.pid, signal.SIGSTOP)
        wait_until(lambda: str(runtime.get_run(run_id, steps=False, events=False)["owner"] or "").startswith("taker"),
                   LEASE_SECONDS + 20, message=lambda: "the second gateway to take the run over; its log ends:\n"
                   + taker.log_path.read_text(encoding="utf-8")[-4000:])
        runtime.send_command(run_id, "HOLD", "sample", actor="op")
        wait_until(lambda: runtime.get_run(run_id, steps=False, events=False)["state"] == "HELD", 20,
                   message="HELD through the second gateway")
        os.kill(frozen.pid, signal.SIGCONT)
        # Continued, the first gateway sees the phase HELD and would note it: its commit is refused.
        assert holds_for(lambda: plant.phase_commands(PHASE) == ["START", "HOLD"], 1.5)
        runtime.send_command(run_id, "RESUME", "ok", actor="op")
        wait_until(lambda: plant.phase_commands(PHASE)[-1] == "RESTART", 20, message="Restart at the PLC")
        plant.finish_phase(PHASE)
        view = wait_until(lambda: (v := runtime.get_run(run_id))["status"] in ("SUCCESS", "ERROR") and v, 30,
                          message="the run to finish")
        assert view["status"] == "SUCCESS", view["error"]
        assert plant.phase_commands(PHASE) == ["START", "HOLD", "RESTART", "RESET"]
        assert frozen.alive()
    finally:
        runtime.close()
        for gateway in (frozen, taker):
            gateway.__exit__()
