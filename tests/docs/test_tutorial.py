"""docs/tutorial.md, executed: the files it shows pass their own tests, and its commands work.

The files (each code block starting with ``# <path>``) are written to a fresh project folder. Their
pytest run goes in a subprocess, as the reader runs it. The walk-through (simulated plant, gateway,
start, HOLD, kill -9, restart, RESUME; a phase in the PLC held by the operator and by its watchdog;
two batches taking turns at the reactor)
runs the page's own command lines through the installed ``exchange`` command; every line used here
must appear in one of the page's ``sh`` blocks. A few changes keep the test fast and safe beside
other tests: the plants are served on free ports, the run fills to 20 % instead of 60 %, and the
reactor's charge ends when the test says (transients of 0.1 s, a heartbeat every 0.3 s).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.docs.markdown import page, shell_commands, shown_files

TUTORIAL = page("tutorial.md")
COMMANDS = shell_commands(TUTORIAL)
FILES = shown_files(TUTORIAL)
BIN = Path(sys.executable).parent

# The page's command lines this test runs (each must be shown by the page), and the set-up lines it
# leaves to the reader; together they are every command of the page.
RUN_HERE = (
    "exchange simulate --config-out plant.toml",
    "cat plant.toml >> exchange.toml",
    "exchange tags list",
    'exchange tags read "[plant]Line1/Tank/Level" "[plant]Line1/Tank/InletValve/Cmd"',
    "exchange workflows",
    "pytest -q apps",
    "exchange gateway",
    "RUN=$(exchange start tutorial.fill_tank -p target=60)",
    "exchange show $RUN",
    'exchange send $RUN HOLD --reason "take a sample" --wait',
    'kill -9 $(pgrep -f "exchange gateway")',
    "exchange runs --status RUNNING",
    "exchange send $RUN RESUME",
    "RUN=$(exchange start tutorial.release -p batch=B-7)",
    "exchange prompts",
    'exchange answer $RUN lab -v density=1.02 -v release=true --reason "lab sheet 7"',
    "exchange users add eve --role engineer",
    "exchange verify $RUN lab --user eve",
    "exchange simulate --from-config reactor.toml --config-out r1.toml",
    "cat r1.toml >> exchange.toml",
    "exchange phases",
    "RUN=$(exchange start tutorial.charge -p target_l=250)",
    'exchange send $RUN HOLD --reason "check the charge valve" --wait',
    "exchange runs --attention",
    "exchange show $RUN --events all",
    "FIRST=$(exchange start tutorial.batch -p target_l=200)",
    "SECOND=$(exchange start tutorial.batch -p target_l=300)",
    "exchange units",
)
NOT_RUN = (
    "python3 -m venv .venv",
    ".venv/bin/pip install -e '.[dev]'",
    "source .venv/bin/activate",
    "mkdir ~/first-exchange",
    "cd ~/first-exchange",
    "echo $RUN",
)


def program(name: str) -> list[str]:
    """The installed console script ``name``, else the module run by this Python."""
    script = BIN / name
    return [str(script)] if script.is_file() else [sys.executable, "-m", name]


def doc_command(line: str, **values: str) -> list[str]:
    """``line`` as argv, after checking the tutorial shows it; ``$NAME`` replaced from ``values``."""
    assert line in RUN_HERE, f"add {line!r} to RUN_HERE"
    assert line in COMMANDS, f"the tutorial no longer shows the command {line!r}"
    assigned = re.fullmatch(r"[A-Z]+=\$\((.*)\)", line)  # RUN=$(exchange start ...): the command's output
    if assigned:
        line = assigned.group(1)
    for name, value in values.items():
        line = line.replace(f"${name}", value)
    argv = shlex.split(line)
    return program(argv[0]) + argv[1:]


def environment() -> dict[str, str]:
    """This environment without settings that would point the commands away from ./exchange.toml."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("EXCHANGE_CONFIG", "EXCHANGE_STORE_URL", "EXCHANGE_APPS", "PYTEST_ADDOPTS")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def write_project(folder: Path) -> Path:
    """The reader's project folder with every file the tutorial shows."""
    assert set(FILES) == {"exchange.toml", "apps/tank_fill.py", "apps/conftest.py", "apps/test_tank_fill.py",
                          "apps/approval.py", "apps/test_approval.py", "reactor.toml", "apps/charge.py",
                          "apps/batch.py"}
    for relative, text in FILES.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path)


@pytest.fixture(scope="module")
def tutorial_tests(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[str]]:
    """``pytest -q apps`` in a project folder of its own, started at once and left running, so it
    overlaps the walk-through (the two together stay well under 20 s)."""
    folder = write_project(tmp_path_factory.mktemp("tutorial_tests"))
    argv = doc_command("pytest -q apps") + ["-p", "no:cacheprovider"]
    proc = subprocess.Popen(argv, cwd=folder, env=environment(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


class Background:
    """A long-running command (the plant, a gateway); its stderr is collected line by line."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.argv = argv
        self.lines: list[str] = []
        self.proc = subprocess.Popen(argv, cwd=cwd, env=environment(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def wait_for(self, text: str, timeout_s: float = 30) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in self.lines:
                if text in line:
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"{' '.join(self.argv[-3:])} did not print {text!r}:\n{''.join(self.lines)}")

    def stop(self) -> None:
        """Wait for the end of a process asked to stop (SIGTERM); SIGKILL it past 15 s."""
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


@pytest.fixture
def background() -> Iterator[Callable[[list[str], Path], Background]]:
    yield from backgrounds()


def backgrounds() -> Iterator[Callable[[list[str], Path], Background]]:
    """What the ``background`` fixture gives: start long-running commands, stopped at the end."""
    started: list[Background] = []

    def start(argv: list[str], cwd: Path) -> Background:
        started.append(Background(argv, cwd))
        return started[-1]

    yield start
    for item in reversed(started):  # all asked at once, then waited for
        if item.proc.poll() is None:
            item.proc.terminate()
    for item in reversed(started):
        item.stop()


def run(argv: list[str], cwd: Path, timeout_s: float = 60) -> str:
    """Run a command to its end; its stdout (AssertionError with its output when it fails)."""
    done = subprocess.run(argv, cwd=cwd, env=environment(), capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def show_until(argv: list[str], cwd: Path, text: str, timeout_s: float = 30) -> str:
    """Repeat ``exchange show RUN`` until its output holds ``text``."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = run(argv, cwd)
        if text in out:
            return out
        assert time.monotonic() < deadline, f"`exchange show` never showed {text!r}; last:\n{out}"
        time.sleep(0.2)


def test_every_command_of_the_tutorial_is_run_here_or_left_to_the_reader() -> None:
    assert set(COMMANDS) == set(RUN_HERE) | set(NOT_RUN), sorted(set(COMMANDS) ^ (set(RUN_HERE) | set(NOT_RUN)))


def test_the_tutorial_walk_through(
    project: Path, background: Callable[[list[str], Path], Background], tutorial_tests: subprocess.Popen[str]
) -> None:
    # (tutorial_tests: asked for here only so that it runs meanwhile; the next test checks it)
    free_ports = ["--modbus-port", "0", "--opcua-port", "0", "--enip-port", "0"]
    plant = background(doc_command("exchange simulate --config-out plant.toml") + free_ports, project)
    # while the plant starts: the apps load (this needs only [store] and [apps])
    assert "tutorial.fill_tank(target)" in run(doc_command("exchange workflows"), project)
    plant.wait_for("simulated plant ready")
    doc_command("cat plant.toml >> exchange.toml")
    with (project / "exchange.toml").open("a", encoding="utf-8") as config:
        config.write((project / "plant.toml").read_text(encoding="utf-8"))
    listed = [line.split()[:2] for line in run(doc_command("exchange tags list"), project).splitlines()]
    assert ["[plant]Line1/Tank/InletValve/Cmd", "sim_modbus"] in listed, listed
    read = run(doc_command('exchange tags read "[plant]Line1/Tank/Level" "[plant]Line1/Tank/InletValve/Cmd"'),
               project).splitlines()
    assert [line.split()[:3] for line in read] == [["[plant]Line1/Tank/Level", "0", "Good"],
                                                   ["[plant]Line1/Tank/InletValve/Cmd", "false", "Good"]], read

    gateway = background(doc_command("exchange gateway"), project)
    gateway.wait_for("recovered 0 run(s)")
    start = doc_command("RUN=$(exchange start tutorial.fill_tank -p target=60)")
    start[start.index("target=60")] = "target=20"
    run_id = run(start, project).strip()
    assert len(run_id) == 36, run_id
    show = doc_command("exchange show $RUN", RUN=run_id)

    sent = run(doc_command('exchange send $RUN HOLD --reason "take a sample" --wait', RUN=run_id), project)
    assert f"HOLD consumed by run {run_id} (accepted in state RUNNING); state now HELD" in sent, sent
    held = run(show, project)
    assert "state HELD" in held, held
    assert "held: take a sample" in held

    doc_command('kill -9 $(pgrep -f "exchange gateway")')
    gateway.proc.kill()  # this test's own gateway, by its process
    gateway.proc.wait(10)
    # As the tutorial has it, `runs` looks before a gateway comes back: a gateway's recovery marks
    # the runs it takes PENDING until it executes them, so a `runs` beside it may miss the run.
    listed = run(doc_command("exchange runs --status RUNNING"), project)
    assert run_id in listed and "HELD" in listed, listed
    restarted = background(doc_command("exchange gateway"), project)
    restarted.wait_for("recovered 1 run(s)")
    run(doc_command("exchange send $RUN RESUME", RUN=run_id), project)
    finished = show_until(show, project, "status    SUCCESS")
    assert "state COMPLETE" in finished
    assert '"stopped": false' in finished
    steps = [line.split()[2] for line in finished.splitlines() if line.strip().startswith("step ")]
    assert steps.count("exchange.recvCommand") == 2, finished  # one HOLD and one RESUME, recorded once each
    assert '"execution": 2' in finished, finished  # the restarted gateway executed the run again
    kinds = [line.split()[1] for line in finished.splitlines() if line.startswith("  20")]
    assert kinds.count("tag_write") == 4, finished  # open, close on HOLD, open on RESUME, close: none twice

    # 9. An approval step
    approval = run(doc_command("RUN=$(exchange start tutorial.release -p batch=B-7)"), project).strip()
    show = doc_command("exchange show $RUN", RUN=approval)
    show_until(show, project, "prompt    lab: Lab result for batch B-7")
    listed = run(doc_command("exchange prompts"), project)
    assert "Lab result for batch B-7" in listed and "density (float, 0.9..1.2, g/cm3), release (bool)" in listed
    answered = run(doc_command('exchange answer $RUN lab -v density=1.02 -v release=true --reason "lab sheet 7"',
                               RUN=approval), project)
    assert "it waits for verification by a second person (engineer or above)" in answered, answered
    verify = doc_command("exchange verify $RUN lab --user eve", RUN=approval)
    refused = subprocess.run([arg for arg in verify if arg not in ("--user", "eve")], cwd=project,
                             env=environment(), capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--user NAME" in refused.stderr, refused.stderr
    password = "eve's own password\n"
    added = subprocess.run(doc_command("exchange users add eve --role engineer"), cwd=project, env=environment(),
                           input=password, capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    verified = subprocess.run(verify, cwd=project, env=environment(), input=password, capture_output=True,
                              text=True, timeout=60)
    assert verified.returncode == 0 and "verified the answer of prompt lab" in verified.stdout, verified.stderr
    released = show_until(show, project, "status    SUCCESS")
    assert '"released": true' in released and '"verified_by": "eve"' in released, released


def test_the_tutorial_files_pass_their_tests(tutorial_tests: subprocess.Popen[str]) -> None:
    out, _ = tutorial_tests.communicate(timeout=120)
    assert tutorial_tests.returncode == 0, out
    assert "4 passed" in out, out
