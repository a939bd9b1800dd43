"""``exchange send`` says what happened: a warning (or with ``--strict`` a refusal) when the run's state
will not accept the command, and with ``--wait`` whether the run consumed or dropped it.

Every command is a real ``exchange`` process (forked from the session's zygote) against a real gateway
process on a SQLite file; the store is read in this process only to check what was (not) stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import ForkServer
from tests.harness import CliResult, ExchangeEnv, wait_until

APP = '''
import os
import time

from exchange.errors import AbortRequested, FatalError, StopRequested
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import control


@step(name="send.gate")
def gate(path):
    """Inside a step the run reads no command: it says so in PATH.inside, then waits for PATH."""
    open(path + ".inside", "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise FatalError("the test never opened the gate")
        time.sleep(0.01)
    return True


@workflow(name="send.loop")
def loop(gate_path=""):
    """control.checkpoint in a loop; ends on STOP or ABORT."""
    rt = getWorkflows()
    rt.setState("RUNNING")
    if gate_path:
        gate(gate_path)
    try:
        while True:
            control.checkpoint(wait_ms=1000)
    except AbortRequested:
        rt.setState("ABORTED")
        return "aborted"
    except StopRequested:
        rt.setState("STOPPED")
        return "stopped"


@workflow(name="send.raw_order")
def raw_order(gate_path):
    """The commands as plain recvCommand (default maxMessages) receives them, after a gate."""
    rt = getWorkflows()
    rt.setState("RUNNING")
    gate(gate_path)
    seen = []
    while len(seen) < 2:
        cmd = rt.recvCommand(timeoutSeconds=10)  # judged in the state last reported
        if cmd is None:
            continue
        seen.append(cmd["cmd"])
        rt.setState("HELD" if cmd["cmd"] == "HOLD" else "RUNNING")
    return seen
'''


@pytest.fixture(scope="module")
def gateway_env(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ExchangeEnv]:
    env = ExchangeEnv.create(tmp_path_factory.mktemp("send"), zygote=exchange_zygote)
    env.write_app("send_app", APP)
    with env.gateway() as gateway:
        gateway.start()
        yield env


@pytest.fixture(scope="module")
def runtime(gateway_env: ExchangeEnv) -> Iterator[Any]:
    rt = gateway_env.runtime()
    yield rt
    rt.close()


def start(env: ExchangeEnv, workflow: str, **params: Any) -> str:
    args = [arg for k, v in params.items() for arg in ("-p", f"{k}={v}")]
    run_id: str = env.cli("start", workflow, *args).check().stdout.strip()
    return run_id


def wait_state(runtime: Any, run_id: str, state: str) -> None:
    wait_until(lambda: runtime.get_run(run_id, steps=False, events=False)["state"] == state, 15,
               message=lambda: f"run {run_id} in state {state}, is {runtime.get_run(run_id)['state']}")


def commands_sent(runtime: Any, run_id: str) -> list[str]:
    return [e["payload"]["cmd"] for e in runtime.get_run(run_id)["events"] if e["kind"] == "command_sent"]


def one_line(result: CliResult) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def stop(env: ExchangeEnv, runtime: Any, run_id: str) -> None:
    env.cli("send", run_id, "STOP").check()
    assert runtime.wait_for(run_id, 15)["status"] == "SUCCESS"


def test_wait_reports_consumed_with_the_state_that_followed(gateway_env: ExchangeEnv, runtime: Any) -> None:
    env = gateway_env
    run_id = start(env, "send.loop")
    wait_state(runtime, run_id, "RUNNING")

    held = env.cli("send", run_id, "HOLD", "--reason", "sample", "--wait").check()
    lines = held.stdout.strip().splitlines()
    assert lines[0].startswith(f"sent HOLD to run {run_id} (message ")
    assert lines[1] == f"HOLD consumed by run {run_id} (accepted in state RUNNING); state now HELD"
    assert held.stderr == ""
    assert runtime.get_run(run_id, steps=False, events=False)["state"] == "HELD"

    resumed = env.cli("send", run_id, "resume", "--wait", "--json").check().json()
    assert resumed["cmd"] == "RESUME" and resumed["warning"] is None
    assert resumed["outcome"] == "CONSUMED" and resumed["note"] == "accepted in state HELD"
    assert resumed["state_after"] == "RUNNING" and resumed["status"] == "RUNNING"
    assert isinstance(resumed["message_id"], int) and isinstance(resumed["step_seq"], int)

    stopped = env.cli("send", run_id, "STOP", "--wait").check()
    assert stopped.stdout.strip().splitlines()[1] == (
        f"STOP consumed by run {run_id} (accepted in state RUNNING); state now STOPPED")
    assert runtime.wait_for(run_id, 15)["result"] == "stopped"


def test_abort_is_sent_strictly_to_a_held_run_and_ends_it_aborted(gateway_env: ExchangeEnv, runtime: Any) -> None:
    env = gateway_env
    run_id = start(env, "send.loop")
    wait_state(runtime, run_id, "RUNNING")
    env.cli("send", run_id, "HOLD", "--wait").check()
    aborted = env.cli("send", run_id, "abort", "--strict", "--reason", "leak at V-101", "--wait").check()
    assert aborted.stderr == ""
    assert aborted.stdout.strip().splitlines()[1] == (
        f"ABORT consumed by run {run_id} (accepted in state HELD); state now ABORTED")
    view = runtime.wait_for(run_id, 15)
    assert (view["status"], view["result"], view["state"]) == ("SUCCESS", "aborted", "ABORTED")
    (sent,) = [e for e in view["events"] if e["kind"] == "command" and e["payload"]["cmd"] == "ABORT"]
    assert sent["reason"] == "leak at V-101"
    assert "ABORT" in env.cli("send", "--help").check().stdout


def test_strict_refuses_hold_to_a_held_run_and_stores_nothing(gateway_env: ExchangeEnv, runtime: Any) -> None:
    env = gateway_env
    run_id = start(env, "send.loop")
    wait_state(runtime, run_id, "RUNNING")
    env.cli("send", run_id, "HOLD", "--wait").check()
    sent_before = commands_sent(runtime, run_id)
    messages_before = runtime.store.mailbox.fate(runtime.store.mailbox.highest_id())

    refused = env.cli("send", run_id, "HOLD", "--strict", "--reason", "again")
    assert refused.returncode == 1 and refused.stdout == ""
    assert one_line(refused) == (
        f"error: run {run_id} will not accept HOLD: HOLD is not accepted in state HELD; nothing sent")
    assert commands_sent(runtime, run_id) == sent_before  # no command_sent event ...
    assert runtime.store.mailbox.fate(runtime.store.mailbox.highest_id()) == messages_before  # ... no message

    # --strict sends what the state accepts.
    resumed = env.cli("send", run_id, "RESUME", "--strict", "--wait").check()
    assert "state now RUNNING" in resumed.stdout
    stop(env, runtime, run_id)


def test_a_command_the_state_refuses_is_sent_with_a_warning_and_wait_reports_it_dropped(
    gateway_env: ExchangeEnv, runtime: Any
) -> None:
    env = gateway_env
    run_id = start(env, "send.loop")
    wait_state(runtime, run_id, "RUNNING")
    env.cli("send", run_id, "HOLD", "--wait").check()

    dropped = env.cli("send", run_id, "HOLD", "--reason", "twice", "--wait")
    assert dropped.returncode == 1
    warning, error = dropped.stderr.strip().splitlines()
    assert warning == (f"warning: HOLD is not accepted in state HELD: run {run_id} will drop HOLD when it "
                       f"receives it (--strict refuses to send such a command)")
    assert error == f"error: HOLD dropped by run {run_id}: HOLD is not accepted in state HELD"
    assert dropped.stdout.startswith(f"sent HOLD to run {run_id}")
    (event,) = [e for e in runtime.get_run(run_id)["events"] if e["kind"] == "command_dropped"]
    assert event["reason"] == "HOLD is not accepted in state HELD"

    as_json = env.cli("send", run_id, "HOLD", "--wait", "--json")
    assert as_json.returncode == 1 and as_json.stderr == ""
    view = as_json.json()
    assert view["outcome"] == "DROPPED" and view["note"] == "HOLD is not accepted in state HELD"
    assert view["warning"] == "HOLD is not accepted in state HELD" and view["state"] == "HELD"

    resumed = env.cli("send", run_id, "RESUME", "--wait").check()
    assert resumed.stderr == "" and "state now RUNNING" in resumed.stdout
    # Without --wait the warning is all: exit 0.
    warned = env.cli("send", run_id, "RESUME")
    assert warned.returncode == 0 and warned.stdout.startswith(f"sent RESUME to run {run_id}")
    assert one_line(warned).startswith("warning: RESUME is not accepted in state RUNNING: ")
    stop(env, runtime, run_id)


def test_wait_times_out_with_exit_3_while_the_run_is_inside_a_step(
    gateway_env: ExchangeEnv, runtime: Any, tmp_path: Path
) -> None:
    env = gateway_env
    gate = tmp_path / "gate"
    run_id = start(env, "send.loop", gate_path=str(gate))
    wait_until(lambda: Path(f"{gate}.inside").exists(), 15, message="the run inside its step")

    waited = env.cli("send", run_id, "HOLD", "--wait", "--timeout-seconds", "0.3")
    assert waited.returncode == 3
    assert one_line(waited) == (f"error: HOLD still waiting in the mailbox of run {run_id} after 0.3 s (the run "
                                f"has not received it; status RUNNING, state RUNNING)")
    usage = env.cli("send", run_id, "HOLD", "--timeout-seconds", "1")
    assert usage.returncode == 2 and "--timeout-seconds is the limit of --wait" in usage.stderr
    for bad in ("nan", "inf", "-1"):
        refused = env.cli("send", run_id, "HOLD", "--wait", "--timeout-seconds", bad)
        assert refused.returncode == 2 and "--timeout-seconds" in refused.stderr, refused.stderr
    assert commands_sent(runtime, run_id) == ["HOLD"]  # none of the refused ones was sent

    gate.touch()
    wait_state(runtime, run_id, "HELD")  # the HOLD waited for the run and was taken
    stop(env, runtime, run_id)


def test_hold_then_resume_in_one_poll_are_both_applied_in_order(
    gateway_env: ExchangeEnv, runtime: Any, tmp_path: Path
) -> None:
    """Both commands are in the mailbox before the run looks: a receive of up to 8 commands takes
    them together. HOLD is acted on, RESUME stays for the receive in HELD (it was dropped before)."""
    env = gateway_env
    gate = tmp_path / "gate"
    run_id = start(env, "send.raw_order", gate_path=str(gate))
    wait_until(lambda: Path(f"{gate}.inside").exists(), 15, message="the run inside its step")

    hold = env.cli("send", run_id, "HOLD", "--reason", "first").check()
    resume = env.cli("send", run_id, "RESUME", "--reason", "second").check()
    assert hold.stderr == "" and resume.stderr == ""  # no warning: RESUME follows the waiting HOLD
    gate.touch()

    view = runtime.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == ["HOLD", "RESUME"]
    assert [(e["payload"]["cmd"], e["reason"]) for e in view["events"] if e["kind"] == "command"] == [
        ("HOLD", "first"), ("RESUME", "second")]
    assert [e for e in view["events"] if e["kind"] == "command_dropped"] == []
    receives = [s for s in view["steps"] if s["name"] == "exchange.recvCommand"]
    assert len(receives) == 2  # one receive took both messages, yet consumed only the HOLD
    states = [e["payload"]["state"] for e in view["events"] if e["kind"] == "state"]
    assert states == ["RUNNING", "HELD", "RUNNING"]


def test_the_helper_honours_hold_resume_stop_sent_together(
    gateway_env: ExchangeEnv, runtime: Any, tmp_path: Path
) -> None:
    env = gateway_env
    gate = tmp_path / "gate"
    run_id = start(env, "send.loop", gate_path=str(gate))
    wait_until(lambda: Path(f"{gate}.inside").exists(), 15, message="the run inside its step")
    for cmd in ("HOLD", "RESUME", "STOP"):
        env.cli("send", run_id, cmd).check()
    gate.touch()
    view = runtime.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS" and view["result"] == "stopped"
    assert [e["payload"]["cmd"] for e in view["events"] if e["kind"] == "command"] == ["HOLD", "RESUME", "STOP"]
    states = [e["payload"]["state"] for e in view["events"] if e["kind"] == "state"]
    assert states == ["RUNNING", "HELD", "RUNNING", "STOPPED"]


def test_a_command_the_run_never_read_is_reported_dropped_when_it_finished(
    gateway_env: ExchangeEnv, runtime: Any, tmp_path: Path
) -> None:
    env = gateway_env
    gate = tmp_path / "gate"
    run_id = start(env, "send.raw_order", gate_path=str(gate))
    wait_until(lambda: Path(f"{gate}.inside").exists(), 15, message="the run inside its step")
    for cmd in ("HOLD", "RESUME"):
        assert env.cli("send", run_id, cmd).check().stderr == ""
    # Judged behind the two waiting commands: the run is expected to be RUNNING again by then.
    extra = env.cli("send", run_id, "RESUME", "--json").check().json()
    assert extra["warning"] == ("RESUME is not accepted in state RUNNING (the state the run is expected to "
                                "report after the 2 command(s) waiting before it)")
    message_id = extra["message_id"]
    gate.touch()
    assert runtime.wait_for(run_id, 20)["status"] == "SUCCESS"
    view = runtime.wait_for_command(run_id, message_id, 0)
    assert view["outcome"] == "DROPPED"
    assert view["note"] == "the run finished (SUCCESS) before it received the message"
