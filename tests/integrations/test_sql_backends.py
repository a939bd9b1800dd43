"""SqlConnections against real databases: a SQLite file, PostgreSQL (psycopg) and PostgreSQL through
the psqlODBC driver (pyodbc). Every behaviour here must hold on all three."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import quote_plus

import pytest

from exchange._config import DatabaseConfig
from exchange._integrations.sql import SqlConnections, UnknownDatabase
from exchange.errors import DatabaseError, FatalError, RetryableError
from tests.conftest import PostgresServer

_tables = itertools.count()

HOSTILE = "O'Brien; DROP TABLE x; --"
TRICKY = "what? :name %s %(x)s \\' \" -- /* $$"


@dataclass
class Backend:
    kind: str  # sqlite | postgresql | odbc
    conns: SqlConnections

    def types(self) -> dict[str, str]:
        if self.kind == "sqlite":
            return {"id": "INTEGER PRIMARY KEY AUTOINCREMENT", "blob": "BLOB", "bool": "BOOLEAN"}
        return {"id": "SERIAL PRIMARY KEY", "blob": "BYTEA", "bool": "BOOLEAN"}

    def table(self, columns: str = "") -> str:
        """Create a fresh table ``(id, name TEXT UNIQUE[, columns])`` and return its name."""
        name = f"t{next(_tables)}"
        extra = f", {columns}" if columns else ""
        self.conns.update("mes", f"CREATE TABLE {name} (id {self.types()['id']}, name TEXT UNIQUE{extra})")
        return name

    def count(self, table: str) -> int:
        return int(self.conns.query("mes", f"SELECT COUNT(*) AS n FROM {table}")[0]["n"])


def _odbc_url(postgres: PostgresServer, database: str) -> str:
    conn_str = (
        f"Driver={{PostgreSQL Unicode}};Server={postgres.socket_dir};Port={postgres.port};"
        f"Database={database};Uid=postgres;BoolsAsChar=0;"
    )
    return f"postgresql+pyodbc:///?odbc_connect={quote_plus(conn_str)}"


@pytest.fixture(scope="module", params=["sqlite", "postgresql", "odbc"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    kind = request.param
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('mes') / 'mes.db'}"
    else:
        postgres: PostgresServer = request.getfixturevalue("postgres")
        database = postgres.create_database("mes")
        url = postgres.url(database) if kind == "postgresql" else _odbc_url(postgres, database)
    conns = SqlConnections({"mes": DatabaseConfig("mes", url, {"connect_timeout_seconds": 3})})
    yield Backend(kind, conns)
    conns.close()


def test_hostile_values_are_stored_verbatim_and_nothing_else_runs(backend: Backend) -> None:
    table = backend.table()
    assert backend.conns.update("mes", f"INSERT INTO {table} (name) VALUES (?)", [HOSTILE]) == 1
    assert backend.conns.update("mes", f"INSERT INTO {table} (name) VALUES (:n)", {"n": TRICKY}) == 1
    rows = backend.conns.query(
        "mes", f"SELECT name FROM {table} WHERE name = ? OR name = ? ORDER BY id", [HOSTILE, TRICKY]
    )
    assert [r["name"] for r in rows] == [HOSTILE, TRICKY]
    assert backend.count(table) == 2  # the table is still there, with exactly our rows


def test_question_marks_in_literals_identifiers_and_comments_are_not_placeholders(backend: Backend) -> None:
    rows = backend.conns.query(
        "mes",
        "SELECT 'a?b' AS lit, ? AS v, 'it''s ?' AS quoted /* ? */ -- ?\n, ? AS \"what?\"",
        ["x", "y"],
    )
    assert rows == [{"lit": "a?b", "v": "x", "quoted": "it's ?", "what?": "y"}]


def test_null_dates_decimals_bytes_and_booleans_round_trip(backend: Backend) -> None:
    table = backend.table(
        "qty NUMERIC(12,4), made TIMESTAMP, day DATE, data " + backend.types()["blob"] + ", ok BOOLEAN"
    )
    made = dt.datetime(2024, 5, 1, 6, 30, 15, 250000)
    backend.conns.update(
        "mes",
        f"INSERT INTO {table} (name, qty, made, day, data, ok) VALUES (?, ?, ?, ?, ?, ?)",
        ["full", Decimal("12.3400"), made, dt.date(2024, 5, 2), b"\x00\x01\xfe\xff", True],
    )
    backend.conns.update(
        "mes",
        f"INSERT INTO {table} (name, qty, made, day, data, ok) VALUES (?, ?, ?, ?, ?, ?)",
        ["nulls", None, None, None, None, None],
    )
    full, nulls = backend.conns.query("mes", f"SELECT name, qty, made, day, data, ok FROM {table} ORDER BY id")
    assert nulls == {"name": "nulls", "qty": None, "made": None, "day": None, "data": None, "ok": None}
    assert full["qty"] == 12.34
    assert full["data"] == "AAH+/w=="  # base64 of the four bytes
    assert full["day"] == "2024-05-02"
    if backend.kind == "sqlite":  # SQLite keeps the text it was given (ISO, space separator) and 0/1
        assert full["made"] == "2024-05-01 06:30:15.250000"
        assert full["ok"] == 1
    else:
        assert full["made"] == "2024-05-01T06:30:15.250000"
        assert full["ok"] is True
    # and the stored values compare equal to the originals on the database side
    match = backend.conns.query(
        "mes", f"SELECT name FROM {table} WHERE made = ? AND qty = ?", [made, Decimal("12.34")]
    )
    assert match == [{"name": "full"}]


def test_named_and_positional_args_find_the_same_rows(backend: Backend) -> None:
    table = backend.table("qty INTEGER")
    backend.conns.transaction(
        "mes", [(f"INSERT INTO {table} (name, qty) VALUES (?, ?)", [f"n{i}", i]) for i in range(5)]
    )
    by_list = backend.conns.query("mes", f"SELECT name FROM {table} WHERE qty >= ? AND qty < ? ORDER BY qty", [1, 3])
    by_dict = backend.conns.query(
        "mes", f"SELECT name FROM {table} WHERE qty >= :lo AND qty < :hi ORDER BY qty", {"lo": 1, "hi": 3}
    )
    assert by_list == by_dict == [{"name": "n1"}, {"name": "n2"}]


def test_update_returns_affected_rows(backend: Backend) -> None:
    table = backend.table("qty INTEGER")
    for i in range(3):
        backend.conns.update("mes", f"INSERT INTO {table} (name, qty) VALUES (?, ?)", [f"r{i}", i])
    assert backend.conns.update("mes", f"UPDATE {table} SET qty = qty + 10 WHERE qty >= ?", [1]) == 2
    assert backend.conns.update("mes", f"DELETE FROM {table} WHERE name = ?", ["absent"]) == 0


def test_get_key_returns_the_generated_id(backend: Backend) -> None:
    table = backend.table()
    first = backend.conns.update("mes", f"INSERT INTO {table} (name) VALUES (?)", ["a"], get_key=True)
    second = backend.conns.update(
        "mes", f"INSERT INTO {table} (name) VALUES (?); -- trailing note", ["b"], get_key=True
    )
    assert isinstance(first, int) and second == first + 1
    rows = backend.conns.query("mes", f"SELECT id, name FROM {table} ORDER BY id")
    assert rows == [{"id": first, "name": "a"}, {"id": second, "name": "b"}]
    # not an INSERT: no key
    assert backend.conns.update("mes", f"UPDATE {table} SET name = ? WHERE id = ?", ["c", first], get_key=True) is None


def test_get_key_with_own_returning_clause(backend: Backend) -> None:
    table = backend.table()
    assert (
        backend.conns.update("mes", f"INSERT INTO {table} (name) VALUES (?) RETURNING name", ["z"], get_key=True)
        == "z"
    )


def test_upsert_that_inserts_nothing_has_no_key(backend: Backend) -> None:
    table = backend.table()
    sql = f"INSERT INTO {table} (name) VALUES (?) ON CONFLICT (name) DO NOTHING"
    assert isinstance(backend.conns.update("mes", sql, ["once"], get_key=True), int)
    assert backend.conns.update("mes", sql, ["once"], get_key=True) is None
    assert backend.count(table) == 1


def test_unknown_connection_name_lists_the_configured_ones(backend: Backend) -> None:
    with pytest.raises(UnknownDatabase) as info:
        backend.conns.query("mse", "SELECT 1")
    assert isinstance(info.value, FatalError)
    assert "'mse'" in str(info.value) and "configured: mes" in str(info.value)


def test_sql_error_carries_connection_name_and_database_message(backend: Backend) -> None:
    with pytest.raises(DatabaseError) as info:
        backend.conns.query("mes", "SELECT * FROM no_such_table WHERE a = ?", ["secret-value"])
    text = str(info.value)
    assert not isinstance(info.value, RetryableError)
    assert text.startswith("database 'mes': ")
    assert "no_such_table" in text
    expected = "no such table" if backend.kind == "sqlite" else "does not exist"
    assert expected in text
    assert "secret-value" not in text  # bound values never reach messages
    assert "\n" not in text


def test_constraint_violation_is_a_database_error(backend: Backend) -> None:
    table = backend.table()
    backend.conns.update("mes", f"INSERT INTO {table} (name) VALUES (?)", ["dup"])
    with pytest.raises(DatabaseError) as info:
        backend.conns.update("mes", f"INSERT INTO {table} (name) VALUES (?)", ["dup"])
    assert "unique" in str(info.value).lower()
    if backend.kind != "sqlite":
        assert "SQLSTATE 23505" in str(info.value)


def test_transaction_commits_all_statements_and_returns_each_result(backend: Backend) -> None:
    table = backend.table("qty INTEGER")
    results = backend.conns.transaction(
        "mes",
        [
            (f"INSERT INTO {table} (name, qty) VALUES (?, ?)", ["a", 1]),
            (f"INSERT INTO {table} (name, qty) VALUES (:n, :q)", {"n": "b", "q": 2}),
            f"UPDATE {table} SET qty = qty * 10",
            (f"SELECT name, qty FROM {table} ORDER BY name",),
        ],
    )
    assert results == [1, 1, 2, [{"name": "a", "qty": 10}, {"name": "b", "qty": 20}]]


def test_transaction_is_all_or_nothing(backend: Backend) -> None:
    table = backend.table()
    backend.conns.update("mes", f"INSERT INTO {table} (name) VALUES (?)", ["before"])
    with pytest.raises(DatabaseError) as info:
        backend.conns.transaction(
            "mes",
            [
                (f"INSERT INTO {table} (name) VALUES (?)", ["new1"]),
                (f"UPDATE {table} SET name = ? WHERE name = ?", ["renamed", "before"]),
                (f"INSERT INTO {table} (name) VALUES (?)", ["new1"]),  # duplicate: fails
            ],
        )
    assert "statement 3 of 3" in str(info.value)
    assert backend.conns.query("mes", f"SELECT name FROM {table}") == [{"name": "before"}]


def test_transaction_rolls_back_ddl_too(backend: Backend) -> None:
    name = f"t{next(_tables)}"
    with pytest.raises(DatabaseError):
        backend.conns.transaction("mes", [f"CREATE TABLE {name} (a INTEGER)", f"INSERT INTO {name} VALUES (?)"])
    # the CREATE was rolled back with the failing INSERT (wrong number of args)
    with pytest.raises(DatabaseError):
        backend.conns.query("mes", f"SELECT * FROM {name}")


def test_placeholder_mismatch_is_a_clear_fatal_error(backend: Backend) -> None:
    with pytest.raises(DatabaseError) as info:
        backend.conns.query("mes", "SELECT ? AS a, ? AS b", [1])
    assert "database 'mes'" in str(info.value) and "2 ? placeholder(s) but 1 arg(s)" in str(info.value)


def test_duplicate_column_names_are_refused(backend: Backend) -> None:
    with pytest.raises(DatabaseError, match="duplicate column name"):
        backend.conns.query("mes", "SELECT 1 AS a, 2 AS a")


def test_many_threads_share_the_pool(backend: Backend) -> None:
    table = backend.table("worker INTEGER")
    errors: list[Exception] = []

    def work(worker: int) -> None:
        try:
            for i in range(5):
                backend.conns.update(
                    "mes", f"INSERT INTO {table} (name, worker) VALUES (?, ?)", [f"{worker}-{i}", worker]
                )
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert backend.count(table) == 40


def test_query_results_are_json_safe(backend: Backend) -> None:
    import json

    rows = backend.conns.query(
        "mes", "SELECT CAST(? AS NUMERIC(10,3)) AS d, CAST(? AS TEXT) AS t, ? AS n", [Decimal("1.500"), "x", None]
    )
    json.dumps(rows, allow_nan=False)  # a step output must serialise
    assert rows == [{"d": 1.5, "t": "x", "n": None}]


def test_close_then_use_reopens(backend: Backend) -> None:
    backend.conns.close()
    assert backend.conns.query("mes", "SELECT 1 AS one") == [{"one": 1}]


def test_get_key_with_a_column_named_like_a_keyword(backend: Backend) -> None:
    table = backend.table("output TEXT")
    key = backend.conns.update("mes", f"INSERT INTO {table} (name, output) VALUES (?, ?)", ["k", "o"], get_key=True)
    assert backend.conns.query("mes", f"SELECT name FROM {table} WHERE id = ?", [key]) == [{"name": "k"}]
