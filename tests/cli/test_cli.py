"""The ``exchange`` command as a user runs it: real processes, a real SQLite store.

Every command is run at least once as ``python -m exchange._cli.main``, started as a shell would; the
tests that take ``exchange_zygote`` fork their processes from the session's zygote instead (real
processes too, without the ~0.7 s of imports each; see ``tests/forkserver.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from exchange._store.store import Store
from tests.forkserver import ForkServer

APP = '''
from exchange.workflows.bootstrap import workflow, step, getWorkflows

@step(name="cli.double")
def double(x):
    return x * 2

@workflow(name="cli.double_it")
def double_it(n=1, label="x"):
    getWorkflows().progress("doubling %s" % n)
    return {"label": label, "value": double(n)}

@workflow(name="cli.fails")
def fails():
    raise ValueError("the recipe is empty")
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "cli_app.py").write_text(APP)
    (tmp_path / "exchange.toml").write_text('[store]\nurl = "sqlite:///var/exchange.db"\n')
    return tmp_path


def exchange(
    project: Path, *args: str, env: dict[str, str] | None = None, zygote: ForkServer | None = None
) -> subprocess.CompletedProcess[str]:
    """``exchange ARGS`` in ``project``: forked from ``zygote`` if given, else ``python -m exchange._cli.main``."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    full_env.update(env or {})
    if zygote is not None:
        return zygote.run(args, cwd=project, env=full_env, timeout=60)
    return subprocess.run(
        [sys.executable, "-m", "exchange._cli.main", *args],
        cwd=project, env=full_env, capture_output=True, text=True, timeout=60,
    )


def test_run_prints_progress_and_the_result_on_the_last_line(project: Path) -> None:
    done = exchange(project, "run", "cli.double_it", "-p", "n=21", "-p", "label=abc")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"label": "abc", "value": 42}
    assert "doubling 21" in done.stderr and "cli.double" in done.stderr


def test_run_json_show_json_and_runs(project: Path, exchange_zygote: ForkServer) -> None:
    done = exchange(project, "run", "cli.double_it", "-p", "n=2", "--json", zygote=exchange_zygote)
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["status"] == "SUCCESS" and view["result"]["value"] == 4
    shown = json.loads(exchange(project, "show", view["id"], "--json", zygote=exchange_zygote).stdout)
    for key in ("id", "workflow", "status", "state", "progress", "params", "result", "error", "steps"):
        assert key in shown
    (step,) = shown["steps"]
    assert {"seq", "name", "status", "attempts", "output", "error", "started_at", "finished_at"} <= set(step)
    assert step["output"] == 4
    listed = json.loads(exchange(project, "runs", "--json", zygote=exchange_zygote).stdout)
    assert [run["id"] for run in listed] == [view["id"]]
    human = exchange(project, "show", view["id"], zygote=exchange_zygote)
    assert "cli.double_it" in human.stdout and "SUCCESS" in human.stdout


def test_a_failing_run_exits_non_zero_with_the_error_on_stderr(project: Path) -> None:
    done = exchange(project, "run", "cli.fails")
    assert done.returncode == 1
    assert "ValueError: the recipe is empty" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (("run", "no.such.workflow"), {}, "unknown workflow 'no.such.workflow'"),
        (("run", "cli.double_it", "-p", "m=1"), {}, "parameter 'm' is unknown (the workflow takes n, label)"),
        (("show", "0000-missing"), {}, "unknown run '0000-missing'"),
        (("send", "0000-missing", "HOLD"), {}, "unknown run '0000-missing'"),
        (("cancel", "0000-missing"), {}, "unknown run '0000-missing'"),
        (("runs",), {"EXCHANGE_STORE_URL": "postgresql+psycopg://u:pw@127.0.0.1:1/x"}, "store postgresql"),
        (("--config", "missing.toml", "runs"), {}, "config file missing.toml does not exist"),
    ],
)
def test_bad_input_gets_one_line_naming_the_thing(
    project: Path, args: tuple[str, ...], env: dict[str, str], expected: str, exchange_zygote: ForkServer
) -> None:
    Store(f"sqlite:///{project / 'var' / 'exchange.db'}").close()  # read commands refuse a missing store
    done = exchange(project, *args, env=env, zygote=exchange_zygote)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "pw@" not in done.stderr  # passwords stay out of messages


def test_workflows_lists_the_apps_without_opening_or_creating_a_store(project: Path) -> None:
    done = exchange(project, "workflows", env={"EXCHANGE_STORE_URL": "postgresql+psycopg://u:pw@127.0.0.1:1/x"})
    assert done.returncode == 0, done.stderr
    assert "cli.double_it(" in done.stdout
    done = exchange(project, "workflows")
    assert done.returncode == 0 and "cli.double_it(" in done.stdout
    assert not (project / "var").exists()  # no store was created by a listing


def test_an_unknown_command_name_is_refused(project: Path) -> None:
    view = json.loads(exchange(project, "run", "cli.double_it", "--json").stdout)
    done = exchange(project, "send", view["id"], "LAUNCH")
    assert done.returncode == 1 and "unknown command 'LAUNCH'" in done.stderr


def test_a_missing_config_variable_is_named(project: Path, exchange_zygote: ForkServer) -> None:
    (project / "exchange.toml").write_text('[store]\nurl = "${EXCHANGE_TEST_DB_URL}"\n')
    done = exchange(project, "runs", zygote=exchange_zygote)
    assert done.returncode == 1
    assert "${EXCHANGE_TEST_DB_URL} is not set" in done.stderr and "store.url" in done.stderr


def test_a_duplicate_workflow_name_names_both_modules(project: Path, exchange_zygote: ForkServer) -> None:
    (project / "apps" / "other.py").write_text(APP)
    done = exchange(project, "workflows", zygote=exchange_zygote)
    assert done.returncode == 1
    assert "apps.cli_app" in done.stderr and "apps.other" in done.stderr


def test_workflows_lists_names_and_parameters(project: Path, exchange_zygote: ForkServer) -> None:
    items = json.loads(exchange(project, "workflows", "--json", zygote=exchange_zygote).stdout)
    by_name = {item["name"]: item for item in items}
    assert by_name["cli.double_it"]["parameters"] == ["n", "label"]


def test_start_enqueues_for_a_gateway_and_nothing_is_lost_on_bad_input(project: Path) -> None:
    run_id = exchange(project, "start", "cli.double_it", "-p", "n=5").stdout.strip()
    assert json.loads(exchange(project, "show", run_id, "--json").stdout)["status"] == "ENQUEUED"
    assert exchange(project, "start", "cli.double_it", "-p", "bad=1").returncode == 1
    listed = json.loads(exchange(project, "runs", "--json").stdout)
    assert [run["id"] for run in listed] == [run_id]


@pytest.mark.parametrize(
    ("tables", "expected"),
    [
        ('[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\n[tags."[p]Tank/Level"]\ndevice = "plc"\n'
         'address = "HRX7"\n', "HRX7"),
        ('[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\nspeed = 9\n', "devices.plc"),
        ('[databases.mes]\nurl = "nosuchdb://x"\n', "mes"),
    ],
)
def test_the_gateway_refuses_a_bad_device_tag_or_database_at_start(
    project: Path, tables: str, expected: str, exchange_zygote: ForkServer
) -> None:
    with (project / "exchange.toml").open("a") as config:
        config.write(tables)
    done = exchange(project, "gateway", zygote=exchange_zygote)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
