"""SQL text lives in the few modules allowed to hold it (docs/architecture.md, "which write path
when"): the store's hot-path statements and their runner, its per-database settings and locks, the group committer's
transaction control, the migrations' DDL and the node lock; and the integrations, which run the
users' own SQL on the users' own databases. Everything else writes SQLAlchemy Core or calls those."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ALLOWED = {
    # The hot path's statement builders, one per area (exchange._store.sql.statements gathers them).
    "exchange/_store/sql/statements.py",
    "exchange/_store/sql/run_statements.py",
    "exchange/_store/sql/step_statements.py",
    "exchange/_store/sql/event_statements.py",
    "exchange/_store/sql/mail_statements.py",
    "exchange/_store/sql/typed_sql.py",
    "exchange/_store/sql/backends.py",
    "exchange/_store/sql/commits.py",
    "exchange/_store/tables/schema.py",
    "exchange/_store/gateways/node_lock.py",
}
ALLOWED_FOLDERS = ("exchange/_integrations/",)

# The opening words of a statement (upper case, as the project writes SQL).
_SQL = re.compile(
    r"^\s*(SELECT\s|INSERT\s+INTO\s|UPDATE\s+\S+\s+SET\s|DELETE\s+FROM\s|WITH\s+\S+\s+AS\s*\(|PRAGMA\s|"
    r"LISTEN\s|NOTIFY\s|BEGIN\b|COMMIT\b|ROLLBACK\b|SAVEPOINT\s|LOCK\s+TABLE\s|ALTER\s+TABLE\s|"
    r"CREATE\s+(UNIQUE\s+)?(TABLE|INDEX)\s|DROP\s+(TABLE|INDEX)\s|SET\s+\w+\s*=)"
)
# Calls that send text to a database as it is.
_RAW_CALLS = {"exec_driver_sql", "text"}


def _docstrings(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def sql_places(source: str, name: str) -> list[str]:
    """``name:line: what`` for each SQL string or raw-SQL call in ``source``."""
    tree = ast.parse(source, filename=name)
    docstrings = _docstrings(tree)
    inside_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found: list[str] = []
    for node in ast.walk(tree):
        text: str | None = None
        if isinstance(node, ast.JoinedStr):
            text = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
                           if isinstance(part, (ast.Constant, ast.FormattedValue)))
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and id(node) not in inside_fstrings):
            text = node.value
        if text is not None and _SQL.match(text):
            found.append(f"{name}:{node.lineno}: SQL text {text[:50]!r}")
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in _RAW_CALLS and (called != "text" or _imports_sqlalchemy_text(tree)):
                found.append(f"{name}:{node.lineno}: {called}(...)")
    return found


def _imports_sqlalchemy_text(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sqlalchemy")
               and any(alias.name == "text" for alias in node.names) for node in ast.walk(tree))


def test_sql_text_stays_in_the_modules_allowed_to_hold_it() -> None:
    bad: list[str] = []
    for path in sorted((ROOT / "exchange").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name in ALLOWED or name.startswith(ALLOWED_FOLDERS):
            continue
        bad += sql_places(path.read_text(), name)
    assert bad == []


def test_the_allowed_modules_are_where_the_sql_is() -> None:
    """The list stays true: each allowed module still holds SQL (else it is dropped from the list)."""
    for name in ALLOWED:
        assert sql_places((ROOT / name).read_text(), name), f"{name} holds no SQL text any more"


def test_the_finder_finds_sql_in_its_forms() -> None:
    source = '''
"""SELECT in a docstring is prose."""
from sqlalchemy import text
q = "SELECT 1"
r = f"UPDATE {t} SET a = 1"
conn.exec_driver_sql(x)
conn.execute(text(y))
m = "select the runs"  # prose in lower case
'''
    found = sql_places(source, "m.py")
    assert [place.split(":")[1] for place in found] == ["4", "5", "6", "7"], found
