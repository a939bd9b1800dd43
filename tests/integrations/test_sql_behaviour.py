"""Settings, timeouts, busy databases and the retry classification of SqlConnections."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from exchange._config import DatabaseConfig, config_from_dict
from exchange._engine.execution.retry import RetryPolicy
from exchange._integrations.sql import SqlConnections
from exchange.errors import CommunicationError, ConfigError, DatabaseError, FatalError, RetryableError
from exchange.workflows.steps.db import DB_STEP_OPTIONS
from tests.conftest import PostgresServer, free_port


def _one(url: str, **settings: object) -> SqlConnections:
    return SqlConnections({"mes": DatabaseConfig("mes", url, dict(settings))})


@pytest.fixture
def sqlite_file(tmp_path: Path) -> str:
    return str(tmp_path / "mes.db")


@pytest.fixture
def pg(postgres: PostgresServer) -> Iterator[SqlConnections]:
    conns = _one(postgres.url(postgres.create_database("beh")), statement_timeout_ms=300, decimal="string")
    yield conns
    conns.close()


def test_from_config_reads_databases_tables_and_env_secrets(tmp_path: Path) -> None:
    config = config_from_dict(
        {"databases": {"mes": {"url": "sqlite:///${MES_DB}", "pool_size": 2, "decimal": "string"}}},
        base_dir=tmp_path,
        env={"MES_DB": str(tmp_path / "from-env.db")},
    )
    conns = SqlConnections.from_config(config)
    try:
        assert conns.names() == ["mes"]
        conns.update("mes", "CREATE TABLE t (a NUMERIC)")
        assert (tmp_path / "from-env.db").exists()
        assert conns.engine("mes").pool.size() == 2  # type: ignore[attr-defined]
    finally:
        conns.close()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"pool_sise": 3}, "databases.mes: unknown setting(s) pool_sise"),
        ({"pool_size": 0}, "databases.mes.pool_size must be at least 1"),
        ({"pool_timeout_seconds": "10"}, "databases.mes.pool_timeout_seconds must be a non-negative number"),
        ({"statement_timeout_ms": 1.5}, "databases.mes.statement_timeout_ms must be an integer"),
        ({"decimal": "double"}, "databases.mes.decimal must be one of float, string"),
        ({"get_key": "magic"}, "databases.mes.get_key must be one of auto"),
    ],
)
def test_bad_settings_are_config_errors_naming_the_key(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _one("sqlite://", **settings)
    assert message in str(info.value)


def test_bad_url_is_a_config_error_and_unknown_driver_a_fatal_error() -> None:
    with pytest.raises(ConfigError, match="databases.mes.url is not a database URL"):
        _one("not a url")
    conns = _one("nosuchdb+nodriver://u:hunter2@127.0.0.1/x")
    with pytest.raises(DatabaseError) as info:
        conns.query("mes", "SELECT 1")
    assert "cannot use URL" in str(info.value) and "hunter2" not in str(info.value)


def test_decimal_string_mode_keeps_exact_text(pg: SqlConnections) -> None:
    rows = pg.query(
        "mes", "SELECT CAST(? AS NUMERIC(20,6)) AS d, 'NaN'::numeric AS nan", [Decimal("1234567890.123456")]
    )
    assert rows == [{"d": "1234567890.123456", "nan": "NaN"}]


def test_postgres_values_beyond_the_basics_are_json_safe(pg: SqlConnections) -> None:
    rows = pg.query(
        "mes",
        "SELECT '{\"a\": [1, 2.5]}'::jsonb AS doc, ARRAY[1,2] AS arr, interval '1 hour 30 minutes' AS span,"
        " '6f1c2a57-3d0e-4b8e-9a43-2f7d5c1e8b90'::uuid AS id, TIMESTAMPTZ '2024-05-01 06:30:00+02' AS at,"
        " 'Infinity'::float8 AS inf, '127.0.0.1'::inet AS ip, TIME '06:30:00' AS t",
    )
    row = rows[0]
    assert row["doc"] == {"a": [1, 2.5]}
    assert row["arr"] == [1, 2]
    assert row["span"] == 5400.0
    assert row["id"] == "6f1c2a57-3d0e-4b8e-9a43-2f7d5c1e8b90"
    assert row["at"].endswith("+00:00") and row["at"].startswith("2024-05-01T04:30:00")
    assert row["inf"] == "Infinity"
    assert row["ip"] == "127.0.0.1"
    assert row["t"] == "06:30:00"


def test_statement_timeout_is_a_fatal_database_error(pg: SqlConnections) -> None:
    with pytest.raises(DatabaseError) as info:
        pg.query("mes", "SELECT pg_sleep(5)")
    assert "SQLSTATE 57014" in str(info.value) and "statement timeout" in str(info.value)
    assert pg.query("mes", "SELECT 1 AS ok") == [{"ok": 1}]  # the connection is still usable


def test_sqlite_busy_is_retryable_not_fatal(sqlite_file: str) -> None:
    conns = _one(f"sqlite:///{sqlite_file}", busy_timeout_ms=100)
    conns.update("mes", "CREATE TABLE t (a INTEGER)")
    holder = sqlite3.connect(sqlite_file, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        with pytest.raises(RetryableError) as info:
            conns.update("mes", "INSERT INTO t VALUES (?)", [1])
        assert not isinstance(info.value, FatalError)
        assert "database 'mes'" in str(info.value) and "locked" in str(info.value)
        holder.execute("ROLLBACK")
        assert conns.update("mes", "INSERT INTO t VALUES (?)", [1]) == 1
    finally:
        holder.close()
        conns.close()


def test_pool_exhausted_is_a_communication_error(sqlite_file: str) -> None:
    conns = _one(f"sqlite:///{sqlite_file}", pool_size=1, max_overflow=0, pool_timeout_seconds=0.2)
    try:
        held = conns.engine("mes").connect()
        with pytest.raises(CommunicationError, match="database 'mes' cannot be reached: no free connection"):
            conns.query("mes", "SELECT 1")
        held.close()
        assert conns.query("mes", "SELECT 1 AS one") == [{"one": 1}]
    finally:
        conns.close()


def test_unreachable_server_is_a_communication_error_naming_the_connection() -> None:
    conns = _one(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x", connect_timeout_seconds=2)
    with pytest.raises(CommunicationError) as info:
        conns.query("mes", "SELECT 1")
    assert str(info.value).startswith("database 'mes' cannot be reached: ")
    assert "refused" in str(info.value).lower()


def test_wrong_database_name_is_fatal_not_retried(postgres: PostgresServer) -> None:
    conns = _one(postgres.url("no_such_database"))
    with pytest.raises(DatabaseError, match='database "no_such_database" does not exist'):
        conns.query("mes", "SELECT 1")


def test_step_retry_policy_retries_communication_but_never_sql_errors() -> None:
    policy = RetryPolicy.from_options(DB_STEP_OPTIONS, "db.query")
    assert policy.delay_after(1, CommunicationError("database 'mes' cannot be reached")) == 1.0
    assert policy.delay_after(2, RetryableError("deadlock")) == 2.0
    assert policy.delay_after(1, DatabaseError("database 'mes': syntax error")) is None
    assert policy.delay_after(policy.max_attempts, CommunicationError("x")) is None
