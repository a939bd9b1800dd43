"""docs/simulation.md, executed: its files make a project whose tests pass against its own simulated
config, and its commands serve that config and run the workflow on a gateway against it.

Every file the page shows (a code block starting ``# <path>``) is written to a fresh project folder;
every command line of its ``sh`` blocks is run here, through the installed ``exchange`` and ``pytest``
(``RUN_HERE`` lists them; a line the page adds or changes fails the first test until it is here).
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.markdown import page, shell_commands, shown_files
from tests.docs.test_tutorial import Background, environment, program, run

PAGE = page("simulation.md")
COMMANDS = shell_commands(PAGE)
FILES = shown_files(PAGE)
RUN_HERE = (
    "exchange simulate --from-config exchange.toml --free-ports --config-out sim.toml",
    'exchange --config sim.toml tags read "[site]Area9/Silo/Level" "[site]Area9/Feed/Running"',
    "pytest -q apps",
    "exchange --config sim.toml gateway",
    "exchange --config sim.toml start area9.fill_silo -p target=63 --wait",
)


def command(line: str) -> list[str]:
    assert line in RUN_HERE and line in COMMANDS, line
    argv = shlex.split(line)
    return program(argv[0]) + argv[1:]


def write_project(folder: Path) -> Path:
    assert set(FILES) == {"exchange.toml", "sim/area9.py", "apps/fill_silo.py", "apps/test_fill_silo.py"}
    for relative, text in FILES.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def started() -> Iterator[list[Background]]:
    processes: list[Background] = []
    yield processes
    for item in reversed(processes):
        if item.proc.poll() is None:
            item.proc.terminate()
    for item in reversed(processes):
        item.stop()


def test_every_command_of_the_page_is_run_here() -> None:
    assert set(COMMANDS) == set(RUN_HERE), sorted(set(COMMANDS) ^ set(RUN_HERE))


def test_the_pages_tests_pass_against_the_simulated_config(tmp_path: Path) -> None:
    project = write_project(tmp_path)
    done = subprocess.run(command("pytest -q apps") + ["-p", "no:cacheprovider"], cwd=project, env=environment(),
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "3 passed" in done.stdout, done.stdout


def test_serve_read_and_run_on_a_gateway(tmp_path: Path, started: list[Background]) -> None:
    project = write_project(tmp_path)
    simulator = Background(command("exchange simulate --from-config exchange.toml --free-ports --config-out sim.toml"),
                           project)
    started.append(simulator)
    simulator.wait_for("simulated plant ready")
    assert any(line.startswith("  silo (modbus) on 127.0.0.1:") for line in simulator.lines), simulator.lines
    read = run(command('exchange --config sim.toml tags read "[site]Area9/Silo/Level" "[site]Area9/Feed/Running"'),
               project).splitlines()
    assert [line.split()[:3] for line in read] == [["[site]Area9/Silo/Level", "62.5", "Good"],
                                                   ["[site]Area9/Feed/Running", "false", "Good"]], read
    gateway = Background(command("exchange --config sim.toml gateway"), project)
    started.append(gateway)
    gateway.wait_for("recovered 0 run(s)")
    out = run(command("exchange --config sim.toml start area9.fill_silo -p target=63 --wait"), project,
              timeout_s=120)
    assert out.strip().splitlines()[-1] == '{"level": 63.0}', out
