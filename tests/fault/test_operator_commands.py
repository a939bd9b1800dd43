"""HOLD, RESUME and STOP through the CLI against a running gateway process (the demo.batch_loop app).

Every command goes through ``exchange send RUN CMD --reason ...`` as a process of its own; what the
run did is read back with ``exchange show RUN --json`` (and, for cheap polling while waiting, from the
store in this process). A run HELD when its gateway is killed with -9 is HELD again after the restart.
The gateways and commands are forked from the session's ``exchange_zygote`` (see ``tests/harness.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, Gateway, wait_until

REPO_APPS = Path(__file__).resolve().parents[2] / "apps"
PHASE_STEP = "batch.phase"


class Runs:
    """Cheap reads of the store while waiting; assertions go through ``exchange show --json``."""

    def __init__(self, env: ExchangeEnv) -> None:
        self.env = env
        self.runtime = env.runtime()

    def view(self, run_id: str) -> dict[str, Any]:
        view: dict[str, Any] = self.runtime.get_run(run_id)
        return view

    def phases(self, run_id: str) -> int:
        return sum(1 for s in self.view(run_id)["steps"] if s["name"] == PHASE_STEP)

    def events(self, run_id: str, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.view(run_id)["events"] if e["kind"] == kind]

    def wait_state(self, run_id: str, state: str, timeout_s: float = 15) -> dict[str, Any]:
        return wait_until(
            lambda: (v := self.view(run_id))["state"] == state and v,
            timeout_s,
            message=lambda: f"run {run_id} state {state}, is {self.view(run_id)['state']}",
        )

    def wait_dropped(self, run_id: str, cmd: str, after_id: int = 0, timeout_s: float = 15) -> dict[str, Any]:
        """The first command_dropped event of ``cmd`` newer than event ``after_id``."""

        def dropped() -> dict[str, Any] | None:
            for event in self.events(run_id, "command_dropped"):
                if event["id"] > after_id and event["payload"]["cmd"] == cmd:
                    return event
            return None

        return wait_until(dropped, timeout_s, message=f"{cmd} dropped by run {run_id}")

    def last_event_id(self, run_id: str) -> int:
        events = self.view(run_id)["events"]
        return int(events[-1]["id"]) if events else 0


def send(env: ExchangeEnv, run_id: str, cmd: str, reason: str) -> None:
    result = env.cli("send", run_id, cmd, "--reason", reason).check()
    assert f"sent {cmd} to run {run_id}" in result.stdout


def start_batch(env: ExchangeEnv, runs: Runs, **params: Any) -> str:
    args = [arg for k, v in params.items() for arg in ("-p", f"{k}={v}")]
    run_id: str = env.cli("start", "demo.batch_loop", *args, "--json").check().json()["id"]
    wait_until(lambda: runs.view(run_id)["state"] == "RUNNING" and runs.phases(run_id) >= 1, 20,
               message=f"run {run_id} executing its first phase")
    return run_id


@pytest.fixture(scope="module")
def shared(
    tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer
) -> Iterator[tuple[ExchangeEnv, Gateway, Runs]]:
    env = ExchangeEnv.create(tmp_path_factory.mktemp("operator"), extra_app_paths=[REPO_APPS], zygote=exchange_zygote)
    runs = Runs(env)
    with env.gateway() as gateway:
        gateway.start()
        yield env, gateway, runs
    runs.runtime.close()


def test_hold_resume_stop_through_the_cli(shared: tuple[ExchangeEnv, Gateway, Runs]) -> None:
    env, _gateway, runs = shared
    run_id = start_batch(env, runs, batch_id="B7", phases=500, phase_ms=20)

    # RESUME is not allowed while RUNNING: dropped, recorded with the reason, the run goes on.
    send(env, run_id, "RESUME", "too early")
    event = runs.wait_dropped(run_id, "RESUME")
    assert event["reason"] == "RESUME is not accepted in state RUNNING"
    assert event["payload"]["state"] == "RUNNING"
    phases = runs.phases(run_id)
    wait_until(lambda: runs.phases(run_id) > phases, 10, message="phases after the dropped RESUME")

    send(env, run_id, "HOLD", "operator check")
    runs.wait_state(run_id, "HELD")
    held = env.show(run_id)
    assert held["status"] == "RUNNING" and held["state"] == "HELD"
    accepted = [e for e in held["events"] if e["kind"] == "command" and e["payload"]["cmd"] == "HOLD"]
    assert len(accepted) == 1 and accepted[0]["reason"] == "operator check" and "@" in accepted[0]["actor"]
    sent = [e for e in held["events"] if e["kind"] == "command_sent" and e["payload"]["cmd"] == "HOLD"]
    assert sent[0]["reason"] == "operator check" and sent[0]["actor"] == accepted[0]["actor"]
    phases_at_hold = sum(1 for s in held["steps"] if s["name"] == PHASE_STEP)

    # While HELD the run polls (a second HOLD is dropped: proof it is alive) but runs no phase.
    send(env, run_id, "HOLD", "again")
    event = runs.wait_dropped(run_id, "HOLD")
    assert event["reason"] == "HOLD is not accepted in state HELD"
    assert runs.phases(run_id) == phases_at_hold

    send(env, run_id, "RESUME", "checked")
    wait_until(lambda: runs.phases(run_id) > phases_at_hold, 10, message="a phase after RESUME")
    assert runs.view(run_id)["state"] == "RUNNING"

    send(env, run_id, "STOP", "end of shift")
    done = runs.runtime.wait_for(run_id, 15)
    assert done["status"] == "SUCCESS", done
    final = env.show(run_id)
    assert final["state"] == "STOPPED"
    assert final["result"]["stopped"] is True
    assert final["result"]["completed"] == list(range(1, runs.phases(run_id) + 1))
    commands = [(e["payload"]["cmd"], e["reason"]) for e in final["events"] if e["kind"] == "command"]
    assert commands == [("HOLD", "operator check"), ("RESUME", "checked"), ("STOP", "end of shift")]
    states = [e["payload"]["state"] for e in final["events"] if e["kind"] == "state"]
    assert states[-4:] == ["RUNNING", "HELD", "RUNNING", "STOPPED"]


def test_stop_while_held_ends_the_run(shared: tuple[ExchangeEnv, Gateway, Runs]) -> None:
    env, _gateway, runs = shared
    run_id = start_batch(env, runs, phases=500, phase_ms=20)
    send(env, run_id, "HOLD", "hold it")
    runs.wait_state(run_id, "HELD")
    send(env, run_id, "STOP", "abort batch")
    done = runs.runtime.wait_for(run_id, 15)
    assert done["status"] == "SUCCESS" and done["state"] == "STOPPED"
    assert done["result"]["stopped"] is True


def test_unknown_command_and_unknown_run_fail_with_one_line(shared: tuple[ExchangeEnv, Gateway, Runs]) -> None:
    env, _gateway, runs = shared
    run_id = start_batch(env, runs, phases=500, phase_ms=20)
    before = runs.view(run_id)["events"]

    result = env.cli("send", run_id, "FROBNICATE", "--reason", "typo")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "FROBNICATE" in lines[0] and "Traceback" not in result.stderr, result.stderr
    missing = "00000000-0000-0000-0000-000000000000"
    result = env.cli("send", missing, "HOLD")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and missing in lines[0], result.stderr

    # Nothing was posted: the run has no new command events and keeps running.
    after = runs.view(run_id)["events"]
    assert [e for e in after if e["kind"].startswith("command")] == [
        e for e in before if e["kind"].startswith("command")
    ]
    send(env, run_id, "STOP", "cleanup")
    assert runs.runtime.wait_for(run_id, 15)["status"] == "SUCCESS"


def test_held_run_survives_kill9_and_resumes(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path, extra_app_paths=[REPO_APPS], zygote=exchange_zygote)
    runs = Runs(env)
    try:
        with env.gateway() as gateway:
            gateway.start()
            run_id = start_batch(env, runs, batch_id="K9", phases=12, phase_ms=20)
            send(env, run_id, "HOLD", "before the crash")
            runs.wait_state(run_id, "HELD")
            phases_at_hold = runs.phases(run_id)
            assert phases_at_hold < 12
            gateway.kill9()

            gateway.start()
            wait_until(lambda: runs.runtime.store.runs.get(run_id).executions == 2, 15,
                       message="the run to resume in the new gateway")
            marker = runs.last_event_id(run_id)
            send(env, run_id, "HOLD", "probe after restart")
            event = runs.wait_dropped(run_id, "HOLD", after_id=marker)
            assert event["reason"] == "HOLD is not accepted in state HELD"  # the live run is HELD
            shown = env.show(run_id)
            assert shown["status"] == "RUNNING" and shown["state"] == "HELD"
            assert sum(1 for s in shown["steps"] if s["name"] == PHASE_STEP) == phases_at_hold

            send(env, run_id, "RESUME", "after the crash")
            done = runs.runtime.wait_for(run_id, 30)
            assert done["status"] == "SUCCESS", done
            assert done["result"] == {"stopped": False, "completed": list(range(1, 13))}
            final = env.show(run_id)
            assert final["state"] == "COMPLETE"
            phase_steps = [s for s in final["steps"] if s["name"] == PHASE_STEP]
            assert [s["output"]["phase"] for s in phase_steps] == list(range(1, 13))  # each phase once
            commands = [(e["payload"]["cmd"], e["reason"]) for e in final["events"] if e["kind"] == "command"]
            assert commands == [("HOLD", "before the crash"), ("RESUME", "after the crash")]
    finally:
        runs.runtime.close()
