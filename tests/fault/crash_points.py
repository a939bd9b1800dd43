"""Crash at every point: the harness behind ``test_crash_points.py``.

The store numbers the writes run executions make and can kill its own process with SIGKILL right
before or right after write ``k`` (:mod:`exchange._store.sql.faults`). A sweep runs a set of
workflows (steps with fsync'd side effects, operator commands waiting in the mailbox, a durable sleep,
a "no message" answer that steers a branch, a tag write counted at a real Modbus server, a step that
fails twice and is retried) as a *chain* of gateway processes on one store:

- a chain kills its processes either right *after* a write or right *before* it (the second leaves a
  step in flight: its side effect happened, its outcome is not recorded, so it runs again);
- every process is killed at its own second counted write; its first is always the start of its
  execution, so it replays what its predecessors recorded and dies at the next write of the run's
  life (one later after a kill *before* a write, whose undone write the next process redoes first).
  When it died at a point the chain already covered (a step re-executed in flight writes its audit
  event again), the next process goes one write further, until the chain reaches a new point;
- one run finds nothing on topic ``late`` and takes the "open" branch; once it acted on that answer
  (the valve step's side effect happened), a message is posted to ``late`` after every kill, which a
  live poll would see: a replay that asked the mailbox again instead of following the answer the run
  acted on would take the other branch.
  The other run finds a message waiting from the start and takes the "bypass" branch.

So the chain passes through a crash right before and right after every write of the runs' lives,
each resumed by replay. The checks, per run: the result and the branch it reports agree with what
was recorded; every side effect belongs to the step recorded at its sequence number (a replay that
took another branch shows here); every recorded step attempt ran exactly once, except one whose
outcome a killed process had not committed (the fault log says which); the PLC saw one write in all,
however often the valve step was cut off (after its STARTED mark, the next execution resolves the
write in doubt by reading the register back, and the audit shows each resolution); each command was
received exactly once; retries were recorded once each.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exchange._tags.delivery import HELD as HELD_RESOLUTION
from simulators.servers.modbus import ModbusSimServer
from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, Gateway, read_lines, wait_until

WORKFLOW = "sweep.batch"
SIDE_EFFECT_STEPS = {"sweep.work": "work", "sweep.open_valve": "open_valve", "sweep.bypass": "bypass",
                     "sweep.flaky": "flaky"}
VALVE_STEPS = ("open_valve", "bypass")

APP = """
import os

from exchange.workflows.bootstrap import RetryableError, step, workflow
from exchange._engine.execution.context import current_run
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import tags
from exchange.workflows.steps.sleep import sleep_chunked
from testapps.sidefx import append_line


def mark(path, tag):
    ctx = current_run()
    append_line(path, "%s %s %s %s %s" % (ctx.run_id, ctx.step.seq, ctx.step.attempt, os.getpid(), tag))


@step(name="sweep.work")
def work(path, i):
    mark(path, "work")
    return i * i


@step(name="sweep.open_valve")
def open_valve(path, tag):
    mark(path, "open_valve")
    tags.write(tag, 1)  # a step called inside a step is part of its body
    return "open"


@step(name="sweep.bypass")
def bypass(path, tag):
    mark(path, "bypass")
    tags.write(tag, 2)
    return "bypass"


@step(name="sweep.flaky",
      options={"retries_allowed": True, "max_attempts": 4, "interval_seconds": 0.01, "backoff_rate": 1.0})
def flaky(path):
    mark(path, "flaky")
    attempt = current_run().step.attempt
    if attempt < 3:
        raise RetryableError("attempt %s fails on purpose" % attempt)
    return attempt


@workflow(name="sweep.batch")
def batch(path, tag):
    rt = getWorkflows()
    rt.setState("STARTING")
    total = work(path, 1)
    rt.setState("RUNNING")
    cmd = rt.recvCommand(timeoutSeconds=0, maxMessages=1)
    if cmd is None or cmd["cmd"] != "HOLD":
        raise RuntimeError("expected the HOLD waiting since the start, got %r" % (cmd,))
    cmd = rt.recvCommand(currentState="HELD", timeoutSeconds=10, maxMessages=1)
    if cmd is None or cmd["cmd"] != "RESUME":
        raise RuntimeError("expected the RESUME waiting since the start, got %r" % (cmd,))
    rt.setState("RUNNING")
    sleep_chunked(total_ms=20, chunk_ms=10)
    late = rt.recv("late", timeoutSeconds=0)
    branch = open_valve(path, tag) if late is None else bypass(path, tag)
    total += flaky(path)
    rt.progress("finishing")
    total += work(path, 2)
    rt.setState("COMPLETE")
    return {"total": total, "branch": branch}
"""

_OUTCOME = re.compile(r"^run (\S+): the outcome of step '([^']+)' \(sequence (\d+), attempt (\d+)\)$")


@dataclass
class ProcessLog:
    """What one gateway process committed, from its fault log, and where it died."""

    pid: int
    mode: str  # "after" | "before" | "" (not killed)
    committed: list[str] = field(default_factory=list)
    killed_at: str | None = None

    def recorded(self, run_id: str, name: str, seq: int, attempt: int) -> bool:
        """Did this process commit the outcome of that step attempt?"""
        for label in self.committed:
            m = _OUTCOME.match(label)
            if m and m.groups() == (run_id, name, str(seq), str(attempt)):
                return True
        return False


def read_fault_log(path: Path) -> tuple[list[str], str | None]:
    """(committed labels, the label the process was killed before, if any)."""
    committed: list[str] = []
    killed_before = None
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        _number, _, label = line.partition(" ")
        if label.endswith(" [killed before]"):
            killed_before = label[: -len(" [killed before]")]
        else:
            committed.append(label)
    return committed, killed_before


class Sweep:
    def __init__(
        self, env: ExchangeEnv, plc: ModbusSimServer, mode: str, registers: list[int], forkserver: ForkServer
    ) -> None:
        self.env = env
        self.plc = plc
        self.mode = mode
        self.side = env.root / "side_effects.txt"
        self.tags = {f"[plant]Valve{i}": f"HR{i}" for i in registers}
        self.gateway = Gateway(env, log_level="WARNING", name="sweep", forkserver=forkserver)
        self.runtime = env.runtime()
        self.run_tags: dict[str, str] = {}
        self.branches: dict[str, str] = {}  # run id -> the branch it must take
        self.processes: list[ProcessLog] = []
        self.late_posted = 0
        self.doubt_resolutions: list[str] = []  # of the valve writes, as the audit trails recorded them

    @staticmethod
    def configure(env: ExchangeEnv, plc: ModbusSimServer, registers: list[int]) -> None:
        env.write_app("sidefx", SIDE_EFFECT_MODULE)
        env.write_app("sweep", APP)
        lines = [f'\n[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = {plc.port}\n']
        for i in registers:
            lines.append(f'[tags."[plant]Valve{i}"]\ndevice = "plc"\naddress = "HR{i}"\n')
        with env.config_path.open("a", encoding="utf-8") as config:
            config.write("\n".join(lines))

    def start_runs(self) -> None:
        params = [{"path": str(self.side), "tag": tag} for tag in self.tags]
        for i, (run_id, p) in enumerate(zip(self.env.start_runs(WORKFLOW, params), params)):
            self.run_tags[run_id] = p["tag"]
            # Waiting before the run starts, so every execution finds them at the same point.
            self.runtime.send_command(run_id, "HOLD", "sweep", actor="sweep")
            self.runtime.send_command(run_id, "RESUME", "sweep", actor="sweep")
            self.branches[run_id] = "open" if i % 2 == 0 else "bypass"
            if self.branches[run_id] == "bypass":
                self.runtime.send(run_id, "late", {"waiting": True}, actor="sweep")

    def answer_acted_on(self, run_id: str) -> bool:
        """Has the run acted on its "no message" answer (the open-valve step's side effect happened)?
        From then on a replay must keep that answer, whatever arrives in the mailbox."""
        return any(f[0] == run_id and f[4] == "open_valve" for f in read_lines(self.side))

    def unfinished(self) -> list[str]:
        return [run_id for run_id in self.run_tags if not self.runtime.store.runs.get(run_id).finished]

    def run(self, max_processes: int = 300) -> None:
        """Chain gateway processes until every run finished (see the module docstring)."""
        self.start_runs()
        mode = self.mode
        kill_at = 2
        covered: set[str] = set()
        while self.unfinished():
            assert len(self.processes) < max_processes, "the chain does not converge"
            log_path = self.env.root / f"faults-{len(self.processes)}.log"
            self.gateway.spawn({
                f"EXCHANGE_FAULT_KILL_{mode.upper()}_WRITE": str(kill_at),
                "EXCHANGE_FAULT_WRITE_LOG": str(log_path),
            })
            assert self.gateway.proc is not None
            proc = self.gateway.proc
            wait_until(lambda proc=proc: proc.poll() is not None or not self.unfinished(), 60, interval_s=0.005,
                       message=lambda: f"gateway process {len(self.processes)} to die or finish\n"
                                       f"{self.gateway.log_text()}")
            if proc.poll() is None:  # every run finished: stop it (it may be dying at its last write)
                self.gateway.stop()
            killed = proc.returncode == -9
            if not killed and proc.returncode != 0:
                raise AssertionError(f"gateway exited with {proc.returncode}\n{self.gateway.log_text()}")
            committed, killed_before = read_fault_log(log_path)
            point = killed_before if mode == "before" else (committed[-1] if committed and killed else None)
            self.processes.append(ProcessLog(proc.pid, mode if killed else "", committed, point))
            if point is not None:
                kill_at = kill_at + 1 if point in covered else self.next_kill_at(point)
                covered.add(point)
            if killed:
                for run_id in self.unfinished():  # what a replay must not see where nothing was found
                    if self.branches[run_id] == "open" and self.answer_acted_on(run_id):
                        self.runtime.send(run_id, "late", {"after_kill": len(self.processes)}, actor="sweep")
                        self.late_posted += 1

    def next_kill_at(self, new_point: str) -> int:
        """Where the next process should die after this one died at a new point: at its second write
        (its first is the start of its execution) — but a process killed right *before* a write left
        that write undone, and the next one redoes it first, so it dies one write later (unless the
        undone write was the start of an execution itself, which the next one redoes as its first)."""
        if self.mode == "before" and not new_point.endswith("the start of an execution"):
            return 3
        return 2

    def close(self) -> None:
        self.gateway.__exit__()  # kills it if it still runs
        self.runtime.close()

    # ----- checks ------------------------------------------------------------------------------
    def verify(self) -> None:
        lines_by_run: dict[str, list[list[str]]] = defaultdict(list)
        for fields in read_lines(self.side):
            assert len(fields) == 5, f"malformed side-effect line {fields}"
            lines_by_run[fields[0]].append(fields)
        assert set(lines_by_run) <= set(self.run_tags), "side effects of runs nobody started"
        for run_id, tag in self.run_tags.items():
            view = self.runtime.get_run(run_id)
            assert view["status"] == "SUCCESS", f"run {run_id}: {view['status']} {view['error']}"
            self.verify_run(run_id, tag, view, lines_by_run[run_id])

    def verify_run(self, run_id: str, tag: str, view: dict[str, Any], lines: list[list[str]]) -> None:
        recorded = {s["seq"]: s for s in view["steps"]}
        result = view["result"]
        assert result["total"] == 1 + 3 + 4, f"run {run_id}: {result}"
        (valve,) = [s for s in view["steps"] if s["name"] in ("sweep.open_valve", "sweep.bypass")]
        assert result["branch"] == valve["output"] == self.branches[run_id], (
            f"run {run_id}: result {result}, recorded {valve}, expected the {self.branches[run_id]} branch")
        assert view["state"] == "COMPLETE"
        by_pid = {p.pid: p for p in self.processes}
        executions: dict[tuple[int, int], list[int]] = defaultdict(list)
        for _run, seq_text, attempt_text, pid_text, what in lines:
            seq, attempt, pid = int(seq_text), int(attempt_text), int(pid_text)
            step = recorded.get(seq)
            assert step is not None, f"run {run_id}: a side effect at sequence {seq}, where nothing is recorded"
            assert SIDE_EFFECT_STEPS.get(step["name"]) == what, (
                f"run {run_id}: sequence {seq} is recorded as {step['name']} but {what} ran there "
                f"(process {pid}): a replay took another branch")
            executions[(seq, attempt)].append(pid)
        for (seq, attempt), pids in executions.items():
            name = recorded[seq]["name"]
            assert len(pids) == len(set(pids)), f"run {run_id}: {name} attempt {attempt} ran twice in one process"
            for pid in pids[:-1]:  # every execution but the last must have been cut off in flight
                process = by_pid.get(pid)
                assert process is not None and process.mode, (
                    f"run {run_id}: {name} (sequence {seq}, attempt {attempt}) ran again after process {pid}, "
                    f"which was not killed")
                assert not process.recorded(run_id, name, seq, attempt), (
                    f"run {run_id}: {name} (sequence {seq}, attempt {attempt}) ran again although process "
                    f"{pid} had recorded it before it was killed at {process.killed_at!r}")
        for seq, step in recorded.items():
            if step["name"] in SIDE_EFFECT_STEPS:
                for attempt in range(1, step["attempts"] + 1):
                    assert executions.get((seq, attempt)), f"run {run_id}: recorded {step['name']} never ran"
        valve_pids = [pid for (seq, _a), p in executions.items() if recorded[seq]["name"] == valve["name"]
                      for pid in p]
        # One recorded write, one write at the PLC, however many times the step was cut off: killed
        # before its STARTED mark, the step sends as if new; killed after it, the next execution finds
        # the write in doubt and reads the register back (sends only if the value is not there).
        assert self.plc.write_count(self.tags[tag]) == 1, (
            f"run {run_id}: the PLC saw {self.plc.write_count(self.tags[tag])} writes for one recorded write "
            f"({len(valve_pids)} executions of {valve['name']})")
        start_label = f"run {run_id}: the start of the side effect of step {valve['name']!r} (sequence {valve['seq']}"
        marked = [i for i, pid in enumerate(valve_pids)
                  if any(label.startswith(start_label) for label in getattr(by_pid.get(pid), "committed", []))]
        # A step's audit events commit with its outcome: only the execution that recorded the valve's
        # outcome (the last) leaves them. It was in doubt when an earlier one had marked the start.
        expected_doubts = 1 if marked and marked[0] < len(valve_pids) - 1 else 0
        doubts = [e["payload"]["resolution"] for e in view["events"]
                  if e["kind"] == "tag_write_in_doubt" and e["step_seq"] == valve["seq"]]
        self.doubt_resolutions.extend(doubts)
        assert len(doubts) == expected_doubts, (
            f"run {run_id}: {len(doubts)} in-doubt resolutions {doubts}, expected {expected_doubts} (the "
            f"STARTED mark of the valve's write committed by execution {marked[:1]} of {len(valve_pids)})")
        # The one write is in the audit trail once: acknowledged, or found at the PLC by the readback.
        written = [e["payload"]["confirmed_by"] for e in view["events"]
                   if e["kind"] == "tag_write" and e["step_seq"] == valve["seq"]]
        assert written == (["readback"] if HELD_RESOLUTION in doubts else ["acknowledged"]), (
            f"run {run_id}: the valve's write in the audit trail: {written}, resolutions {doubts}")
        assert self.plc.get(self.tags[tag]) == (1 if valve["output"] == "open" else 2)
        events = view["events"]
        commands = sorted(e["payload"]["cmd"] for e in events if e["kind"] == "command")
        assert commands == ["HOLD", "RESUME"], f"run {run_id}: commands received {commands}"
        assert not [e for e in events if e["kind"] == "command_dropped"], f"run {run_id}: a command was dropped"
        # Killed before or after any of its writes, the run's audit chain has no gap and no stray link.
        (chain,) = self.runtime.verify_audit([run_id])
        assert chain["state"] == "ok", f"run {run_id}: audit chain {chain}"
        (flaky,) = [s for s in view["steps"] if s["name"] == "sweep.flaky"]
        retries = [e["payload"]["attempt"] for e in events if e["kind"] == "retry" and e["step_seq"] == flaky["seq"]]
        assert flaky["attempts"] == 3 and retries == [1, 2], f"run {run_id}: retries {retries}"
        consumed_late = self.consumed(run_id, "late")
        assert consumed_late == (0 if valve["output"] == "open" else 1), (
            f"run {run_id}: {consumed_late} late message(s) consumed, branch {valve['output']}")

    def consumed(self, run_id: str, topic: str) -> int:
        from sqlalchemy import func, select

        from exchange._store.tables.schema import mailbox

        with self.runtime.store.db.read() as conn:
            return int(conn.execute(
                select(func.count()).where(mailbox.c.run_id == run_id, mailbox.c.topic == topic,
                                           mailbox.c.consumed_at.is_not(None))
            ).scalar_one())


def sweep(env: ExchangeEnv, plc: ModbusSimServer, mode: str, registers: list[int], forkserver: ForkServer) -> Sweep:
    """Run one chain (``mode`` "after" or "before", one run per register) and check it."""
    Sweep.configure(env, plc, registers)
    s = Sweep(env, plc, mode, registers, forkserver)
    started = time.monotonic()
    try:
        s.run()
        s.verify()
    except AssertionError as exc:
        raise AssertionError(f"crash-point sweep on {env.store_url}: {exc}\n{s.gateway.all_logs()[-4000:]}") from exc
    finally:
        s.close()
    points = {p.killed_at for p in s.processes if p.killed_at}
    print(f"\ncrash-point sweep on {env.store_url.split(':')[0]}, kills {mode} a write: {len(s.processes)} gateway "
          f"processes, {len(points)} distinct kill points, {len(read_lines(s.side))} side effects, "
          f"{s.late_posted} late messages, {time.monotonic() - started:.1f}s")
    return s
