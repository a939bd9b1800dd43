"""Placeholders for application SQL: ``?`` with a list, ``:name`` with a dict, always bound.

A statement is scanned once, skipping everything a placeholder can never be part of: string literals
(``'it''s'``, PostgreSQL ``E'\\''`` and ``$tag$...$tag$``), quoted identifiers (``"a?"``, and on
SQLite/SQL Server ``[a?]`` and `` `a?` ``), ``-- line`` and ``/* block */`` comments, and PostgreSQL's
``::type`` casts. Placeholders found outside those are rewritten into the driver's own paramstyle
(qmark, format, pyformat, named, numeric, numeric_dollar) and their values passed separately, so no
value ever becomes SQL text.

Which style a statement uses follows from ``args``: a list or tuple means ``?``, a dict means
``:name``, None means the statement has no placeholders. With a list, a ``?`` outside literals is
always a placeholder (PostgreSQL's jsonb ``?`` operators need the ``:name`` style).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_IDENT_START = re.compile(r"[A-Za-z_]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


class PlaceholderError(ValueError):
    """The statement's placeholders do not match the arguments; the message says how."""


@dataclass(frozen=True)
class Prepared:
    """A statement ready for ``exec_driver_sql``: driver-style SQL, its parameters and its shape."""

    sql: str
    params: tuple[Any, ...] | dict[str, Any]
    code: str  # the original statement with literals and comments blanked out (same length)
    source: str  # the original statement

    def first_keyword(self) -> str:
        match = _WORD.search(self.code)
        return match.group(0).upper() if match else ""

    def has_keyword(self, word: str) -> bool:
        return re.search(rf"(?<![\w$]){word}(?![\w$])", self.code, re.IGNORECASE) is not None

    def is_insert(self) -> bool:
        first = self.first_keyword()
        return first in ("INSERT", "REPLACE") or (first == "WITH" and self.has_keyword("INSERT"))


def _skip_quoted(sql: str, start: int, close: str, backslash: bool = False) -> int:
    """Index just past the literal opened at ``start``; a doubled ``close`` is an escaped one."""
    i = start + 1
    n = len(sql)
    while i < n:
        ch = sql[i]
        if backslash and ch == "\\":
            i += 2
            continue
        if ch == close:
            if i + 1 < n and sql[i + 1] == close:
                i += 2
                continue
            return i + 1
        i += 1
    return n  # unterminated: the database will report it


def _skip_block_comment(sql: str, start: int, nested: bool) -> int:
    depth = 0
    i = start
    n = len(sql)
    while i < n:
        if sql.startswith("/*", i):
            depth = depth + 1 if nested or depth == 0 else depth
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _skip(sql: str, i: int, dialect: str) -> int:
    """If a literal, quoted identifier or comment starts at ``i``, the index past it, else ``i``."""
    ch = sql[i]
    prev = sql[i - 1] if i > 0 else " "
    if ch == "'":
        escaped = dialect == "postgresql" and prev in "eE" and (i < 2 or not sql[i - 2].isalnum())
        return _skip_quoted(sql, i, "'", backslash=escaped)
    if ch == '"':
        return _skip_quoted(sql, i, '"')
    if ch == "[" and dialect in ("mssql", "sqlite"):
        return _skip_quoted(sql, i, "]")
    if ch == "`" and dialect in ("sqlite", "mysql", "mariadb"):
        return _skip_quoted(sql, i, "`")
    if sql.startswith("--", i):
        end = sql.find("\n", i)
        return len(sql) if end < 0 else end
    if sql.startswith("/*", i):
        return _skip_block_comment(sql, i, nested=dialect in ("postgresql", "mssql"))
    if ch == "$" and dialect == "postgresql" and not (prev.isalnum() or prev in "_$"):
        match = _DOLLAR_TAG.match(sql, i)
        if match:
            end = sql.find(match.group(0), match.end())
            return len(sql) if end < 0 else end + len(match.group(0))
    return i


def _render(index: int, name: str, paramstyle: str) -> str:
    if paramstyle == "qmark":
        return "?"
    if paramstyle in ("format", "pyformat"):
        return "%s"
    if paramstyle == "named":
        return f":{name}"
    if paramstyle == "numeric":
        return f":{index}"
    if paramstyle == "numeric_dollar":
        return f"${index}"
    raise PlaceholderError(f"unsupported driver paramstyle {paramstyle!r}")


def prepare(sql: str, args: Any, dialect: str, paramstyle: str) -> Prepared:
    """Rewrite ``sql``'s placeholders for the driver; values go to ``params``, never into the text.

    ``dialect`` is SQLAlchemy's dialect name (postgresql, sqlite, mssql, ...), which decides which
    quoting rules apply. Raises :class:`PlaceholderError` when the placeholders and ``args`` do not
    match (count, missing name, wrong style).
    """
    if not isinstance(sql, str) or not sql.strip():
        raise PlaceholderError("the SQL statement must be a non-empty string")
    if args is None:
        mode = "none"
    elif isinstance(args, Mapping):
        mode = "named"
    elif isinstance(args, Sequence) and not isinstance(args, (str, bytes, bytearray)):
        mode = "positional"
    else:
        raise PlaceholderError(f"args must be a list (for ?) or a dict (for :name), got {type(args).__name__}")
    double_percent = paramstyle in ("format", "pyformat")
    out: list[str] = []
    code: list[str] = []
    values: list[Any] = []
    names: list[str] = []
    named_seen: list[str] = []
    qmarks = 0
    i = 0
    n = len(sql)

    def text(chunk: str) -> None:
        out.append(chunk.replace("%", "%%") if double_percent else chunk)

    def placeholder(value: Any, name: str) -> None:
        values.append(value)
        names.append(name)
        out.append(_render(len(values), name, paramstyle))

    while i < n:
        end = _skip(sql, i, dialect)
        if end > i:
            text(sql[i:end])
            code.append("".join(c if c == "\n" else " " for c in sql[i:end]))
            i = end
            continue
        ch = sql[i]
        if ch == ":" and sql.startswith("::", i):
            text("::")
            code.append("::")
            i += 2
            continue
        prev = sql[i - 1] if i > 0 else " "
        if ch == ":" and i + 1 < n and _IDENT_START.match(sql[i + 1]) and not (prev.isalnum() or prev == "_"):
            match = _NAME.match(sql, i + 1)
            assert match is not None
            name = match.group(0)
            named_seen.append(name)
            if mode == "named":
                assert isinstance(args, Mapping)
                if name not in args:
                    raise PlaceholderError(
                        f"no value for :{name} in args (given: {', '.join(sorted(map(str, args))) or 'none'})"
                    )
                placeholder(args[name], f"p{len(values) + 1}")
                code.append(" " * (match.end() - i))
                i = match.end()
                continue
        if ch == "?":
            qmarks += 1
            if mode == "positional":
                assert isinstance(args, Sequence)
                if qmarks <= len(args):
                    placeholder(args[qmarks - 1], f"p{qmarks}")
                code.append(" ")
                i += 1
                continue
        text(ch)
        code.append(ch)
        i += 1

    if mode == "positional":
        assert isinstance(args, Sequence)
        if qmarks == 0 and named_seen and args:
            raise PlaceholderError(f"the statement uses :{named_seen[0]} placeholders; pass args as a dict")
        if qmarks != len(args):
            raise PlaceholderError(f"the statement has {qmarks} ? placeholder(s) but {len(args)} arg(s) were given")
    elif mode == "named" and not named_seen and qmarks:
        raise PlaceholderError("the statement uses ? placeholders; pass args as a list")

    params: tuple[Any, ...] | dict[str, Any]
    if paramstyle == "named":
        params = dict(zip(names, values))
    else:
        params = tuple(values)
    return Prepared(sql="".join(out), params=params, code="".join(code), source=sql)
