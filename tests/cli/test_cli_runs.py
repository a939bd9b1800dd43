"""``exchange runs``, ``show`` and ``follow`` as a plant engineer uses them, through the real command
on a real SQLite store: run id prefixes everywhere, listing filters, the last steps and events of a
long run, following a run live (and Ctrl-C), and one JSON key style.

Commands are forked from the session's zygote; the tests of Ctrl-C start the command as a shell
would (``python -m exchange._cli.main``), so the signal meets a plain interpreter.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._store.runs.runs import NewRun
from tests.forkserver import ForkServer
from tests.harness import EXCHANGE_CMD, ExchangeEnv
from tests.waiting import wait_until

APP = '''
from exchange.workflows.bootstrap import getWorkflows, step, workflow


@step(name="runs.inc")
def inc(x):
    return x + 1


@step(name="runs.shutdown")
def shutdown():
    return "off"


@workflow(name="runs.count")
def count(n=3, states=0):
    rt = getWorkflows()
    for i in range(states):
        rt.setState("PHASE%d" % i)
    value = 0
    for _ in range(n):
        value = inc(value)
    return value


@workflow(name="runs.report")
def report(state="HELD"):
    getWorkflows().setState(state)
    return state


@workflow(name="runs.unit")
def unit():
    rt = getWorkflows()
    state = "RUNNING"
    while True:
        cmd = rt.recvCommand(currentState=state, timeoutSeconds=0.2)
        if cmd is None:
            continue
        if cmd["cmd"] == "HOLD":
            state = "HELD"
        elif cmd["cmd"] == "RESUME":
            state = "RUNNING"
        elif cmd["cmd"] == "STOP":
            rt.progress("shutting down")
            shutdown()
            return "stopped"
'''


@pytest.fixture
def env(tmp_path: Path, exchange_zygote: ForkServer) -> ExchangeEnv:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    env.write_app("runs_app", APP)
    return env


@pytest.fixture
def runtime(env: ExchangeEnv) -> Iterator[Any]:
    rt = env.runtime()
    yield rt
    rt.close()


def one_error_line(done: Any) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    return str(lines[0])


def run_prefix(stderr: str) -> str:
    """The 8-character prefix ``exchange run`` tags its lines with."""
    found = re.search(r"^\[([0-9a-f]{8})\] ", stderr, re.MULTILINE)
    assert found, stderr
    return found.group(1)


# ----- prefixes ------------------------------------------------------------------------------------
def test_the_ids_run_and_start_print_are_accepted_by_every_command(env: ExchangeEnv) -> None:
    done = env.cli("run", "runs.count", "-p", "n=2").check()
    prefix = run_prefix(done.stderr)
    shown = env.cli("show", prefix, "--json").check().json()
    assert shown["id"].startswith(prefix) and shown["status"] == "SUCCESS" and shown["result"] == 2
    assert env.cli("show", prefix[:4].upper(), "--json").check().json()["id"] == shown["id"]
    assert f"run       {shown['id']}" in env.cli("show", prefix[:5]).check().stdout
    followed = env.cli("follow", prefix)  # a finished run: printed at once, exit as start --wait does
    assert followed.returncode == 0 and followed.stdout.strip().splitlines()[-1] == "2", followed.stderr

    run_id = env.cli("start", "runs.unit").check().stdout.strip()  # no gateway: it stays ENQUEUED
    assert env.show(run_id)["status"] == "ENQUEUED"
    sent = env.cli("send", run_id[:6], "HOLD").check()
    assert f"sent HOLD to run {run_id}" in sent.stdout
    assert env.cli("cancel", run_id[:6], "--json").check().json() == {"run": run_id, "status": "CANCELLED"}
    followed = env.cli("follow", run_id[:7])
    assert followed.returncode == 1 and f"run {run_id} CANCELLED" in followed.stderr, followed.stderr
    view = env.show(run_id[:8])
    assert view["status"] == "CANCELLED" and [e["kind"] for e in view["events"]].count("command_sent") == 1


def test_an_ambiguous_prefix_is_one_line_naming_the_candidates_and_changes_nothing(
    env: ExchangeEnv, runtime: Any
) -> None:
    by_prefix: dict[str, str] = {}
    while True:  # run ids are random: create runs until two share their first 4 characters
        run_id, _ = runtime.store.create_run(NewRun("runs.unit", "{}", "v1", "test"))
        other = by_prefix.setdefault(run_id[:4], run_id)
        if other != run_id:
            break
        assert len(by_prefix) < 5000, "no two run ids share 4 characters"
    shared = run_id[:4]
    for args in (("show", shared), ("follow", shared), ("send", shared, "HOLD"), ("cancel", shared)):
        line = one_error_line(env.cli(*args))
        assert f"run id prefix '{shared}' is ambiguous: 2 runs start with it" in line, line
        assert f"{other} (runs.unit ENQUEUED)" in line and f"{run_id} (runs.unit ENQUEUED)" in line
        assert "give more characters" in line
    assert runtime.store.mailbox.pending(run_id, "cmd", 10) == [] == runtime.store.mailbox.pending(other, "cmd", 10)
    assert {runtime.get_run(i)["status"] for i in (run_id, other)} == {"ENQUEUED"}
    unique = next(i for i in range(36) if run_id[i] != other[i]) + 1
    assert env.cli("show", run_id[:unique], "--json").check().json()["id"] == run_id
    absent = one_error_line(env.cli("show", "zzzz"))
    assert "unknown run 'zzzz' (no run id starts with it" in absent


# ----- runs filters --------------------------------------------------------------------------------
def test_runs_filters_by_state_workflow_code_version_and_time_combined(env: ExchangeEnv) -> None:
    def started(*args: str) -> dict[str, Any]:
        view: dict[str, Any] = env.cli("run", *args, "--json").check().json()
        return view

    held_v1 = started("runs.report", "-p", "state=held")
    filling = started("runs.report", "-p", "state=FILLING")
    counted = started("runs.count")
    with (env.apps_dir / "runs_app.py").open("a") as source:
        source.write("\n# v2: the code changed\n")
    held_v2 = started("runs.report", "-p", "state=HELD")
    v1, v2 = held_v1["code_version"], held_v2["code_version"]
    assert v1 != v2 and held_v1["state"] == "HELD" and counted["state"] is None
    listed = {w["name"]: w for w in env.cli("workflows", "--json").check().json()}
    assert listed["runs.report"]["code_version"] == v2

    def ids(*filters: str) -> list[str]:
        return [run["id"] for run in env.cli("runs", *filters, "--json").check().json()]

    assert ids("--state", "HELD") == [held_v2["id"], held_v1["id"]]
    assert ids("--state", "held", "--code-version", v1) == [held_v1["id"]]
    assert ids("--code-version", v2) == [held_v2["id"]]
    assert ids("--workflow", "runs.count") == [counted["id"]]
    assert ids("--workflow", "runs.report", "--status", "success", "--state", "Filling") == [filling["id"]]
    assert ids("--since", held_v2["created_at"]) == [held_v2["id"]]
    assert ids("--since", held_v2["created_at"][:23]) == [held_v2["id"]]  # no offset: UTC, as printed
    assert ids("--since", "1h", "--limit", "2") == [held_v2["id"], counted["id"]]
    assert ids("--since", "1h", "--workflow", "runs.report", "--code-version", v1) == [filling["id"], held_v1["id"]]
    assert ids("--since", "2999-01-01") == []
    assert ids("--state", "RUNNING") == []
    table = env.cli("runs", "--state", "HELD").check().stdout.splitlines()
    assert table[0].split() == ["ID", "WORKFLOW", "STATUS", "STATE", "CREATED", "PROGRESS"]
    assert [line.split()[0] for line in table[1:]] == [held_v2["id"], held_v1["id"]]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("runs", "--since", "5x"), "--since"),
        (("runs", "--since", "99999999999999999999d"), "--since"),
        (("runs", "--since", "yesterday"), "--since"),
        (("runs", "--state", ""), "--state"),
        (("runs", "--state", "S" * 33), "--state"),
        (("runs", "--status", "DONE"), "--status"),
        (("runs", "--code-version", "x" * 65), "--code-version"),
        (("show", "0000", "--steps", "-1"), "--steps"),
        (("show", "0000", "--events", "many"), "--events"),
    ],
)
def test_a_bad_filter_or_count_is_a_usage_error_naming_the_option(
    env: ExchangeEnv, args: tuple[str, ...], option: str
) -> None:
    env.cli("start", "runs.count").check()  # the store exists, with a run in it
    done = env.cli(*args)
    assert done.returncode == 2 and f"Invalid value for '{option}'" in done.stderr, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr


# ----- show --steps / --events -------------------------------------------------------------------------
def test_show_prints_the_last_steps_and_events_and_says_how_many_it_left_out(env: ExchangeEnv) -> None:
    run_id = env.cli("run", "runs.count", "-p", "n=1000", "-p", "states=30", "--json").check().json()["id"]
    full = env.show(run_id)
    assert len(full["steps"]) == 1000 and "steps_total" not in full  # --json unaffected without the options
    shown_events = [e for e in full["events"] if e["kind"] != "progress"]
    assert len(shown_events) >= 32  # 30 states and the status changes

    def step_lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("  step ")]

    def event_lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if re.match(r"  \d{4}-", line)]

    text = env.cli("show", run_id[:8]).check().stdout
    assert "steps (last 20 of 1000; --steps N or --steps all for more)" in text
    assert [int(line.split()[1]) for line in step_lines(text)] == [s["seq"] for s in full["steps"][-20:]]
    assert f"events (last 20 of {len(shown_events)}; --events N or --events all for more)" in text
    assert [line.split()[1] for line in event_lines(text)] == [e["kind"] for e in shown_events[-20:]]

    text = env.cli("show", run_id, "--steps", "3", "--events", "2").check().stdout
    assert len(step_lines(text)) == 3 and len(event_lines(text)) == 2
    assert "status" in event_lines(text)[-1] and '"SUCCESS"' in event_lines(text)[-1]
    text = env.cli("show", run_id, "--steps", "all", "--events", "ALL").check().stdout
    assert len(step_lines(text)) == 1000 and "\nsteps\n" in text and len(event_lines(text)) == len(shown_events)
    text = env.cli("show", run_id, "--steps", "0").check().stdout
    assert step_lines(text) == [] and "steps     1000, not shown (--steps N)" in text

    limited = env.cli("show", run_id, "--json", "--steps", "5", "--events", "4").check().json()
    assert [s["seq"] for s in limited["steps"]] == [s["seq"] for s in full["steps"][-5:]]
    assert limited["steps_total"] == 1000 and limited["events_total"] == len(full["events"])
    assert [e["id"] for e in limited["events"]] == [e["id"] for e in full["events"][-4:]]
    assert limited["events_in_doubt"] == []


def test_a_write_in_doubt_is_flagged_however_many_events_came_after_it(env: ExchangeEnv, runtime: Any) -> None:
    run_id, _ = runtime.store.create_run(NewRun("runs.unit", "{}", "v1", "test"))
    doubt = {"tag": "[p]Line1/Pump/Start", "device": "plc", "value": True, "resolution": "not resent"}
    runtime.store.events.add(run_id, "tag_write_in_doubt", doubt)
    for i in range(30):
        runtime.store.events.add(run_id, "note", {"i": i})
    text = env.cli("show", run_id).check().stdout
    (flag,) = [line for line in text.splitlines() if line.startswith("IN DOUBT")]
    assert "write of true to [p]Line1/Pump/Start (device plc)" in flag and flag.endswith(": not resent")
    assert "events (last 20 of 32;" in text and "tag_write_in_doubt" not in text.split("events (last")[1]
    limited = env.cli("show", run_id, "--json", "--events", "1").check().json()
    assert [e["kind"] for e in limited["events_in_doubt"]] == ["tag_write_in_doubt"]


# ----- one JSON key style --------------------------------------------------------------------------
def test_json_keys_are_snake_case_in_show_runs_and_workflows(env: ExchangeEnv) -> None:
    view = env.cli("run", "runs.count", "--json").check().json()
    listed = env.cli("runs", "--json").check().json()
    workflows = env.cli("workflows", "--json").check().json()
    shown = env.cli("show", view["id"], "--json", "--steps", "1", "--events", "1").check().json()
    objects = [view, *listed, *workflows, shown, *view["steps"], *view["events"]]
    for obj in objects:
        for key in obj:
            assert re.fullmatch(r"[a-z][a-z0-9_]*", key), f"key {key!r} is not snake_case in {obj}"
    for key in ("created_by", "code_version", "partition_key", "deduplication_id", "timeout_seconds",
                "cancel_requested", "owner_alive", "lease_expires_at"):
        assert key in view and key in listed[0]


# ----- follow --------------------------------------------------------------------------------------
class Follower:
    """``exchange ARGS`` started as a shell would, its stderr in a file the test reads as it grows."""

    def __init__(self, env: ExchangeEnv, *args: str) -> None:
        self.err_path = env.root / f"follow-{len(list(env.root.glob('follow-*')))}.err"
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([*EXCHANGE_CMD, "--config", str(env.config_path), *args], cwd=env.root,
                                         env=env.process_env(), stdout=subprocess.PIPE, stderr=err, text=True)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, text: str, timeout_s: float = 20.0) -> None:
        wait_until(lambda: text in self.stderr or self.proc.poll() is not None, timeout_s,
                   message=lambda: f"{text!r} in the follower's output:\n{self.stderr}")
        assert text in self.stderr, self.stderr

    def finish(self, timeout_s: float = 20.0) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_follow_shows_state_progress_and_steps_live_and_exits_with_the_result(env: ExchangeEnv) -> None:
    with env.gateway() as gateway:
        gateway.start()
        run_id = env.cli("start", "runs.unit").check().stdout.strip()
        follower = Follower(env, "follow", run_id[:8])
        try:
            follower.wait_for(f"following run {run_id} of runs.unit")
            follower.wait_for(f"[{run_id[:8]}] state RUNNING")
            env.cli("send", run_id, "HOLD").check()
            follower.wait_for(f"[{run_id[:8]}] state HELD")
            env.cli("send", run_id, "RESUME").check()
            wait_until(lambda: follower.stderr.count("state RUNNING") == 2, 20, message=lambda: follower.stderr)
            env.cli("send", run_id, "STOP").check()
            code, out = follower.finish()
        finally:
            follower.kill()
    assert code == 0, follower.stderr
    assert json.loads(out.strip().splitlines()[-1]) == "stopped"
    lines = follower.stderr.splitlines()
    order = [next(i for i, line in enumerate(lines) if text in line)
             for text in ("state RUNNING", "state HELD", "shutting down", "] SUCCESS")]
    assert order == sorted(order), follower.stderr
    assert any("runs.shutdown" in line and "SUCCESS" in line for line in lines[order[1]:order[-1]])
    assert "Traceback" not in follower.stderr


def test_ctrl_c_stops_following_without_cancelling_the_run(env: ExchangeEnv) -> None:
    with env.gateway() as gateway:
        gateway.start()
        run_id = env.cli("start", "runs.unit").check().stdout.strip()
        for args in (("follow", run_id[:8]), ("start", "runs.unit", "--wait")):
            follower = Follower(env, *args)
            try:
                follower.wait_for("state RUNNING")
                follower.proc.send_signal(signal.SIGINT)
                code, _ = follower.finish()
            finally:
                follower.kill()
            assert code == 130, follower.stderr
            assert "stopped following run" in follower.stderr and "it goes on" in follower.stderr
            assert "Traceback" not in follower.stderr and "Aborted" not in follower.stderr
        for view in env.cli("runs", "--json").check().json():
            assert view["status"] == "RUNNING" and view["cancel_requested"] is False, view
        follower = Follower(env, "follow", run_id)
        try:  # a run that ends other than SUCCESS: exit 1 with the status, as start --wait
            follower.wait_for("state RUNNING")
            env.cli("cancel", run_id).check()
            code, out = follower.finish()
        finally:
            follower.kill()
        assert code == 1 and f"error: run {run_id} CANCELLED" in follower.stderr, follower.stderr
        for view in env.cli("runs", "--status", "RUNNING", "--json").check().json():
            env.cli("send", view["id"], "STOP").check()
