"""How long the ``exchange`` command takes to answer: ``--help``, ``runs`` and ``show RUN``.

    .venv/bin/python bench/startup.py [--rounds 10] [--stored 50]

Each command is a fresh process of the installed ``exchange`` script (what an operator types), timed
from its start to its exit, ``--rounds`` times after one warm-up, on a SQLite store holding
``--stored`` queued runs and one finished run of five steps (made once, before the timing; ``show``
shows the finished one). Three ways of finding the package's bytecode:

- ``compiled``: as ``scripts/setup.sh`` leaves an install, every module compiled;
- ``exchange uncompiled``: a fresh copy of the ``exchange`` package without ``__pycache__`` first on
  ``PYTHONPATH``, with ``PYTHONDONTWRITEBYTECODE=1`` (a read-only or editable install never compiled,
  the libraries compiled by pip): every process compiles Exchange's modules again;
- ``nothing compiled``: ``PYTHONPYCACHEPREFIX`` an empty folder and ``PYTHONDONTWRITEBYTECODE=1``:
  no bytecode is found for any module, the libraries' included, and none is written.

Prints median and p90 per command and way, against issue 46's goals (compiled: ``--help`` <= 150 ms,
``runs`` and ``show`` <= 300 ms), and under them the floors measured the same way: the interpreter
alone (``python -c pass``) and the interpreter importing SQLAlchemy with its SQLite dialect, which a
command reading the store cannot do without.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, machine_note, percentile

from tests.harness import ExchangeEnv

APP = """
from exchange.workflows.bootstrap import step, workflow


@step(name="startup.tick")
def tick(i):
    return i


@workflow(name="startup.steps")
def steps(n=5):
    return [tick(i) for i in range(n)]
"""

GOALS_MS = {"--help": 150.0, "runs": 300.0, "show RUN": 300.0}  # issue 46, bytecode compiled


def make_store(root: Path, stored: int) -> tuple[ExchangeEnv, str]:
    """An env whose store holds ``stored`` queued runs and one finished run of five steps (its id)."""
    env = ExchangeEnv.create(root, apps_package="startupapps")
    env.write_app("steps", APP)
    env.start_runs("startup.steps", [{"n": 5}] * stored)
    finished = env.cli("run", "startup.steps", "--json").check().json()
    return env, str(finished["id"])


def time_command(argv: list[str], cwd: Path, env: dict[str, str], rounds: int) -> list[float]:
    """Wall seconds of ``rounds`` runs of ``argv`` (after one not counted), each checked to exit 0."""
    times: list[float] = []
    for i in range(rounds + 1):
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
        if i:
            times.append(elapsed)
    return times


def ways(tmp: Path, base_env: dict[str, str]) -> dict[str, dict[str, str]]:
    """The process environment of each way of finding bytecode (see the module docstring)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "exchange")], check=True,
                   stdout=subprocess.DEVNULL)
    copy = tmp / "uncompiled"
    shutil.copytree(ROOT / "exchange", copy / "exchange", ignore=shutil.ignore_patterns("__pycache__"))
    empty_prefix = tmp / "no-pycache"
    empty_prefix.mkdir()
    no_write = {**base_env, "PYTHONDONTWRITEBYTECODE": "1"}
    return {
        "compiled": base_env,
        "exchange uncompiled": {**no_write, "PYTHONPATH": str(copy)},
        "nothing compiled": {**no_write, "PYTHONPYCACHEPREFIX": str(empty_prefix)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="Timed runs of each command (default 10).")
    parser.add_argument("--stored", type=int, default=50, help="Queued runs in the store (default 50).")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="exchange-startup-"))
    try:
        print(machine_note(tmp))
        env, run_id = make_store(tmp / "env", args.stored)
        exchange = str(Path(sys.executable).parent / "exchange")
        config = ["--config", str(env.config_path)]
        commands = {"--help": [exchange, "--help"], "runs": [exchange, *config, "runs"],
                    "show RUN": [exchange, *config, "show", run_id]}
        print(f"store: {env.store_url}, {args.stored} queued runs and one finished; {args.rounds} rounds each\n")
        print(f"{'command':<10} {'bytecode':<20} {'median':>9} {'p90':>9} {'min':>9}   goal")
        for way, process_env in ways(tmp, env.process_env()).items():
            if way == "exchange uncompiled":  # the copy, not the repository's package, is what runs
                where = subprocess.run([sys.executable, "-c", "import exchange; print(exchange.__file__)"],
                                       env=process_env, cwd=env.root, capture_output=True, text=True,
                                       check=True).stdout
                assert where.startswith(str(tmp)), where
            for name, argv in commands.items():
                times_ms = [t * 1000 for t in time_command(argv, env.root, process_env, args.rounds)]
                median = statistics.median(times_ms)
                goal = ""
                if way == "compiled":
                    goal = f"<= {GOALS_MS[name]:.0f} ms " + ("met" if median <= GOALS_MS[name] else "MISSED")
                print(f"{name:<10} {way:<20} {median:>6.0f} ms {percentile(times_ms, 90):>6.0f} ms "
                      f"{min(times_ms):>6.0f} ms   {goal}")
        print("\nfloors (compiled):")
        floors = {"python -c pass": "pass", "import sqlalchemy": "import sqlalchemy, sqlalchemy.dialects.sqlite"}
        for name, code in floors.items():
            times_ms = [t * 1000 for t in time_command([sys.executable, "-c", code], env.root, env.process_env(),
                                                       args.rounds)]
            print(f"{name:<31} {statistics.median(times_ms):>6.0f} ms {percentile(times_ms, 90):>6.0f} ms "
                  f"{min(times_ms):>6.0f} ms")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the compiled way compiles first, and keeps it
    main()
