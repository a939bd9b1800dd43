"""The batch record of a run executed by a real gateway process, on SQLite and on PostgreSQL: a
tag write, a step retried, an operator's HOLD and RESUME, a phase the PLC ran, a prompt answered by
one person and verified by an Exchange user by electronic signature (with her password, from the
command line). ``exchange record --json`` holds each of them with its actor, the exceptions list the
retry and the hold, the ``[record]`` tag the gateway sampled shows the write, and the audit chain is
intact."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simulators import config_out
from simulators.engine import SimulatedPlant
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, wait_until
from tests.phases.conftest import PHASE, plant_document, sections_for

SETPOINT = "[plant]R1/Setpoint"
APP = '''
from pathlib import Path

from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.steps import control, operator, phase, tags


@step(name="rec.weigh", options={"retries_allowed": True, "max_attempts": 3, "interval_seconds": 0.01})
def weigh(marker):
    if not Path(marker).exists():  # the first attempt fails, once per run
        Path(marker).write_text("tried")
        raise ConnectionError("the scale did not answer")
    return 12.5


@workflow(name="rec.batch")
def batch(marker: str):
    tags.write("[plant]R1/Setpoint", 42.5)
    kg = weigh(marker)
    control.checkpoint(wait_ms=30_000)  # takes the HOLD, waits for the RESUME
    charged = phase.run("R1/Charge", params={"target_l": 7.0}, poll_ms=20)
    dose = operator.prompt("dose", "Dose the salt", fields={"kg": {"type": "float"}}, verify_role="operator")
    return {"kg": kg, "charged": charged["reports"], "dose": dose["values"]}
'''
EVE_PASSWORD = "eve's long password"


@pytest.fixture
def plant() -> Iterator[SimulatedPlant]:
    document = plant_document()
    document["tags"][SETPOINT] = {"device": "plc", "address": "HRF30"}
    with SimulatedPlant.from_document(document, free_ports=True).start() as sim:
        yield sim


def view(runtime: Any, run_id: str) -> dict[str, Any]:
    found: dict[str, Any] = runtime.get_run(run_id, steps=False)
    return found


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_the_record_of_a_gateways_run_holds_each_thing_with_its_actor(
        backend: str, request: pytest.FixtureRequest, tmp_path: Path, exchange_zygote: ForkServer,
        plant: SimulatedPlant) -> None:
    store_url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    env = ExchangeEnv.create(tmp_path / "plant", store_url=store_url, zygote=exchange_zygote)
    env.write_app("rec_app", APP)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write("\n" + config_out.dumps(sections_for(plant)))
        config.write(f'\n[record]\ntags = ["{SETPOINT}"]\ninterval_ms = 100\n')  # the gateway samples it
    env.cli("users", "add", "eve", "--role", "operator", input_text=EVE_PASSWORD + "\n").check()
    runtime = env.runtime()
    request.addfinalizer(runtime.close)
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("rec.batch", [{"marker": str(tmp_path / "weighed")}])
        runtime.send_command(run_id, "HOLD", "foam in the tank", actor="olga")
        wait_until(lambda: view(runtime, run_id)["state"] == "HELD", 30, message="the run to hold")
        runtime.send_command(run_id, "RESUME", "foam gone", actor="olga")
        wait_until(lambda: view(runtime, run_id)["prompt"], 30, message="the prompt to open")
        runtime.answer_prompt(run_id, "dose", {"kg": 12.1}, actor="olga", role="operator", reason="sheet 7")
        env.cli("verify", run_id, "dose", "--user", "eve", "--password-env", "EVE_PW", "--meaning",
                "second check of the dose", extra_env={"EVE_PW": EVE_PASSWORD}).check()
        wait_until(lambda: view(runtime, run_id)["status"] == "SUCCESS", 30, message="the run to succeed")

    record = env.cli("record", run_id, "--json").check().json()
    assert record["run"]["status"] == "SUCCESS" and record["run"]["result"]["dose"] == {"kg": 12.1}
    (write,) = [w for w in record["tag_writes"] if w["tag"] == SETPOINT]
    assert (write["value"], write["outcome"], write["step_seq"]) == (42.5, "written", 1)
    assert plant.read(SETPOINT) == 42.5
    assert [s["attempts"] for s in record["steps"] if s["name"] == "rec.weigh"] == [2]
    assert [(c["cmd"], c["actor"], c["reason"], c["outcome"]) for c in record["commands"]] == [
        ("HOLD", "olga", "foam in the tank", "CONSUMED"), ("RESUME", "olga", "foam gone", "CONSUMED")]
    (charge,) = record["phases"]
    assert (charge["phase"], charge["status"], charge["parameters"]) == (PHASE, "SUCCESS", {"target_l": 7.0})
    assert charge["reports"] == {"actual_l": 19.5} and [c["command"] for c in charge["commands"]][:1] == ["START"]
    (dose,) = record["prompts"]
    assert (dose["by"], dose["verified_by"], dose["reason"]) == ("olga", "eve", "sheet 7")
    (signed,) = dose["signatures"]
    assert (signed["user"], signed["meaning"], signed["action"]) == ("eve", "second check of the dose", "verify")
    assert [s["event_id"] for s in record["signatures"]] == [signed["event_id"]] and len(signed["record_hash"]) == 64
    kinds = [item["kind"] for item in record["exceptions"]]
    assert kinds == ["retry", "hold", "command"], kinds
    assert [(item["actor"], item["reason"]) for item in record["exceptions"][1:]] == [
        ("olga", "foam in the tank"), ("olga", "foam gone")]
    # The process values the gateway sampled: the setpoint the run wrote (its first step; the
    # sampler's first look may come before it, and see 0), within the run's span.
    setpoint = record["values"]["tags"][SETPOINT]
    assert [value for _at, value in setpoint] in ([42.5], [0.0, 42.5]), setpoint
    assert record["values"]["interval_ms"] == 100
    assert record["run"]["started_at"] <= setpoint[0][0] and setpoint[-1][0] <= record["run"]["finished_at"]
    (chain,) = runtime.verify_audit([run_id])
    assert (chain["state"], chain["head"]) == ("ok", record["audit_head"])
