"""Bad arguments of the db and http steps and the layers under them: refused with InvalidArgument
naming the parameter, before a database connection is opened (the table is unchanged, the pool never
connected) or a byte is sent (the real HTTP server received nothing), and never retried."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from exchange._config import DatabaseConfig
from exchange._engine.execution.retry import RetryPolicy
from exchange._integrations.http import HttpArgumentError, HttpClient, HttpRequestError
from exchange._integrations.sql import SqlArgumentError, SqlConnections, UnknownDatabase
from exchange.errors import ConfigError, DatabaseError, FatalError, InvalidArgument
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import db, http
from exchange.workflows.steps.db import DB_STEP_OPTIONS
from exchange.workflows.steps.http import HTTP_STEP_OPTIONS
from tests.integrations.fixtures import http_server, scripted_http_server  # noqa: F401  (fixtures)
from tests.integrations.http_server import Reply, ScriptedHttpServer
from tests.steps.conftest import StepEngine, make_engine  # noqa: F401  (make_engine: a fixture)

NAN, INF = math.nan, math.inf


# ----- http --------------------------------------------------------------------------------------------
@pytest.fixture
def client() -> Iterator[HttpClient]:
    session = HttpClient()
    yield session
    session.close()


def _url(server: ScriptedHttpServer) -> str:
    return server.url("/orders")


HTTP_CASES: list[Any] = [
    pytest.param({"method": "FETCH"}, "HTTP method 'FETCH'", id="method-unknown"),
    pytest.param({"method": None}, "HTTP method None", id="method-none"),
    pytest.param({"method": b"GET"}, "HTTP method b'GET'", id="method-bytes"),
    pytest.param({"url": "ftp://127.0.0.1/orders"}, "must start with http:// or https://", id="url-ftp"),
    pytest.param({"url": 42}, "url must be a string", id="url-int"),
    pytest.param({"url": "orders"}, "must start with http:// or https://", id="url-relative"),
    pytest.param({"url": "http:///orders"}, "has no host", id="url-no-host"),
    pytest.param({"url": "http://127.0.0.1:99999/orders"}, "is not a valid URL", id="url-port-out-of-range"),
    pytest.param({"url": "{base}\r\nX-Injected: 1"}, "url holds a space or control character", id="url-crlf"),
    pytest.param({"url": "http://[::1/orders"}, "is not a valid URL", id="url-broken-ipv6"),
    pytest.param({"headers": ["X-Trace", "a"]}, "headers must be a dict of strings", id="headers-list"),
    pytest.param({"headers": {"X-Count": 5}}, "header 'X-Count' must be a string", id="header-value-int"),
    pytest.param({"headers": {"X-Trace": "a\r\nX-Injected: 1"}}, "header 'X-Trace' holds a line break",
                 id="header-value-crlf"),
    pytest.param({"headers": {"X Trace": "a"}}, "is not a valid HTTP header name", id="header-name-space"),
    pytest.param({"headers": {"X-Unit": "\u20ac"}}, "Latin-1", id="header-value-not-latin1"),
    pytest.param({"params": {"filter": {"a": 1}}}, "params['filter'] must be a string or a number",
                 id="params-nested-dict"),
    pytest.param({"params": "a=b"}, "params must be a dict", id="params-str"),
    pytest.param({"params": {"x": NAN}}, "params['x'] must be finite", id="params-nan"),
    pytest.param({"json_body": {1, 2}}, "json_body is not JSON", id="json-set"),
    pytest.param({"json_body": {"kg": NAN}}, "json_body is not JSON", id="json-nan"),
    pytest.param({"json_body": {"at": object()}}, "json_body is not JSON", id="json-object"),
    pytest.param({"data": "a", "json_body": {}}, "pass data or json_body, not both", id="data-and-json"),
    pytest.param({"data": 12}, "data must be a dict", id="data-int"),
    pytest.param({"timeout_ms": NAN}, "timeout_ms must be positive", id="timeout-nan"),
    pytest.param({"timeout_ms": -1}, "timeout_ms must be positive", id="timeout-negative"),
    pytest.param({"timeout_ms": 0}, "timeout_ms must be positive", id="timeout-zero"),
    pytest.param({"timeout_ms": True}, "timeout_ms must be positive", id="timeout-bool"),
    pytest.param({"timeout_ms": "100"}, "timeout_ms must be positive", id="timeout-str"),
    pytest.param({"timeout_ms": INF}, "timeout_ms must be positive", id="timeout-inf"),
    pytest.param({"timeout_ms": 1e300}, "timeout_ms must be positive", id="timeout-1e300"),
    pytest.param({"idempotency_key": "k\r\nX: 1"}, "idempotency_key holds a line break", id="idempotency-key-crlf"),
]


def _request_args(server: ScriptedHttpServer, overrides: dict[str, Any]) -> dict[str, Any]:
    args: dict[str, Any] = {"method": "POST", "url": _url(server), "json_body": None}
    for key, value in overrides.items():
        args[key] = value.format(base=_url(server)) if isinstance(value, str) and "{base}" in value else value
    return args


@pytest.mark.parametrize(("overrides", "message"), HTTP_CASES)
def test_bad_http_arguments_are_refused_before_any_byte_is_sent(
    client: HttpClient, http_server: ScriptedHttpServer, overrides: dict[str, Any], message: str  # noqa: F811
) -> None:
    http_server.script("/orders", Reply(201, {"order": 1}))
    with pytest.raises(HttpArgumentError) as info:
        client.request(**_request_args(http_server, overrides))
    error = info.value
    assert isinstance(error, InvalidArgument) and isinstance(error, HttpRequestError)
    assert str(error).startswith("http.request: ") and message in str(error), str(error)
    assert len(str(error)) < 400
    assert RetryPolicy.from_options(HTTP_STEP_OPTIONS, "http.request").delay_after(1, error) is None
    assert http_server.requests == []


@workflow(name="badinput.http.call")
def http_call(method: str, url: str, timeout_ms: Any = 10000) -> Any:
    return http.request(method, url, json_body={"qty": 3}, timeout_ms=timeout_ms)


@pytest.mark.parametrize(
    ("method", "timeout_ms", "named"),
    [("FETCH", 1000, "HTTP method 'FETCH'"), ("POST", -5, "timeout_ms"), ("POST", "1s", "timeout_ms")],
)
def test_a_bad_http_step_in_a_run_is_one_attempt_and_no_request(
    make_engine: Callable[..., StepEngine], http_server: ScriptedHttpServer,  # noqa: F811
    method: str, timeout_ms: Any, named: str,
) -> None:
    engine = make_engine()
    http_server.script("/orders", Reply(201, {"order": 1}))
    view = engine.run("badinput.http.call", {"method": method, "url": _url(http_server), "timeout_ms": timeout_ms})
    assert view["status"] == "ERROR", view
    assert view["error"]["type"] == "HttpArgumentError" and named in view["error"]["message"]
    (step,) = view["steps"]
    assert (step["name"], step["status"], step["attempts"]) == ("http.request", "ERROR", 1)
    assert http_server.requests == []


def test_a_good_request_still_goes_through(
    client: HttpClient, http_server: ScriptedHttpServer  # noqa: F811
) -> None:
    http_server.script("/orders", Reply(201, {"order": 1}))
    answer = client.request("post", _url(http_server), headers={"X-Trace": "abc"}, params={"n": [1, 2]},
                            json_body={"kg": 1.5}, timeout_ms=5000)
    assert answer["status"] == 201 and len(http_server.requests) == 1


# ----- db ----------------------------------------------------------------------------------------------
@pytest.fixture
def mes(tmp_path: Path) -> Path:
    path = tmp_path / "mes.db"
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE batches (id INTEGER PRIMARY KEY AUTOINCREMENT, code TEXT UNIQUE, qty NUMERIC)")
        conn.execute("INSERT INTO batches (code, qty) VALUES ('B-1', 10)")
    return path


def _rows(path: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return list(conn.execute("SELECT * FROM batches ORDER BY id"))


INSERT = "INSERT INTO batches (code, qty) VALUES (?, ?)"

DB_CASES: list[Any] = [
    pytest.param("update", (42, INSERT, ["B-2", 1]), SqlArgumentError, ["db.update", "dbName", "configured: mes"],
                 id="dbname-int"),
    pytest.param("query", (None, "SELECT 1"), SqlArgumentError, ["db.query", "dbName", "configured: mes"],
                 id="dbname-none"),
    pytest.param("query", (["mes"], "SELECT 1"), SqlArgumentError, ["dbName"], id="dbname-list"),
    pytest.param("update", ("erp", INSERT, ["B-2", 1]), UnknownDatabase, ["'erp'", "configured: mes"],
                 id="dbname-unknown"),
    pytest.param("update", ("mes", 42), SqlArgumentError, ["database 'mes'", "SQL statement must be a non-empty"],
                 id="sql-int"),
    pytest.param("update", ("mes", "   "), SqlArgumentError, ["SQL statement must be a non-empty"], id="sql-blank"),
    pytest.param("update", ("mes", b"DELETE FROM batches"), SqlArgumentError, ["SQL statement"], id="sql-bytes"),
    pytest.param("update", ("mes", INSERT, "B-2"), SqlArgumentError, ["args must be a list"], id="args-str"),
    pytest.param("update", ("mes", INSERT, 5), SqlArgumentError, ["args must be a list"], id="args-int"),
    pytest.param("update", ("mes", INSERT, ["B-2"]), SqlArgumentError, ["2 ? placeholder(s) but 1 arg(s)"],
                 id="args-too-few"),
    pytest.param("update", ("mes", INSERT, {"code": "B-2"}), SqlArgumentError, ["pass args as a list"],
                 id="args-dict-for-qmarks"),
    pytest.param("update", ("mes", INSERT, ["B-2", {1, 2}]), SqlArgumentError, ["args[1]", "set"],
                 id="args-value-set"),
    pytest.param("update", ("mes", INSERT, ["B-2", 2**70]), SqlArgumentError, ["args[1]", "64 bits"],
                 id="args-value-int-overflow"),
    pytest.param("update", ("mes", INSERT, ["B-2", NAN]), SqlArgumentError, ["args[1]", "nan"], id="args-value-nan"),
    pytest.param("update", ("mes", INSERT, ["B-2", [1, 2]]), SqlArgumentError, ["args[1]", "list"],
                 id="args-value-list-on-sqlite"),
    pytest.param("update", ("mes", INSERT, ["B-\udcff", 1]), SqlArgumentError, ["args[0]", "UTF-8"],
                 id="args-value-surrogate"),
    pytest.param("update", ("mes", INSERT, ["B-2", 1], "yes"), SqlArgumentError, ["getKey", "'yes'"],
                 id="getkey-str"),
    pytest.param("transaction", ("mes", "DELETE FROM batches"), SqlArgumentError, ["statements must be a list"],
                 id="statements-str"),
    pytest.param("transaction", ("mes", [42]), SqlArgumentError, ["statement 1 must be sql or (sql, args)"],
                 id="statements-item-int"),
    pytest.param("transaction", ("mes", [(INSERT, ["B-2", 1]), (INSERT, ["B-3"])]), SqlArgumentError,
                 ["statement 2 of 2", "1 arg(s)"], id="statements-second-bad"),
    pytest.param("transaction", (None, [(INSERT, ["B-2", 1])]), SqlArgumentError, ["db.transaction", "dbName"],
                 id="transaction-dbname-none"),
]


@pytest.mark.parametrize(("operation", "args", "error", "fragments"), DB_CASES)
def test_bad_db_arguments_are_refused_before_a_connection_is_opened(
    mes: Path, operation: str, args: tuple[Any, ...], error: type[Exception], fragments: list[str]
) -> None:
    conns = SqlConnections({"mes": DatabaseConfig("mes", f"sqlite:///{mes}")})
    before = _rows(mes)
    try:
        with pytest.raises(error) as info:
            getattr(conns, operation)(*args)
        assert type(info.value) is error
        assert isinstance(info.value, InvalidArgument) and isinstance(info.value, DatabaseError)
        for fragment in fragments:
            assert fragment in str(info.value), str(info.value)
        assert "B-2" not in str(info.value)  # bound values never reach messages
        assert RetryPolicy.from_options(DB_STEP_OPTIONS, "db.update").delay_after(1, info.value) is None
        engines = conns._engines  # the pool of a connection that was refused never connected
        assert all(engine.pool.checkedin() == 0 and engine.pool.checkedout() == 0 for engine in engines.values())
    finally:
        conns.close()
    assert _rows(mes) == before


@workflow(name="badinput.db.update")
def db_update(name: Any, sql: Any, args: Any) -> Any:
    return db.update(name, sql, args)


@pytest.mark.parametrize(
    ("name", "sql", "args", "named"),
    [("mes", INSERT, ["B-2"], "1 arg(s)"), ("mes", 7, None, "SQL statement"), ("", INSERT, ["B-2", 1], "dbName")],
)
def test_a_bad_db_step_in_a_run_is_one_attempt_and_the_table_unchanged(
    mes: Path, make_engine: Callable[..., StepEngine],  # noqa: F811
    name: Any, sql: Any, args: Any, named: str,
) -> None:
    engine = make_engine(databases={"mes": {"url": f"sqlite:///{mes}"}})
    before = _rows(mes)
    view = engine.run("badinput.db.update", {"name": name, "sql": sql, "args": args})
    assert view["status"] == "ERROR", view
    assert view["error"]["type"] == "SqlArgumentError" and named in view["error"]["message"]
    (step,) = view["steps"]
    assert (step["name"], step["status"], step["attempts"]) == ("db.update", "ERROR", 1)
    assert _rows(mes) == before


@pytest.mark.parametrize(
    ("setting", "value"),
    [("pool_timeout_seconds", NAN), ("connect_timeout_seconds", INF), ("pool_recycle_seconds", -1.0),
     ("busy_timeout_ms", -5)],
)
def test_a_database_setting_that_is_not_finite_or_negative_is_a_config_error(setting: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"databases.mes.{setting} must be a non-negative number"):
        SqlConnections({"mes": DatabaseConfig("mes", "sqlite://", {setting: value})})


def test_good_values_still_bind(mes: Path) -> None:
    conns = SqlConnections({"mes": DatabaseConfig("mes", f"sqlite:///{mes}")})
    try:
        key = conns.update("mes", INSERT, ["B-2", Decimal("1.5")], get_key=True)
        assert conns.query("mes", "SELECT code FROM batches WHERE id = :id", {"id": key}) == [{"code": "B-2"}]
    finally:
        conns.close()
    assert isinstance(SqlArgumentError("x"), FatalError)
