"""The pyodbc path through a real ODBC driver (unixODBC + psqlODBC against our PostgreSQL).

Needs the Debian packages ``unixodbc`` and ``odbc-postgresql`` (see README). The SQL Server specific
part, SCOPE_IDENTITY() in the INSERT's batch, is exercised with a PostgreSQL function standing in for
SQL Server's built-in, so the batch/next-result-set mechanics run through a real driver.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyodbc
import pytest

from exchange._config import DatabaseConfig
from exchange._integrations.sql import SqlConnections
from exchange._integrations.sql_engine import DatabaseSettings, build_engine, key_strategy
from exchange.errors import DatabaseError
from tests.integrations.pg_control import ControlledPostgres


@pytest.fixture
def odbc(running_postgres: ControlledPostgres) -> Iterator[SqlConnections]:
    database = running_postgres.create_database("odbc")
    conns = SqlConnections(
        {
            "url_form": DatabaseConfig(
                "url_form", running_postgres.odbc_url(database), {"statement_timeout_ms": 300}
            ),
            "raw_form": DatabaseConfig(
                "raw_form", running_postgres.odbc_connect_url(database), {"get_key": "scope_identity"}
            ),
        }
    )
    yield conns
    conns.close()


def test_the_postgres_odbc_driver_is_installed() -> None:
    assert "PostgreSQL Unicode" in pyodbc.drivers()


def test_both_url_forms_reach_the_database_through_pyodbc(odbc: SqlConnections) -> None:
    for name in ("url_form", "raw_form"):
        assert odbc.engine(name).dialect.driver == "pyodbc"
        row = odbc.query(name, "SELECT current_database() AS db, ? AS echoed, '?' AS literal", ["it's"])[0]
        assert row["db"].startswith("odbc_") and row["echoed"] == "it's" and row["literal"] == "?"


def test_scope_identity_strategy_reads_the_key_from_the_same_batch(odbc: SqlConnections) -> None:
    odbc.transaction(
        "raw_form",
        [
            "CREATE TABLE lots (id SERIAL PRIMARY KEY, code TEXT)",
            # SQL Server's SCOPE_IDENTITY() played by PostgreSQL's lastval()
            "CREATE FUNCTION scope_identity() RETURNS bigint AS 'SELECT lastval()' LANGUAGE sql",
        ],
    )
    first = odbc.update("raw_form", "INSERT INTO lots (code) VALUES (?)", ["L1"], get_key=True)
    second = odbc.update("raw_form", "INSERT INTO lots (code) VALUES (?);", ["L2"], get_key=True)
    assert (first, second) == (1, 2)
    # the INSERTs were committed, not left in the raw cursor's transaction
    assert odbc.query("url_form", "SELECT id, code FROM lots ORDER BY id") == [
        {"id": 1, "code": "L1"},
        {"id": 2, "code": "L2"},
    ]
    with pytest.raises(DatabaseError, match="database 'raw_form': .*lots"):
        odbc.update("raw_form", "INSERT INTO lots (nope) VALUES (?)", ["L3"], get_key=True)


def test_statement_timeout_applies_through_odbc(odbc: SqlConnections) -> None:
    with pytest.raises(DatabaseError, match="SQLSTATE 57014"):
        odbc.query("url_form", "SELECT pg_sleep(5)")
    assert odbc.query("url_form", "SELECT 1 AS one") == [{"one": 1}]


def test_documented_mssql_url_builds_the_odbc_connection_string() -> None:
    config = DatabaseConfig(
        "mes",
        "mssql+pyodbc://exchange:s3cret@sql01:1433/MES?driver=ODBC+Driver+18+for+SQL+Server&TrustServerCertificate=yes",
        {"connect_timeout_seconds": 7},
    )
    settings = DatabaseSettings.parse("mes", config.settings)
    engine = build_engine(config, settings)
    try:
        (conn_str,), _ = engine.dialect.create_connect_args(engine.url)
        assert conn_str.startswith("DRIVER={ODBC Driver 18 for SQL Server};Server=sql01,1433;Database=MES;")
        assert "UID=exchange;PWD=s3cret" in conn_str and "TrustServerCertificate=yes" in conn_str
        assert engine.pool._pre_ping
        assert key_strategy(settings, engine.dialect.name) == "scope_identity"
    finally:
        engine.dispose()
