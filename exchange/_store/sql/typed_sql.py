"""Statements with named parameters, run on a DBAPI cursor: the hot path's one SQL style.

A :class:`Statement` is written once with ``:name`` placeholders and spelled for the store's driver
(``:name`` for sqlite3, ``%(name)s`` for psycopg); it knows its parameters' names, and running it
with a missing or an unknown one raises ValueError naming both before anything is sent. Values go
to the driver as the mapping itself: nothing is reordered, and no positional order is left to a
comment.

A parameter written ``:name*`` is a list (``IN (:ids*)``): it is spelled with as many placeholders
as the values given, each count's spelling made once.

:class:`Cursor` is what the statements run on: a DBAPI cursor (sqlite3, psycopg), or the group
committer's pipelined cursor. Statement objects and their bound form :class:`Bound` are what the
store's hot path passes around instead of strings and tuples (see docs/architecture.md, "which
write path when").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from sqlalchemy import Connection

ParamStyle = Literal["named", "pyformat"]
Params = Mapping[str, object]

# ``:name`` not preceded by a colon or a word character (``::text`` is a cast, ``a:b`` no parameter).
_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)(\*?)")


class Cursor(Protocol):
    """The part of a DBAPI cursor the store's statements use."""

    def execute(self, sql: str, params: Any = ..., /) -> object: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Sequence[Any]: ...

    @property
    def rowcount(self) -> int: ...


class Statement:
    """One statement spelled for one driver; see the module docstring.

    ``fenced``: the statement carries a run's fence in itself (parameters ``fence_run``,
    ``fence_owner``, ``fence_generation``) and writes nothing, a row count of 0, when it does not
    hold: :meth:`~exchange._store.sql.database.Database.unit` then raises OwnershipLost.
    """

    __slots__ = ("name", "template", "style", "sql", "names", "lists", "fenced", "_spelled", "_list_order")

    def __init__(self, name: str, template: str, style: ParamStyle, *, fenced: bool = False) -> None:
        self.name = name
        self.template = " ".join(template.split())
        self.style = style
        self.fenced = fenced
        found = _PARAMETER.findall(self.template)
        self.lists = frozenset(n for n, star in found if star)
        self._list_order = tuple(sorted(self.lists))  # the order of a spelling's counts
        self.names = frozenset(n for n, _ in found)
        self._spelled: dict[tuple[int, ...], str] = {}
        self.sql = self._spell({}) if not self.lists else ""
        if fenced and not {"fence_run", "fence_owner", "fence_generation"} <= self.names:
            raise ValueError(f"statement {name}: a fenced statement needs the fence's parameters")

    def _spell(self, counts: Mapping[str, int]) -> str:
        escaped = self.template.replace("%", "%%") if self.style == "pyformat" else self.template

        def placeholder(match: re.Match[str]) -> str:
            name, star = match.group(1), match.group(2)
            if star:
                return ", ".join(self._one(f"{name}_{i}") for i in range(counts[name]))
            return self._one(name)

        return _PARAMETER.sub(placeholder, escaped)

    def _one(self, name: str) -> str:
        return f":{name}" if self.style == "named" else f"%({name})s"

    def _checked(self, params: Params) -> None:
        if params.keys() != self.names:
            missing = sorted(self.names - params.keys())
            unknown = sorted(params.keys() - self.names)
            raise ValueError(
                f"statement {self.name}: " + "; ".join(
                    part for part in (f"missing parameters {', '.join(missing)}" if missing else "",
                                      f"unknown parameters {', '.join(unknown)}" if unknown else "") if part)
            )

    def spelled(self, params: Params) -> tuple[str, Params]:
        """The SQL and the driver's parameters for ``params`` (checked; lists spread out)."""
        self._checked(params)
        return self._values(params)

    def _values(self, params: Params) -> tuple[str, Params]:
        if not self.lists:
            return self.sql, params
        lists = {name: _list(self.name, name, params[name]) for name in self._list_order}
        counts = tuple(len(values) for values in lists.values())
        sql = self._spelled.get(counts)
        if sql is None:
            sql = self._spelled[counts] = self._spell(dict(zip(self._list_order, counts)))
        flat = {k: v for k, v in params.items() if k not in self.lists}
        for name, values in lists.items():
            flat.update((f"{name}_{i}", value) for i, value in enumerate(values))
        return sql, flat

    def run(self, cur: Cursor, params: Params) -> Cursor:
        """Execute on ``cur`` (returned, to read from)."""
        sql, values = self.spelled(params)
        cur.execute(sql, values)
        return cur

    def run_some(self, cur: Cursor, params: Params) -> Cursor:
        """:meth:`run` with the parameters among ``params`` that the statement names (a unit's
        statements that share one dict of parameters). Without lists, ``params`` goes to the
        driver as it is: both drivers read a mapping by the names the statement has, and leave
        the others (a copy per statement was a tenth of a chained step's own Python)."""
        if self.lists:
            return self.run(cur, {name: params[name] for name in self.names})
        if not self.names <= params.keys():
            self._checked({name: params[name] for name in self.names & params.keys()})  # names the missing
        cur.execute(self.sql, params)
        return cur

    def run_in(self, conn: Connection, params: Params) -> None:
        """Execute inside a SQLAlchemy transaction (a notice that must commit with its writes)."""
        sql, values = self.spelled(params)
        conn.exec_driver_sql(sql, values)

    def bind(self, params: Params) -> Bound:
        """This statement with its values, checked now (before any unit runs)."""
        self._checked(params)
        return Bound(self, params)

    def __repr__(self) -> str:
        return f"Statement({self.name!r})"


class Bound:
    """A statement with its parameters: a unit of its own for the group commit."""

    __slots__ = ("statement", "params")

    def __init__(self, statement: Statement, params: Params) -> None:
        self.statement = statement
        self.params = params

    def run(self, cur: Cursor) -> Cursor:
        sql, values = self.statement._values(self.params)  # checked when bound
        cur.execute(sql, values)
        return cur


def _list(statement: str, name: str, value: object) -> Sequence[object]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"statement {statement}: parameter {name} must be a non-empty list")
    return value
