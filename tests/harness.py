"""Helpers for tests (and benches) that run Exchange as real processes.

An :class:`ExchangeEnv` is a folder with an ``exchange.toml`` whose store is a SQLite file inside the
folder (or a PostgreSQL URL) and whose ``[apps] paths`` point at an apps folder the test fills with
its own workflow modules. :class:`Gateway` runs ``exchange gateway`` on that config as a subprocess,
waits for its "ready" line, kills it with SIGKILL and starts it again. :meth:`ExchangeEnv.cli` runs
any other ``exchange`` command and captures its output. :func:`wait_until` polls a condition with a
deadline, which is how these tests wait (never a bare sleep).

The gateway's stderr goes to a log file per start (``gateway-N.log`` in the env folder), so a failing
test can show what each gateway said, and a chatty gateway never blocks on a full pipe.

An env created with ``zygote=`` (the session's ``exchange_zygote`` fixture) starts all of these
processes — gateways, commands, the ``start_runs`` script — by forking them from that zygote: still
separate processes that are killed with real signals and exit as an interpreter does, without the
~0.7 s of imports each (see ``tests/forkserver.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.forkserver import ForkedProcess, ForkServer
from tests.store_template import seeded_sqlite_url
from tests.waiting import wait_until

__all__ = ["wait_until"]

T = TypeVar("T")

EXCHANGE_CMD: tuple[str, ...] = (sys.executable, "-m", "exchange._cli.main")

READY_MARK = " ready: "


def toml_value(value: Any) -> str:
    """A TOML literal for a str, bool, int, float or list of those (enough for exchange.toml)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


@dataclass
class CliResult:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """The last non-empty stdout line parsed as JSON."""
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        if not lines:
            raise AssertionError(f"exchange {' '.join(self.args)} printed nothing on stdout; stderr: {self.stderr}")
        return json.loads(lines[-1])

    def check(self) -> CliResult:
        if self.returncode != 0:
            raise AssertionError(
                f"exchange {' '.join(self.args)} exited {self.returncode}\nstdout: {self.stdout}\nstderr: {self.stderr}"
            )
        return self


@dataclass
class ExchangeEnv:
    """A working folder with a config, a store and an apps folder; see the module docstring."""

    root: Path
    store_url: str
    apps_dir: Path
    extra_app_paths: tuple[str, ...] = ()
    engine: dict[str, Any] = field(default_factory=dict)
    zygote: ForkServer | None = None  # start the processes from this zygote (see the module docstring)

    @classmethod
    def create(
        cls,
        root: Path,
        *,
        store_url: str | None = None,
        apps_package: str = "testapps",
        extra_app_paths: Sequence[str | Path] = (),
        engine: dict[str, Any] | None = None,
        zygote: ForkServer | None = None,
        seeded: bool = True,
    ) -> ExchangeEnv:
        """Make the folder, its apps package folder (named ``apps_package``, so modules import as
        ``apps_package.x`` without clashing with the repository's ``apps``) and the config file.
        Without ``store_url``: a SQLite store in ``var/``, holding the schema already unless
        ``seeded`` is False (then the first process to open it migrates it)."""
        root.mkdir(parents=True, exist_ok=True)
        apps_dir = root / apps_package
        apps_dir.mkdir(exist_ok=True)
        env = cls(
            root=root,
            store_url=store_url or (seeded_sqlite_url(root / "var" / "exchange.db") if seeded
                                    else f"sqlite:///{root / 'var' / 'exchange.db'}"),
            apps_dir=apps_dir,
            extra_app_paths=tuple(str(p) for p in extra_app_paths),
            engine=dict(engine or {}),
            zygote=zygote,
        )
        env.write_config()
        return env

    @property
    def config_path(self) -> Path:
        return self.root / "exchange.toml"

    @property
    def sqlite_path(self) -> Path | None:
        prefix = "sqlite:///"
        return Path(self.store_url[len(prefix):]) if self.store_url.startswith(prefix) else None

    def write_config(self) -> None:
        lines = [
            "[store]",
            f"url = {toml_value(self.store_url)}",
            "",
            "[apps]",
            f"paths = {toml_value([str(self.apps_dir), *self.extra_app_paths])}",
        ]
        if self.engine:
            lines += ["", "[engine]"] + [f"{k} = {toml_value(v)}" for k, v in self.engine.items()]
        self.config_path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def write_app(self, module: str, source: str) -> Path:
        """Write a workflow module into the apps folder (``source`` is dedented)."""
        path = self.apps_dir / f"{module}.py"
        path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
        return path

    def process_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def cli(self, *args: str, timeout_s: float = 60.0, input_text: str | None = None,
            extra_env: dict[str, str] | None = None) -> CliResult:
        """Run ``exchange --config <this config> ARGS`` in the env folder and capture its output
        (``extra_env``: variables for this command only)."""
        env = {**self.process_env(), **(extra_env or {})}
        if self.zygote is not None:
            done = self.zygote.run(["--config", str(self.config_path), *args], cwd=self.root,
                                   env=env, timeout=timeout_s, input=input_text)
            return CliResult(tuple(args), done.returncode, done.stdout, done.stderr)
        proc = subprocess.run(
            [*EXCHANGE_CMD, "--config", str(self.config_path), *args],
            cwd=self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            input=input_text,
        )
        return CliResult(tuple(args), proc.returncode, proc.stdout, proc.stderr)

    def show(self, run_id: str) -> dict[str, Any]:
        """``exchange show RUN --json`` as a dict."""
        result: dict[str, Any] = self.cli("show", run_id, "--json").check().json()
        return result

    def gateway(
        self, *extra_args: str, log_level: str = "INFO", name: str = "gateway", forkserver: ForkServer | None = None
    ) -> Gateway:
        if forkserver is None and self.zygote is not None:
            return Gateway(self, extra_args=tuple(extra_args), log_level=log_level, name=name, zygote=self.zygote)
        return Gateway(self, extra_args=tuple(extra_args), log_level=log_level, name=name, forkserver=forkserver)

    def runtime(self) -> Any:
        """A runtime on this env's config in the test process, for cheap reads (``get_run``,
        ``list_runs``) while waiting. It does not import the apps: starting runs goes through
        :meth:`start_runs`, in a subprocess that does."""
        from exchange._config import load_config
        from exchange._engine.operator.runtime import Runtime

        return Runtime(load_config(self.config_path, env=self.process_env()))

    def start_runs(self, workflow: str, params: Sequence[dict[str, Any]], **options: Any) -> list[str]:
        """Start one run per params dict through ``getWorkflows().start`` in one subprocess (one
        interpreter start for the whole batch instead of one ``exchange start`` each)."""
        script = textwrap.dedent(
            """
            import json, sys
            from exchange._config import load_config
            from exchange.workflows import apps
            from exchange.workflows.engine.instance import configure, getWorkflows
            job = json.loads(sys.stdin.read())
            runtime = configure(load_config(job["config"]))
            apps.load(runtime.config)
            ids = [getWorkflows().start(job["workflow"], p, **job["options"]) for p in job["params"]]
            runtime.close()
            print(json.dumps(ids))
            """
        )
        job = {"config": str(self.config_path), "workflow": workflow, "params": list(params), "options": options}
        if self.zygote is not None:
            proc = self.zygote.run_python(script, cwd=self.root, env=self.process_env(), timeout=60,
                                          input=json.dumps(job))
        else:
            proc = subprocess.run(
                [sys.executable, "-c", script], cwd=self.root, env=self.process_env(), capture_output=True,
                text=True, timeout=60, input=json.dumps(job),
            )
        if proc.returncode != 0:
            raise AssertionError(f"starting runs of {workflow} failed:\n{proc.stderr}")
        ids: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
        return ids


class Gateway:
    """``exchange gateway`` as a subprocess that a test can start, kill -9 and restart."""

    def __init__(
        self, env: ExchangeEnv, *, extra_args: tuple[str, ...] = (), log_level: str = "INFO", name: str = "gateway",
        forkserver: ForkServer | None = None, zygote: ForkServer | None = None,
    ) -> None:
        """``forkserver``: start the processes from a pre-imported zygote (milliseconds instead of
        half a second each; see ``tests/forkserver.py``). ``zygote``: the same, and each process
        ends as an interpreter does (``ForkServer.start``)."""
        self.env = env
        self.name = name  # log files are NAME-<start>.log: two gateways of one env need two names
        self.extra_args = extra_args
        self.log_level = log_level
        self.forkserver = forkserver
        self.zygote = zygote
        self.proc: subprocess.Popen[bytes] | ForkedProcess | None = None
        self.starts = 0
        self.kills = 0
        self.pids: list[int] = []
        self.killed_pids: list[int] = []
        self.spawned_at = 0.0  # time.time() of the last spawn
        self.ready_at = 0.0  # time.time() the last ready line was seen

    @property
    def log_path(self) -> Path:
        return self.env.root / f"{self.name}-{self.starts}.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the gateway is not running"
        return self.proc.pid

    def spawn(self, extra_env: dict[str, str] | None = None) -> None:
        """Start the process without waiting for it to be ready (``extra_env``: variables for this
        start only, e.g. a fault-injection point)."""
        assert self.proc is None or self.proc.poll() is not None, "the gateway is already running"
        self.starts += 1
        if self.zygote is not None:
            self.spawned_at = time.time()
            self.proc = self.zygote.start(
                ["--config", str(self.env.config_path), "--log-level", self.log_level, "gateway", *self.extra_args],
                env={**self.env.process_env(), **(extra_env or {})}, cwd=self.env.root, log=self.log_path,
            )
            self.pids.append(self.proc.pid)
            return
        if self.forkserver is not None:
            self.spawned_at = time.time()
            self.proc = self.forkserver.spawn(
                ["--config", str(self.env.config_path), "--log-level", self.log_level, "gateway", *self.extra_args],
                env={**self.env.process_env(), **(extra_env or {})}, cwd=self.env.root, log=self.log_path,
            )
            self.pids.append(self.proc.pid)
            return
        log = open(self.log_path, "wb")
        try:
            self.spawned_at = time.time()
            self.proc = subprocess.Popen(
                [*EXCHANGE_CMD, "--config", str(self.env.config_path), "--log-level", self.log_level,
                 "gateway", *self.extra_args],
                cwd=self.env.root,
                env={**self.env.process_env(), **(extra_env or {})},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()
        self.pids.append(self.proc.pid)

    def log_text(self, which: int | None = None) -> str:
        path = self.env.root / f"{self.name}-{which or self.starts}.log"
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def all_logs(self) -> str:
        return "\n".join(f"--- gateway start {i} ---\n{self.log_text(i)}" for i in range(1, self.starts + 1))

    def wait_ready(self, timeout_s: float = 20.0) -> None:
        """Wait for the ready line; fail with the log if the process exits or the deadline passes."""

        def ready() -> bool:
            assert self.proc is not None
            if READY_MARK in self.log_text():
                return True
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"gateway exited with {self.proc.returncode} before it was ready:\n{self.log_text()}"
                )
            return False

        wait_until(ready, timeout_s, interval_s=0.005, message=lambda: f"gateway ready line\n{self.log_text()}")
        self.ready_at = time.time()

    def start(self, timeout_s: float = 20.0, extra_env: dict[str, str] | None = None) -> Gateway:
        self.spawn(extra_env)
        self.wait_ready(timeout_s)
        return self

    def kill9(self) -> None:
        """SIGKILL the process and reap it: no cleanup code of the gateway runs."""
        assert self.proc is not None and self.proc.poll() is None, "the gateway is not running"
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self.kills += 1
        self.killed_pids.append(self.proc.pid)

    def restart(self, timeout_s: float = 20.0) -> Gateway:
        if self.alive():
            self.kill9()
        return self.start(timeout_s)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL if it does not exit in time); returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"gateway did not stop within {timeout_s}s of SIGTERM:\n{self.log_text()}") from None

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)


def read_lines(path: Path) -> list[list[str]]:
    """The lines of a side-effect file split on blanks (a missing file has none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line.split() for line in text.splitlines() if line.strip()]


def count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def first(items: Iterable[T], predicate: Callable[[T], bool]) -> T | None:
    for item in items:
        if predicate(item):
            return item
    return None


def operator_loop_app(workflow: str, *, prelude: str = "", before_recv: str = "", after_recv: str = "",
                      before_sleep: str = "", recv_timeout_seconds: float = 0.2, sleep_ms: int = 1000) -> str:
    """The source of an apps module defining ``workflow``: the loop a plant runs per unit, for ever —
    ``recvCommand(timeoutSeconds=recv_timeout_seconds)`` then ``sleep_chunked(sleep_ms, 250)`` (no
    sleep if ``sleep_ms`` is 0); HOLD waits for RESUME (or STOP), STOP returns "stopped".
    ``prelude``: module code placed before it; ``before_recv``, ``after_recv`` (``cmd`` holds what
    the receive returned) and ``before_sleep``: one statement run before the loop's receive, after
    it and before its sleep (a bench's probe)."""
    return (
        "from exchange.workflows.bootstrap import workflow\n"
        "from exchange.workflows.engine.instance import getWorkflows\n"
        "from exchange.workflows.steps.sleep import sleep_chunked\n"
        + prelude
        + f"""

@workflow(name={workflow!r})
def operator_loop():
    rt = getWorkflows()
    while True:
        {before_recv or "pass"}
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds={recv_timeout_seconds!r}, maxMessages=1)
        {after_recv or "pass"}
        if cmd and cmd["cmd"] == "STOP":
            return "stopped"
        if cmd and cmd["cmd"] == "HOLD":
            while True:
                cmd = rt.recvCommand(currentState="HELD", timeoutSeconds=0.2, maxMessages=1)
                if cmd and cmd["cmd"] in ("RESUME", "STOP"):
                    break
            if cmd["cmd"] == "STOP":
                return "stopped"
            rt.setState("RUNNING")
        {before_sleep or "pass"}
        {f"sleep_chunked(total_ms={sleep_ms!r}, chunk_ms=250)" if sleep_ms else "pass"}
"""
    )


# The side-effect helper that test workflows import from their apps folder: one durable line per
# call, appended with O_APPEND and fsync'd, so a kill -9 right after it cannot lose it.
SIDE_EFFECT_MODULE = '''
import os


def append_line(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
'''
