"""The placeholder scanner: what becomes a bound parameter and what is left alone."""

from __future__ import annotations

import pytest

from exchange._integrations.sql_params import PlaceholderError, prepare


def test_qmarks_become_driver_placeholders_and_values_stay_out_of_the_text() -> None:
    hostile = "O'Brien; DROP TABLE x; --"
    p = prepare("SELECT * FROM t WHERE a = ? AND b = ?", [hostile, 2], "postgresql", "pyformat")
    assert p.sql == "SELECT * FROM t WHERE a = %s AND b = %s"
    assert p.params == (hostile, 2)
    assert hostile not in p.sql


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 'a?b', ?", "SELECT 'a?b', %s"),
        ("SELECT 'it''s?', ?", "SELECT 'it''s?', %s"),
        ('SELECT ? AS "what?"', 'SELECT %s AS "what?"'),
        ("SELECT ? -- really?\n", "SELECT %s -- really?\n"),
        ("SELECT /* ? /* nested ? */ still ? */ ?", "SELECT /* ? /* nested ? */ still ? */ %s"),
        ("SELECT $$ a ? $$, $fn$ ? $$ ? $fn$, ?", "SELECT $$ a ? $$, $fn$ ? $$ ? $fn$, %s"),
        ("SELECT E'\\' ?', ?", "SELECT E'\\' ?', %s"),
        ("SELECT ?::int", "SELECT %s::int"),
        ("SELECT '100%', ?", "SELECT '100%%', %s"),
    ],
)
def test_postgres_literals_comments_and_casts_are_left_alone(sql: str, expected: str) -> None:
    p = prepare(sql, ["v"], "postgresql", "pyformat")
    assert p.sql == expected
    assert p.params == ("v",)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT [a?b], ?", "SELECT [a?b], ?"),
        ("SELECT `a?`, ?", "SELECT `a?`, ?"),
        ("SELECT '?', ? /* ? */", "SELECT '?', ? /* ? */"),
    ],
)
def test_sqlite_bracket_and_backtick_identifiers_are_left_alone(sql: str, expected: str) -> None:
    p = prepare(sql, ["v"], "sqlite", "qmark")
    assert p.sql == expected
    assert p.params == ("v",)


def test_standard_string_backslash_does_not_escape_the_quote_in_postgres() -> None:
    # In a standard string 'a\' the backslash is an ordinary character and the literal ends there.
    p = prepare("SELECT 'a\\', ?", ["v"], "postgresql", "pyformat")
    assert p.sql == "SELECT 'a\\', %s"


def test_named_placeholders_bind_by_name_and_repeat() -> None:
    p = prepare(
        "SELECT :a, ':b', :a::text, x::int FROM t WHERE c = :c", {"a": 1, "c": "z", "b": 0}, "postgresql", "pyformat"
    )
    assert p.sql == "SELECT %s, ':b', %s::text, x::int FROM t WHERE c = %s"
    assert p.params == (1, 1, "z")


@pytest.mark.parametrize(
    ("paramstyle", "sql", "params"),
    [
        ("qmark", "SELECT ?, ?", ("x", "y")),
        ("format", "SELECT %s, %s", ("x", "y")),
        ("named", "SELECT :p1, :p2", {"p1": "x", "p2": "y"}),
        ("numeric", "SELECT :1, :2", ("x", "y")),
        ("numeric_dollar", "SELECT $1, $2", ("x", "y")),
    ],
)
def test_every_driver_paramstyle(paramstyle: str, sql: str, params: object) -> None:
    p = prepare("SELECT ?, ?", ["x", "y"], "other", paramstyle)
    assert (p.sql, p.params) == (sql, params)


def test_jsonb_question_operator_survives_with_named_args() -> None:
    p = prepare("SELECT doc ? 'k' FROM t WHERE id = :id", {"id": 4}, "postgresql", "pyformat")
    assert p.sql == "SELECT doc ? 'k' FROM t WHERE id = %s"


@pytest.mark.parametrize(
    ("sql", "args", "message"),
    [
        ("SELECT ?, ?", [1], "2 ? placeholder(s) but 1 arg(s)"),
        ("SELECT ?", [1, 2], "1 ? placeholder(s) but 2 arg(s)"),
        ("SELECT '?'", [1], "0 ? placeholder(s) but 1 arg(s)"),
        ("SELECT :a, :b", {"a": 1}, "no value for :b"),
        ("SELECT :a", [1], "uses :a placeholders; pass args as a dict"),
        ("SELECT ?", {"a": 1}, "uses ? placeholders; pass args as a list"),
        ("SELECT 1", "oops", "args must be a list"),
        ("   ", None, "non-empty string"),
    ],
)
def test_mismatches_are_clear_errors(sql: str, args: object, message: str) -> None:
    with pytest.raises(PlaceholderError) as info:
        prepare(sql, args, "sqlite", "qmark")
    assert message in str(info.value)


def test_shape_of_insert_and_returning_ignores_literals_and_comments() -> None:
    p = prepare("/* RETURNING */ INSERT INTO t(a) VALUES ('returning') -- returning", None, "postgresql", "pyformat")
    assert p.is_insert()
    assert not p.has_keyword("RETURNING")
    q = prepare("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x RETURNING id", None, "postgresql", "pyformat")
    assert q.is_insert() and q.has_keyword("returning")
    assert not prepare("UPDATE t SET a = 'INSERT'", None, "postgresql", "pyformat").is_insert()
