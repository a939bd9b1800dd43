"""db.query / db.update / db.transaction as durable steps inside real runs."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exchange.errors import SqlArgumentError
from exchange.workflows.bootstrap import getWorkflows, workflow
from exchange.workflows.steps import db
from tests.conftest import free_port
from tests.integrations.pg_control import ControlledPostgres
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

CALLS: dict[str, int] = {}
_calls_lock = threading.Lock()


def _count(key: str) -> None:
    with _calls_lock:
        CALLS[key] = CALLS.get(key, 0) + 1


@workflow(name="dbsteps.record_batch")
def record_batch(code: str, qty: str) -> dict[str, Any]:
    key = db.update("mes", "INSERT INTO batches (code, qty) VALUES (?, ?)", [code, qty], getKey=True)
    rows = db.query("mes", "SELECT id, code, qty FROM batches WHERE id = :id", {"id": key})
    return {"key": key, "rows": rows}


@workflow(name="dbsteps.insert_then_wait")
def insert_then_wait(code: str) -> int:
    key = db.update("mes", "INSERT INTO batches (code, qty) VALUES (?, 1)", [code], getKey=True)
    getWorkflows().recv("go", timeoutSeconds=60)  # the engine restarts while the run waits here
    total = db.query("mes", "SELECT COUNT(*) AS n FROM batches WHERE code = ?", [code])
    return int(key) * 1000 + int(total[0]["n"])


@workflow(name="dbsteps.bad_sql")
def bad_sql() -> None:
    db.query("mes", "SELEC oops FROM batches")


@workflow(name="dbsteps.unknown_db")
def unknown_db() -> None:
    db.query("erp", "SELECT 1")


@workflow(name="dbsteps.atomic")
def atomic(codes: list[str]) -> list[Any]:
    return db.transaction("mes", [("INSERT INTO batches (code, qty) VALUES (?, 1)", [c]) for c in codes])


@workflow(name="dbsteps.big_read")
def big_read() -> int:
    return len(db.query("mes", "SELECT code FROM batches"))


@workflow(name="dbsteps.outage")
def outage(code: str) -> int:
    return int(db.update("pg", "INSERT INTO lots (code) VALUES (?)", [code]))


@workflow(name="dbsteps.query_with")
def query_with(db_name: str, sql: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """One query with this call's own step options (retry schedule, on_error)."""
    return db.query(db_name, sql, **options)


def _mes(tmp_path: Path, make_engine: Callable[..., StepEngine]) -> tuple[StepEngine, str]:
    path = tmp_path / "mes.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE batches (id INTEGER PRIMARY KEY AUTOINCREMENT, code TEXT UNIQUE, qty NUMERIC)")
    return make_engine(databases={"mes": {"url": f"sqlite:///{path}"}}), str(path)


def _rows(path: str, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute(sql))


def test_db_steps_are_recorded_with_their_outputs(tmp_path: Path, make_engine: Callable[..., StepEngine]) -> None:
    engine, path = _mes(tmp_path, make_engine)
    view = engine.run("dbsteps.record_batch", {"code": "O'Brien; DROP TABLE batches; --", "qty": "12.50"})
    assert view["status"] == "SUCCESS", view["error"]
    key = view["result"]["key"]
    assert view["result"]["rows"] == [{"id": key, "code": "O'Brien; DROP TABLE batches; --", "qty": 12.5}]
    steps = view["steps"]
    assert [(s["name"], s["status"], s["attempts"]) for s in steps] == [
        ("db.update", "SUCCESS", 1),
        ("db.query", "SUCCESS", 1),
    ]
    assert steps[0]["output"] == key and steps[1]["output"] == view["result"]["rows"]
    assert _rows(path, "SELECT code FROM batches") == [("O'Brien; DROP TABLE batches; --",)]


def test_recorded_db_steps_are_not_executed_again_on_replay(
    tmp_path: Path, make_engine: Callable[..., StepEngine]
) -> None:
    engine, path = _mes(tmp_path, make_engine)
    run_id = engine.runtime.start("dbsteps.insert_then_wait", {"code": "B-7"})
    wait_until(
        lambda: _rows(path, "SELECT COUNT(*) FROM batches WHERE code = 'B-7'") == [(1,)],
        10,
        message="the INSERT of the first execution",
    )
    wait_until(
        lambda: any(s["name"] == "db.update" for s in engine.runtime.get_run(run_id)["steps"]),
        10,
        message="the db.update step to be recorded",
    )
    recovered = engine.restart()  # the run is suspended in recv() and resumed by replay
    assert run_id in recovered
    engine.runtime.send(run_id, "go", True)
    view = engine.runtime.wait_for(run_id, 30)
    assert view["status"] == "SUCCESS", view["error"]
    # a plain INSERT re-executed would have failed on the UNIQUE code or added a second row
    assert _rows(path, "SELECT COUNT(*) FROM batches") == [(1,)]
    key = view["steps"][0]["output"]
    assert view["result"] == key * 1000 + 1
    assert view["steps"][0]["attempts"] == 1


def test_sql_error_fails_the_run_without_retries(tmp_path: Path, make_engine: Callable[..., StepEngine]) -> None:
    engine, _ = _mes(tmp_path, make_engine)
    view = engine.run("dbsteps.bad_sql")
    assert view["status"] == "ERROR"
    assert view["error"]["type"].endswith("DatabaseError")
    assert "database 'mes'" in view["error"]["message"] and "syntax error" in view["error"]["message"]
    (step,) = view["steps"]
    assert (step["name"], step["status"], step["attempts"]) == ("db.query", "ERROR", 1)


def test_unknown_connection_fails_the_run_naming_the_known_ones(
    tmp_path: Path, make_engine: Callable[..., StepEngine]
) -> None:
    engine, _ = _mes(tmp_path, make_engine)
    view = engine.run("dbsteps.unknown_db")
    assert view["status"] == "ERROR"
    assert view["error"]["type"].endswith("UnknownDatabase")
    assert "unknown database connection 'erp' (configured: mes)" in view["error"]["message"]
    assert view["steps"][0]["attempts"] == 1


def test_transaction_step_is_all_or_nothing(tmp_path: Path, make_engine: Callable[..., StepEngine]) -> None:
    engine, path = _mes(tmp_path, make_engine)
    assert engine.run("dbsteps.atomic", {"codes": ["a", "b"]})["result"] == [1, 1]
    view = engine.run("dbsteps.atomic", {"codes": ["c", "d", "a"]})  # "a" exists: UNIQUE violation
    assert view["status"] == "ERROR" and "statement 3 of 3" in view["error"]["message"]
    assert _rows(path, "SELECT code FROM batches ORDER BY code") == [("a",), ("b",)]
    assert view["steps"][0]["name"] == "db.transaction"


def test_database_down_during_the_run_is_retried_until_it_is_back(
    running_postgres: ControlledPostgres, make_engine: Callable[..., StepEngine]
) -> None:
    database = running_postgres.create_database("steps")
    running_postgres.psql("CREATE TABLE lots (id SERIAL PRIMARY KEY, code TEXT)", database)
    engine = make_engine(databases={"pg": {"url": running_postgres.tcp_url(database), "connect_timeout_seconds": 2}})
    assert engine.run("dbsteps.outage", {"code": "warm"})["status"] == "SUCCESS"  # the pool holds a connection

    running_postgres.stop()
    run_id = engine.runtime.start("dbsteps.outage", {"code": "L-1"})

    def retrying() -> bool:
        steps = engine.runtime.get_run(run_id)["steps"]
        return bool(steps) and steps[0]["status"] == "RETRYING"

    wait_until(retrying, 15, message="the db.update step to fail and wait for a retry")
    step = engine.runtime.get_run(run_id)["steps"][0]
    assert (
        "CommunicationError" in step["error"]["type"]
        and "database 'pg' cannot be reached" in step["error"]["message"]
    )
    running_postgres.start()
    view = engine.runtime.wait_for(run_id, 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == 1 and view["steps"][0]["attempts"] >= 2
    assert "L-1" in running_postgres.psql("SELECT code FROM lots", database)


def test_a_result_too_large_for_a_step_output_says_what_to_do(
    tmp_path: Path, make_engine: Callable[..., StepEngine]
) -> None:
    path = tmp_path / "mes.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE batches (code TEXT)")
        conn.executemany("INSERT INTO batches VALUES (?)", [(f"batch-{i:06d}",) for i in range(500)])
    engine = make_engine(databases={"mes": {"url": f"sqlite:///{path}"}}, engine={"step_output_max_bytes": 4096})
    view = engine.run("dbsteps.big_read")
    assert view["status"] == "ERROR"
    assert view["error"]["type"].endswith("OutputTooLarge")
    assert "store large data elsewhere" in view["error"]["message"]
    assert view["steps"][0]["attempts"] == 1


def test_a_call_sets_its_own_retry_schedule(tmp_path: Path, make_engine: Callable[..., StepEngine]) -> None:
    """A database nobody listens for: two attempts 0.05 s apart, not the default five over 15 s."""
    engine = make_engine(databases={"erp": {"url": f"postgresql://exchange@127.0.0.1:{free_port()}/erp",
                                            "connect_timeout_seconds": 2}})
    options = {"max_attempts": 2, "interval_seconds": 0.05}
    view = engine.run("dbsteps.query_with", {"db_name": "erp", "sql": "SELECT 1", "options": options}, timeout_s=10)
    assert view["status"] == "ERROR" and view["error"]["type"].endswith("CommunicationError")
    assert view["steps"][0]["attempts"] == 2


def test_a_call_with_on_error_hold_holds_and_resume_runs_it_again(
    tmp_path: Path, make_engine: Callable[..., StepEngine]
) -> None:
    engine, path = _mes(tmp_path, make_engine)
    rt = getWorkflows()
    run_id = rt.start("dbsteps.query_with", {"db_name": "mes", "sql": "SELECT code FROM lots",
                                             "options": {"on_error": "hold"}})
    view = wait_until(lambda: (v := rt.getRun(run_id))["held_on"] is not None and v, 20, message="the query held")
    assert view["held_on"]["step"] == "db.query" and "no such table: lots" in view["held_on"]["error"]["message"]
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE lots (code TEXT)")
        conn.execute("INSERT INTO lots VALUES ('L-7')")
    rt.sendCommand(run_id, "RESUME", "table created")
    view = rt.waitFor(run_id, 20)
    assert view["status"] == "SUCCESS", view["error"]
    assert view["result"] == [{"code": "L-7"}]


@pytest.mark.parametrize(("option", "value"), [("max_attempts", 0), ("backoff_rate", 0.9), ("on_error", "pause")])
def test_a_bad_step_option_is_refused_before_a_connection_is_opened(option: str, value: Any) -> None:
    with pytest.raises(SqlArgumentError) as refused:
        db.query("mes", "SELECT 1", **{option: value})
    assert str(refused.value).startswith(f"step db.query: {option} must be")
