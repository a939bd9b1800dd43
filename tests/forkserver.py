"""Start ``exchange`` processes in milliseconds: a pre-imported process that forks them on request.

A gateway process spends about half a second importing libraries before it does anything. Tests that
start hundreds of gateways (the crash-point sweep kills one at every write of a run) ask a *zygote*
instead: a Python process that imported Exchange once and forks a child per request. Each child is a
real, separate process running the real ``exchange`` command (``exchange._cli.main.main``): it is
killed with real signals, its store connections are its own (the zygote never opens any), and its
exit status is reported back. Nothing else is shared: the child gets its own environment, working
folder, arguments and log file.

The zygote has no threads when it forks (none are started by the imports), which is what makes
``fork`` safe here.

:meth:`ForkServer.run` runs one command as a shell would (``subprocess.run`` with captured output):
the child keeps the interpreter's own ``sys.stdin``/``stdout``/``stderr`` objects (so encodings and
error handlers are those of a fresh ``python``) on fresh files, decodes its arguments from bytes as
the interpreter does, and ends the way the interpreter does (``SystemExit`` message, traceback of an
uncaught exception, waiting for non-daemon threads, ``atexit``). ``preload=CLI_PRELOAD`` makes a
zygote that imported what an ``exchange`` process imports before ``main()`` runs, and its commands.
"""

from __future__ import annotations

import itertools
import json
import locale
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# What a gateway imports on its way to its first step.
GATEWAY_PRELOAD = """
import sqlalchemy.dialects.postgresql, sqlalchemy.dialects.sqlite, psycopg
import exchange._cli.main
import exchange._engine.gateway.dispatcher, exchange._engine.inrun.facade
import exchange.workflows.steps.tags, exchange.workflows.steps.sleep, exchange._tags.service
import exchange._drivers.modbus
"""

# What every ``exchange`` process imports before ``main()`` runs (``python -m exchange._cli.main``).
# Also the subcommands' modules, which an `exchange` process imports when it runs one of them (the
# command loads them lazily, so a gateway's start does not pay for them): each forked command would
# otherwise import its module again. And what a command imports when it opens the store
# (exchange._cli.common.Context.runtime), which `exchange --help` does not.
CLI_PRELOAD = """
import exchange._cli.main
for _name in set(exchange._cli.main.LAZY_COMMANDS):
    exchange._cli.main.load_command(_name)
with exchange._cli.common.collector_paused():
    import exchange._config, exchange._engine.operator.runtime, exchange._store.store
    import exchange.workflows.apps, exchange.workflows.engine.instance, exchange.workflows._services
    import exchange._auth.accounts, exchange._engine.gateway, exchange._plant.schedules
"""

ZYGOTE = r"""
import json, os, select, sys

#PRELOAD#
from exchange._store.sql import faults

fd_in, out = sys.stdin.fileno(), sys.stdout
pending = b""


def report(message):
    out.write(json.dumps(message) + "\n")
    out.flush()


def command(request):
    # A command (or a `python -c` script) as a fresh interpreter runs it (see ForkServer.run).
    import atexit, threading
    stdin = os.open(request["stdin"], os.O_RDONLY)
    stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    same = request["stderr"] == request["stdout"]  # like stderr=subprocess.STDOUT
    stderr = stdout if same else os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, opened in ((0, stdin), (1, stdout), (2, stderr)):
        os.dup2(opened, fd)
    for opened in {stdin, stdout, stderr}:
        os.close(opened)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    faults.reload_from_environment()
    args = [os.fsdecode(bytes.fromhex(arg)) for arg in request["argv_hex"]]
    script = request.get("code")
    if script is None:
        sys.path[0] = request["script_dir"] or os.getcwd()  # a console script's folder; `python -m`: the cwd
        sys.argv = ["exchange", *args]
        main = exchange._cli.main.main
    else:
        sys.path[0] = ""  # `python -c`
        sys.argv = ["-c", *args]
        main = lambda: exec(compile(script, "<string>", "exec"), {"__name__": "__main__"})
    code = 0
    try:
        try:
            main()
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
        threading._shutdown()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF)


def child(request):
    os.setpgid(0, 0)
    if "argv_hex" in request:
        command(request)
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
        exchange._cli.main.main()
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

    def __init__(self, cwd: Path, preload: str = GATEWAY_PRELOAD) -> None:
        self._cwd = Path(cwd)
        self._runs = itertools.count(1)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE.replace("#PRELOAD#", preload)], cwd=cwd, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
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
                    # The pid may be one an earlier child had (pid_max is often 32768, and a suite
                    # forks thousands): its exit code is that child's, not this one's. The zygote
                    # reported that exit before this fork (it reaps, then forks), so drop it now.
                    self._exits.pop(message["pid"], None)
                else:
                    self._exits[message["exit"]] = message["code"]
                    self._children.discard(message["exit"])
                self._spawned.notify_all()

    def spawn(self, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path) -> ForkedProcess:
        return self._request({"argv": argv, "env": env, "cwd": str(cwd), "log": str(log)})

    def start(self, argv: Sequence[str], *, env: dict[str, str], cwd: Path, log: Path) -> ForkedProcess:
        """``exchange ARGV`` in a child like ``subprocess.Popen([sys.executable, "-m", "exchange._cli.main",
        *argv], stdin=DEVNULL, stdout=log, stderr=STDOUT)``: unlike :meth:`spawn`, the child ends as
        an interpreter does (it waits for its non-daemon threads, runs ``atexit``)."""
        return self._request(self._command(argv, env=env, cwd=cwd, stdin=os.devnull, stdout=log, stderr=log))

    def run(
        self, argv: Sequence[str], *, env: dict[str, str], cwd: Path, input: str | None = None,
        timeout: float = 60.0, encoding: str | None = None, errors: str | None = None,
        script_dir: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``exchange ARGV`` in a child, like ``subprocess.run([sys.executable, "-m", "exchange._cli.main",
        *argv], capture_output=True, text=True, input=input, timeout=timeout)``: the same exit code,
        stdout and stderr (decoded with ``encoding``/``errors``, default the locale's and strict,
        newlines translated). ``script_dir``: run it as the console script in that folder instead
        (``sys.path[0]`` is the script's folder, not the working folder)."""
        return self._run(["exchange", *argv], dict(argv=argv, env=env, cwd=cwd, script_dir=script_dir),
                         input, timeout, encoding, errors)

    def run_python(
        self, code: str, *, env: dict[str, str], cwd: Path, input: str | None = None, timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Like ``subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, ...)``."""
        return self._run(["python", "-c", code], dict(argv=(), env=env, cwd=cwd, code=code), input, timeout,
                         None, None)

    def _run(
        self, args: list[str], command: dict[str, Any], input: str | None, timeout: float, encoding: str | None,
        errors: str | None,
    ) -> subprocess.CompletedProcess[str]:
        files = self._cwd / f"run-{os.getpid()}-{next(self._runs)}"
        stdin, stdout, stderr = files.with_suffix(".in"), files.with_suffix(".out"), files.with_suffix(".err")
        encoding = encoding or locale.getpreferredencoding(False)
        stdin.write_bytes((input or "").encode(encoding))
        try:
            proc = self._request(self._command(stdin=stdin, stdout=stdout, stderr=stderr, **command))
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                raise subprocess.TimeoutExpired(args, timeout) from None
            out, err = (path.read_bytes().decode(encoding, errors or "strict").replace("\r\n", "\n")
                        .replace("\r", "\n") for path in (stdout, stderr))
        finally:
            for path in (stdin, stdout, stderr):
                path.unlink(missing_ok=True)
        return subprocess.CompletedProcess(args, code, out, err)

    @staticmethod
    def _command(
        argv: Sequence[str], *, env: dict[str, str], cwd: Path, stdin: str | Path, stdout: str | Path,
        stderr: str | Path, script_dir: Path | None = None, code: str | None = None,
    ) -> dict[str, Any]:
        return {"argv_hex": [os.fsencode(arg).hex() for arg in argv], "env": env, "cwd": str(cwd),
                "stdin": str(stdin), "stdout": str(stdout), "stderr": str(stderr),
                "script_dir": str(script_dir or ""), "code": code}

    def _request(self, message: dict[str, Any]) -> ForkedProcess:
        request = json.dumps(message) + "\n"
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
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:  # it ended and was reaped after poll() looked, as Popen allows
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


__all__ = ["CLI_PRELOAD", "GATEWAY_PRELOAD", "ForkServer", "ForkedProcess"]
