"""``exchange start`` and ``exchange run`` with ``-p`` values that do not fit the workflow's parameters
(real processes forked from the session's zygote, a real SQLite store): each case of
tests/paramcases.py exits 1 with one line naming the parameter, the expected type and the value,
and no run is stored; a parameter given twice is a usage error (exit 2) naming it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv
from tests.paramcases import ACCEPTED, APP, VALVE, Case, refused_cases


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ExchangeEnv]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("cli-params")), zygote=exchange_zygote)
    env.write_app("params_app", APP)
    env.cli("start", VALVE, "-p", "x=1").check()  # creates the store, so every count below reads one
    yield env


def _runs(env: ExchangeEnv) -> int:
    assert env.sqlite_path is not None
    with closing(sqlite3.connect(env.sqlite_path)) as conn:
        return int(conn.execute("SELECT count(*) FROM exchange_runs").fetchone()[0])


def _p(items: tuple[str, ...]) -> list[str]:
    return [arg for item in items for arg in ("-p", item)]


@pytest.mark.parametrize("command", ["start", "run"])
@pytest.mark.parametrize("case", refused_cases())
def test_a_value_that_does_not_fit_is_refused_naming_it(env: ExchangeEnv, command: str, case: Case) -> None:
    before = _runs(env)
    refused = env.cli(command, VALVE, *_p(case.cli))
    assert refused.returncode == 1, refused
    assert refused.stderr.startswith(f"error: workflow '{VALVE}': ") and case.named in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert _runs(env) == before


@pytest.mark.parametrize(("params", "cli", "x"), [pytest.param(p, c, x, id=name) for name, p, c, x in ACCEPTED])
def test_what_fits_runs_with_the_values_as_given(env: ExchangeEnv, params: dict[str, Any], cli: tuple[str, ...],
                                                 x: Any) -> None:
    run = env.cli("run", VALVE, *_p(cli), "--json").check().json()
    assert run["status"] == "SUCCESS" and run["params"] == params
    assert run["result"]["x"] == x and run["result"]["x_type"] == type(x).__name__
    started = env.cli("start", VALVE, *_p(cli), "--json").check().json()
    assert env.show(started["id"])["params"] == params


@pytest.mark.parametrize("command", ["start", "run"])
def test_a_parameter_given_twice_is_a_usage_error_naming_it(env: ExchangeEnv, command: str) -> None:
    before = _runs(env)
    refused = env.cli(command, VALVE, "-p", "x=1", "-p", "count=1", "-p", "count=2")
    assert refused.returncode == 2, refused
    assert "'count' is given twice (1 and 2)" in refused.stderr, refused.stderr
    assert _runs(env) == before
