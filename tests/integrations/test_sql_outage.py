"""A database that goes away and comes back: retryable errors while it is gone, success after,
with the same SqlConnections object (pre-ping drops dead pooled connections)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from exchange._config import DatabaseConfig
from exchange._integrations.sql import SqlConnections
from exchange.errors import CommunicationError, DatabaseError, StepError
from tests.integrations.pg_control import ControlledPostgres
from tests.waiting import wait_until


@pytest.fixture
def outage_db(running_postgres: ControlledPostgres) -> Iterator[tuple[ControlledPostgres, SqlConnections]]:
    database = running_postgres.create_database("outage")
    conns = SqlConnections(
        {
            "psycopg": DatabaseConfig("psycopg", running_postgres.tcp_url(database), {"connect_timeout_seconds": 2}),
            "odbc": DatabaseConfig("odbc", running_postgres.odbc_url(database), {"connect_timeout_seconds": 2}),
        }
    )
    yield running_postgres, conns
    conns.close()
    if not running_postgres.running:
        running_postgres.start()


@pytest.mark.parametrize("name", ["psycopg", "odbc"])
def test_database_stopped_then_back(outage_db: tuple[ControlledPostgres, SqlConnections], name: str) -> None:
    server, conns = outage_db
    conns.update(name, "CREATE TABLE IF NOT EXISTS batches (id SERIAL PRIMARY KEY, code TEXT)")
    assert conns.update(name, "INSERT INTO batches (code) VALUES (?)", ["before"]) == 1  # pool holds a connection

    server.stop()
    for _ in range(2):  # the pooled connection is dead and new ones are refused: every call says so
        with pytest.raises(CommunicationError) as info:
            conns.update(name, "INSERT INTO batches (code) VALUES (?)", ["during"])
        assert f"database {name!r} cannot be reached" in str(info.value)

    server.start()
    assert conns.update(name, "INSERT INTO batches (code) VALUES (?)", ["after"]) == 1
    rows = conns.query(name, "SELECT code FROM batches ORDER BY id")
    assert [r["code"] for r in rows] == ["before", "after"]


@pytest.mark.parametrize("name", ["psycopg", "odbc"])
def test_killed_session_is_replaced_by_pre_ping(
    outage_db: tuple[ControlledPostgres, SqlConnections], name: str
) -> None:
    server, conns = outage_db
    pid = conns.query(name, "SELECT pg_backend_pid() AS pid")[0]["pid"]
    server.psql(f"SELECT pg_terminate_backend({int(pid)}, 10000)")  # returns once it has ended
    # the next call pings the pooled connection, finds it dead, and opens a new one: no error at all
    new_pid = conns.query(name, "SELECT pg_backend_pid() AS pid")[0]["pid"]
    assert new_pid != pid


@pytest.mark.parametrize("name", ["psycopg", "odbc"])
def test_server_going_down_during_a_statement_is_retryable(
    outage_db: tuple[ControlledPostgres, SqlConnections], name: str
) -> None:
    server, conns = outage_db
    outcome: list[BaseException] = []

    def slow() -> None:
        try:
            conns.query(name, "SELECT pg_sleep(30) AS slept")
        except StepError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=slow)
    worker.start()
    wait_until(
        lambda: "pg_sleep(30)" in server.psql("SELECT query FROM pg_stat_activity WHERE state = 'active'"),
        10,
        message="the slow statement to be running",
    )
    server.stop()
    worker.join(20)
    assert len(outcome) == 1
    assert isinstance(outcome[0], CommunicationError), outcome[0]
    assert not isinstance(outcome[0], DatabaseError)
    server.start()
    assert conns.query(name, "SELECT 1 AS one") == [{"one": 1}]
