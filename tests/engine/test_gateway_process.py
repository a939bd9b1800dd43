"""The gateway as a real process: how it starts, reports run status, and stops on SIGTERM."""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from exchange._engine.operator.runtime import Runtime
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, Gateway, count_lines, read_lines, wait_until

APP = """
import os
import time

from exchange.workflows.bootstrap import step, workflow
from exchange._engine.execution.context import current_run
from exchange.workflows.steps.sleep import sleep_chunked
from testapps.sidefx import append_line


@step(name="gw.tick")
def tick(path, i, hold_ms):
    append_line(path, "%s %s %s" % (current_run().run_id, i, os.getpid()))
    time.sleep(hold_ms / 1000.0)
    return i


@workflow(name="gw.ticks")
def ticks(path, n=10, hold_ms=100, pause_ms=0):
    done = [tick(path, i, hold_ms) for i in range(n // 2)]
    if pause_ms:
        sleep_chunked(total_ms=pause_ms, chunk_ms=50)
    done += [tick(path, i, hold_ms) for i in range(n // 2, n)]
    return {"done": done}
"""


def make_env(root: Path, **engine: object) -> ExchangeEnv:
    env = ExchangeEnv.create(root, engine=dict(engine))
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("gw", APP)
    return env


@contextmanager
def gateway_and_runtime(root: Path, **engine: object) -> Iterator[tuple[ExchangeEnv, Runtime, Gateway]]:
    """A started gateway of :func:`make_env`'s project, and a runtime of this process on its store."""
    env = make_env(root, **engine)
    runtime = env.runtime()
    try:
        with env.gateway() as gateway:
            gateway.start()
            yield env, runtime, gateway
    finally:
        runtime.close()


def assert_suspended(runtime: Runtime, run_id: str) -> None:
    """The run stopped with its gateway, unfinished and still owned: it resumes on the next start."""
    rec = runtime.store.runs.get(run_id)
    assert rec is not None and not rec.finished and rec.owner is not None


def test_python_dash_m_runs_the_cli() -> None:
    """``python -m exchange._cli.main`` is how a service unit or a test starts the command."""
    proc = subprocess.run([sys.executable, "-m", "exchange._cli.main", "--help"], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "gateway" in proc.stdout


def test_status_stays_running_while_executing(tmp_path: Path) -> None:
    """A run the gateway is executing stays RUNNING through the lease renewals (heartbeats)."""
    side = tmp_path / "ticks.txt"
    with gateway_and_runtime(tmp_path, lease_seconds=0.9) as (env, runtime, _gateway):  # a heartbeat every 0.3 s
        # 40 steps of 0.1 s: the status is read with 3 s of steps left, so a loaded machine still finds it running
        (run_id,) = env.start_runs("gw.ticks", [{"path": str(side), "n": 40, "hold_ms": 100}])
        wait_until(lambda: count_lines(side) >= 9, 20, message="9 steps executed")  # > 2 heartbeats
        view = runtime.get_run(run_id, steps=False, events=False)
        assert view["status"] == "RUNNING", f"executing run shows status {view['status']}"
        assert runtime.wait_for(run_id, 20)["status"] == "SUCCESS"


def start_a_sleeping_run(env: ExchangeEnv, runtime: Runtime, side: Path, steps: int) -> str:
    """Start ``gw.ticks`` with a minute's sleep after half its ``steps``; its id once it sleeps."""
    (run_id,) = env.start_runs("gw.ticks", [{"path": str(side), "n": steps, "hold_ms": 5, "pause_ms": 60_000}])
    wait_until(lambda: runtime.store.runs.get(run_id).quiet_wake_at is not None, 20,
               message="the run to enter its long sleep")
    return run_id


def test_sigterm_suspends_and_restart_resumes_without_repeating(tmp_path: Path) -> None:
    side = tmp_path / "ticks.txt"
    with gateway_and_runtime(tmp_path) as (env, runtime, gateway):
        run_id = start_a_sleeping_run(env, runtime, side, 6)
        assert gateway.stop() == 0, gateway.log_text()
        assert "gateway stopping" in gateway.log_text()
        assert_suspended(runtime, run_id)
        assert count_lines(side) == 3
        runtime.cancel(run_id, "no need to sleep a minute")  # only the restarted gateway can act on it
        gateway.start()
        assert "recovered 1 run(s)" in gateway.log_text()
        done = runtime.wait_for(run_id, 20)
        assert done["status"] == "CANCELLED", done
        assert [int(line[1]) for line in read_lines(side)] == [0, 1, 2]  # no step ran twice
        assert gateway.stop() == 0


# tgkill(2): a signal for one thread of a process, which os.kill cannot aim. Its number by machine.
TGKILL_SYSCALL = {"x86_64": 234, "aarch64": 131}


def signal_one_thread(pid: int, sig: int) -> None:
    """Send ``sig`` to one thread of process ``pid`` that is not its main thread: the oldest, since
    a thread that ends takes a signal sent to it along."""
    number = TGKILL_SYSCALL.get(platform.machine())
    assert number is not None, f"no tgkill syscall number known for {platform.machine()}"
    libc = ctypes.CDLL(None, use_errno=True)
    for tid in sorted(int(name) for name in os.listdir(f"/proc/{pid}/task") if int(name) != pid):
        if libc.syscall(number, pid, tid, sig) == 0:
            return
    raise AssertionError(f"process {pid} has no other thread to signal")


def test_sigterm_that_lands_on_another_thread_stops_the_gateway(tmp_path: Path) -> None:
    """The kernel hands a signal sent to a process to any one of its threads (not the main one when
    it is busy with another signal or being traced); Python runs the handler in the main thread
    only. A SIGTERM sent to one of the gateway's other threads stops it as one sent to the process
    does: the main thread, waiting for the signal, must wake up to run the handler."""
    side = tmp_path / "ticks.txt"
    with gateway_and_runtime(tmp_path) as (env, runtime, gateway):
        run_id = start_a_sleeping_run(env, runtime, side, 4)
        assert gateway.proc is not None
        signal_one_thread(gateway.proc.pid, signal.SIGTERM)
        try:
            code = gateway.proc.wait(10)
        except subprocess.TimeoutExpired:
            raise AssertionError("the gateway went on for 10 s after a SIGTERM that reached one of its "
                                 f"other threads:\n{gateway.log_text()}") from None
        assert code == 0, gateway.log_text()
        assert "gateway stopping" in gateway.log_text()
        assert_suspended(runtime, run_id)  # as at any SIGTERM
