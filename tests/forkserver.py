"""Start ``exchange`` processes in milliseconds: a pre-imported process that forks them on request.

A gateway process spends about half a second importing libraries before it does anything. Tests that
start hundreds of gateways (the crash-point sweep kills one at every write of a run) ask a *zygote*
instead: a Python process that imported Exchange once and forks a child per request. Each child is a
real, separate process running the real ``exchange`` command (``exchange.cli.main.main``): it is
killed with real signals, its store connections are its own (the zygote never opens any), and its
exit status is reported back. Nothing else is shared: the child gets its own environment, working
folder, arguments and log file.

The zygote has no threads when it forks (none are started by the imports), which is what makes
``fork`` safe here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ZYGOTE = r"""
import json, os, select, sys

# What a gateway imports on its way to its first step.
import sqlalchemy.dialects.postgresql, sqlalchemy.dialects.sqlite, psycopg
import exchange.cli.main
import exchange.workflows.engine.dispatcher, exchange.workflows.engine.facade
import exchange.workflows.steps.tags, exchange.workflows.steps.sleep, exchange.tags.service
import exchange.drivers.modbus
from exchange.workflows.store import faults

fd_in, out = sys.stdin.fileno(), sys.stdout
pending = b""


def report(message):
    out.write(json.dumps(message) + "\n")
    out.flush()


def child(request):
    os.setpgid(0, 0)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    faults.reload_from_environment()
    sys.argv = ["exchange", *request["argv"]]
    code = 0
    try:
        exchange.cli.main.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


report({"ready": os.getpid()})
while True:
    readable, _, _ = select.select([fd_in], [], [], 0.01)
    if readable:
        data = os.read(fd_in, 65536)
        if not data:
            break
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            pid = os.fork()
            if pid == 0:
                child(json.loads(line))
            report({"pid": pid})
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        report({"exit": pid, "code": os.waitstatus_to_exitcode(status)})
"""


class ForkServer:
    """The zygote (see the module docstring) and the children it started."""

    def __init__(self, cwd: Path) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")},
        )
        self._lock = threading.Lock()
        self._spawned = threading.Condition(self._lock)
        self._one_request = threading.Lock()  # answers come in request order: one request at a time
        self._pids: list[int] = []
        self._exits: dict[int, int] = {}
        self._children: set[int] = set()
        assert self._proc.stdout is not None
        first = json.loads(self._proc.stdout.readline())
        assert "ready" in first, first
        self._reader = threading.Thread(target=self._read, name="forkserver-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            message = json.loads(line)
            with self._lock:
                if "pid" in message:
                    self._pids.append(message["pid"])
                    self._children.add(message["pid"])
                else:
                    self._exits[message["exit"]] = message["code"]
                    self._children.discard(message["exit"])
                self._spawned.notify_all()

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path) -> ForkedProcess:
        request = json.dumps({"argv": argv, "env": env, "cwd": str(cwd), "log": str(log)}) + "\n"
        with self._one_request, self._lock:
            assert self._proc.stdin is not None
            self._proc.stdin.write(request.encode())
            self._proc.stdin.flush()
            deadline = time.monotonic() + 10
            while not self._pids:
                assert self._proc.poll() is None, "the fork server died"
                assert self._spawned.wait(max(0.0, deadline - time.monotonic())), "the fork server did not answer"
            pid = self._pids.pop(0)
        return ForkedProcess(self, pid)

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout_s: float | None) -> int | None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            while pid not in self._exits:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._spawned.wait(remaining)
            return self._exits[pid]

    def close(self) -> None:
        with self._lock:
            children = list(self._children)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(10)


class ForkedProcess:
    """A child of the fork server, with the part of ``subprocess.Popen``'s interface tests use."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._server.wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(["exchange"], timeout or 0.0)
        self.returncode = code
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


__all__ = ["ForkServer", "ForkedProcess"]
