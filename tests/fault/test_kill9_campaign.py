"""A gateway process killed with SIGKILL at random points of multi-step workflows, again and again.

Each round waits until the gateway makes progress (a new side-effect line), lets it run a random
while longer, then kills it with -9 and starts a new one. The workflows mix steps whose side effect
is a fsync'd line in a file, durable sleeps, idle ``recvCommand`` polls and a step that fails twice
before it succeeds. In the end every run must finish SUCCESS with the right result, and the file must
show that every recorded step ran exactly once, except the step in flight at a kill, which may have
run a second time (at most one extra execution per kill per run, from the killed process).

``EXCHANGE_KILL_ROUNDS`` sets the number of kills (default 20 on SQLite; PostgreSQL gets a quarter,
at least 5); ``EXCHANGE_KILL_SEED`` replays a campaign (the seed is printed and named in every failure).
"""

from __future__ import annotations

import os
import random
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PostgresServer
from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, count_lines, read_lines, wait_until

WORKFLOW = "fault.multi"
ACTIVE_RUNS = 4

APP = """
import os
import time

from exchange.workflows.bootstrap import RetryableError, step, workflow
from exchange._engine.execution.context import current_run
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps.sleep import sleep_chunked
from testapps.sidefx import append_line


def mark(path, tag):
    ctx = current_run()
    append_line(path, "%s %s %s %s %s" % (ctx.run_id, ctx.step.seq, ctx.step.attempt, os.getpid(), tag))


@step(name="fault.work")
def work(path, i, hold_ms):
    mark(path, "work")
    time.sleep(hold_ms / 1000.0)  # widens the window between the side effect and its commit
    return i * i


@step(name="fault.flaky",
      options={"retries_allowed": True, "max_attempts": 4, "interval_seconds": 0.05, "backoff_rate": 2.0})
def flaky(path, i):
    mark(path, "flaky")
    attempt = current_run().step.attempt
    if attempt < 3:
        raise RetryableError("attempt %s fails on purpose" % attempt)
    return {"i": i, "attempt": attempt}


@workflow(name="fault.multi")
def multi(path, steps=10, hold_ms=10, sleep_ms=40):
    rt = getWorkflows()
    total = 0
    for i in range(steps):
        total += work(path, i, hold_ms)
        if i % 3 == 1:
            sleep_chunked(total_ms=sleep_ms, chunk_ms=10)
        if i % 3 == 2:
            cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=0.03)
            if cmd is not None:
                raise RuntimeError("nobody sends commands in this campaign, got %r" % (cmd,))
        if i % 5 == 4:
            got = flaky(path, i)
            if got != {"i": i, "attempt": 3}:
                raise RuntimeError("flaky step returned %r" % (got,))
            total += got["attempt"]
        rt.progress("step %s of %s" % (i + 1, steps))
    return {"total": total, "steps": steps}
"""


def expected_result(steps: int) -> dict[str, int]:
    return {"total": sum(i * i for i in range(steps)) + 3 * sum(1 for i in range(steps) if i % 5 == 4),
            "steps": steps}


class Campaign:
    def __init__(self, env: ExchangeEnv, seed: int) -> None:
        self.env = env
        self.seed = seed
        self.rng = random.Random(seed)
        self.side = env.root / "side_effects.txt"
        self.runtime = env.runtime()
        self.params: dict[str, dict[str, Any]] = {}
        self.gateway = env.gateway()  # a real process, forked from the env's zygote (no re-importing)
        self.repeated = 0  # executions repeated after a kill (the in-flight step), for the summary

    def start_runs(self, n: int) -> None:
        batch = [
            {"path": str(self.side), "steps": self.rng.randint(8, 16), "hold_ms": self.rng.randint(2, 25),
             "sleep_ms": self.rng.randint(20, 80)}
            for _ in range(n)
        ]
        for run_id, params in zip(self.env.start_runs(WORKFLOW, batch), batch):
            self.params[run_id] = params

    def unfinished(self) -> list[str]:
        return [run_id for run_id in self.params if not self.runtime.store.runs.get(run_id).finished]

    def run(self, kills: int) -> None:
        self.gateway.start()
        self.start_runs(ACTIVE_RUNS)
        while self.gateway.kills < kills:
            missing = ACTIVE_RUNS - len(self.unfinished())
            if missing > 0:
                self.start_runs(missing)
            base = count_lines(self.side)

            def progressed(base: int = base) -> bool:
                return count_lines(self.side) > base

            wait_until(progressed, 20,
                       message=lambda: f"progress after gateway start {self.gateway.starts}\n{self.gateway.log_text()}")
            # The kill point: a random moment while the runs are executing (fault injection, not a wait).
            time.sleep(self.rng.uniform(0.0, 0.25))
            self.gateway.kill9()
            self.gateway.start()
        wait_until(lambda: not self.unfinished(), 90, interval_s=0.1,
                   message=lambda: f"all runs to finish; unfinished {self.unfinished()}\n{self.gateway.log_text()}")
        assert self.gateway.stop() == 0, self.gateway.log_text()

    def verify(self) -> None:
        lines_by_run: dict[str, list[list[str]]] = defaultdict(list)
        for fields in read_lines(self.side):
            assert len(fields) == 5, f"malformed side-effect line {fields}"
            lines_by_run[fields[0]].append(fields)
        assert set(lines_by_run) <= set(self.params), "side effects of runs nobody started"
        killed = set(self.gateway.killed_pids)
        for run_id, params in self.params.items():
            view = self.runtime.get_run(run_id)
            assert view["status"] == "SUCCESS", f"run {run_id}: {view['status']} {view['error']}"
            assert view["result"] == expected_result(params["steps"]), f"run {run_id}: {view['result']}"
            self.repeated += self.verify_side_effects(run_id, view, lines_by_run[run_id], killed)

    @staticmethod
    def verify_side_effects(run_id: str, view: dict[str, Any], lines: list[list[str]], killed: set[int]) -> int:
        """Check one run's side effects against its recorded steps; returns how many repeated.

        Steps of one run execute one after the other, so the step a killed process had in flight is
        the last side effect that process wrote for the run: that one alone may run again.
        """
        recorded = {s["seq"]: s for s in view["steps"] if s["name"] in ("fault.work", "fault.flaky")}
        assert all(s["status"] == "SUCCESS" for s in recorded.values()), f"run {run_id}: {view['steps']}"
        executions: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)  # (seq, attempt) -> (pid, line)
        last_line_of: dict[int, int] = {}
        for index, (_run, seq_text, attempt_text, pid_text, tag) in enumerate(lines):
            step = recorded.get(int(seq_text))
            assert step is not None, f"run {run_id}: a side effect of sequence {seq_text} that has no recorded step"
            assert tag == step["name"].split(".")[1], f"run {run_id}: sequence {seq_text} is {step['name']}, ran {tag}"
            executions[(int(seq_text), int(attempt_text))].append((int(pid_text), index))
            last_line_of[int(pid_text)] = index
        # Each failed attempt is committed with one "retry" event: a repeated event would mean an
        # attempt that was already recorded ran again (e.g. the attempt count restarting after a crash).
        retries: dict[int, list[int]] = defaultdict(list)
        for event in view["events"]:
            if event["kind"] == "retry":
                retries[event["step_seq"]].append(event["payload"]["attempt"])
        for seq, step in recorded.items():
            flaky = step["name"] == "fault.flaky"
            want = range(1, 4) if flaky else range(1, 2)
            assert step["attempts"] == len(want), f"run {run_id}: step {seq} recorded {step['attempts']} attempts"
            assert retries.get(seq, []) == ([1, 2] if flaky else []), f"run {run_id}: step {seq} retries {retries}"
            for attempt in want:
                assert executions.get((seq, attempt)), f"run {run_id}: recorded step {seq} attempt {attempt} never ran"
        extra_by_pid: dict[int, int] = defaultdict(int)
        for (seq, attempt), runs in executions.items():
            pids = [pid for pid, _ in runs]
            assert len(pids) == len(set(pids)), (
                f"run {run_id}: step {seq} attempt {attempt} ran twice in one gateway process {pids}")
            for pid, index in runs[:-1]:  # every execution but the one that got recorded
                assert pid in killed, (
                    f"run {run_id}: step {seq} attempt {attempt} ran again although process {pid} was not killed")
                assert index == last_line_of[pid], (
                    f"run {run_id}: step {seq} attempt {attempt} ran again, but killed process {pid} had "
                    f"moved past it (it was recorded before the kill)")
                extra_by_pid[pid] += 1
        over = {pid: n for pid, n in extra_by_pid.items() if n > 1}
        assert not over, f"run {run_id}: more than one repeated execution per kill: {over}"
        return sum(extra_by_pid.values())

    def close(self) -> None:
        self.gateway.__exit__()  # kills it if it still runs
        self.runtime.close()


def campaign(env: ExchangeEnv, kills: int) -> Campaign:
    seed = int(os.environ.get("EXCHANGE_KILL_SEED") or random.SystemRandom().randrange(1, 2**31))
    print(f"\nkill -9 campaign: seed={seed} kills={kills} store={env.store_url}  "
          f"(replay with EXCHANGE_KILL_SEED={seed})")
    assert env.zygote is not None, "the campaign's processes are forked from a zygote"
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("kill9", APP)
    c = Campaign(env, seed)
    started = time.monotonic()
    try:
        c.run(kills)
        c.verify()
    except AssertionError as exc:
        raise AssertionError(f"kill -9 campaign seed={seed}: {exc}\n{c.gateway.all_logs()[-6000:]}") from exc
    finally:
        c.close()
    print(f"kill -9 campaign: {c.gateway.kills} kills, {len(c.params)} runs, "
          f"{count_lines(c.side)} side effects ({c.repeated} repeated in-flight executions), "
          f"{time.monotonic() - started:.1f}s")
    return c


KILL_ROUNDS = int(os.environ.get("EXCHANGE_KILL_ROUNDS", "20"))


@pytest.mark.timeout(60 + 3 * KILL_ROUNDS)  # a round takes about 1 s; more rounds, more time
def test_kill9_campaign_sqlite(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    kills = KILL_ROUNDS
    c = campaign(ExchangeEnv.create(tmp_path, zygote=exchange_zygote), kills)
    assert c.gateway.kills == kills


@pytest.mark.timeout(90 + KILL_ROUNDS)
def test_kill9_campaign_postgresql(tmp_path: Path, postgres: PostgresServer, exchange_zygote: ForkServer) -> None:
    kills = max(5, KILL_ROUNDS // 4)
    store_url = postgres.url(postgres.create_database("kill9"))
    env = ExchangeEnv.create(tmp_path, store_url=store_url, zygote=exchange_zygote)
    c = campaign(env, kills)
    assert c.gateway.kills == kills


def _view(steps: list[tuple[int, str, int]], retries: list[tuple[int, int]]) -> dict[str, Any]:
    return {
        "steps": [{"seq": seq, "name": name, "status": "SUCCESS", "attempts": n} for seq, name, n in steps],
        "events": [{"kind": "retry", "step_seq": seq, "payload": {"attempt": a}} for seq, a in retries],
    }


def test_the_side_effect_check_tells_in_flight_repeats_from_bugs() -> None:
    """The campaign's check itself: what it must accept and what it must reject (no processes)."""
    view = _view([(1, "fault.work", 1), (2, "fault.work", 1), (3, "fault.flaky", 3)], [(3, 1), (3, 2)])

    def lines(*rows: tuple[int, int, int, str]) -> list[list[str]]:
        return [["r", str(seq), str(attempt), str(pid), tag] for seq, attempt, pid, tag in rows]

    clean = lines((1, 1, 10, "work"), (2, 1, 10, "work"), (3, 1, 10, "flaky"), (3, 2, 10, "flaky"), (3, 3, 10, "flaky"))
    assert Campaign.verify_side_effects("r", view, clean, killed=set()) == 0
    in_flight = lines((1, 1, 10, "work"), (2, 1, 10, "work"), (2, 1, 11, "work"), (3, 1, 11, "flaky"),
                      (3, 2, 11, "flaky"), (3, 2, 12, "flaky"), (3, 3, 12, "flaky"))
    assert Campaign.verify_side_effects("r", view, in_flight, killed={10, 11}) == 2

    with pytest.raises(AssertionError, match="was not killed"):
        Campaign.verify_side_effects("r", view, in_flight, killed={10})
    with pytest.raises(AssertionError, match="had moved past it"):  # step 1 was recorded before the kill
        Campaign.verify_side_effects("r", view, lines((1, 1, 10, "work"), (2, 1, 10, "work"), (1, 1, 11, "work"),
                                                      *[(3, a, 11, "flaky") for a in (1, 2, 3)]), killed={10})
    with pytest.raises(AssertionError, match="ran twice in one gateway process"):
        Campaign.verify_side_effects("r", view, clean + lines((2, 1, 10, "work")), killed={10})
    with pytest.raises(AssertionError, match="never ran"):
        Campaign.verify_side_effects("r", view, clean[1:], killed=set())
    with pytest.raises(AssertionError, match="no recorded step"):
        Campaign.verify_side_effects("r", view, clean + lines((4, 1, 10, "work")), killed=set())
    restarted = _view([(1, "fault.work", 1), (2, "fault.work", 1), (3, "fault.flaky", 3)], [(3, 1), (3, 1), (3, 2)])
    with pytest.raises(AssertionError, match="retries"):  # attempt 1 recorded twice: the count restarted
        Campaign.verify_side_effects("r", restarted, clean, killed=set())
