"""Named application databases: ``[databases.NAME]`` → one pooled SQLAlchemy Core engine each.

This is the layer under the ``db.*`` steps; it knows nothing of workflows. Every call checks a
connection out of the named pool, runs its statement(s) in one transaction, commits, and returns
JSON-safe values (see :mod:`exchange._integrations.sql_values`). Values are always bound parameters
(see :mod:`exchange._integrations.sql_params`); connection and pool settings are in
:mod:`exchange._integrations.sql_engine`; which failures are retryable in
:mod:`exchange._integrations.sql_errors`.

Arguments are checked before a connection is checked out, and a bad one raises an error that is
both a :class:`~exchange.errors.DatabaseError` and an :class:`~exchange.errors.InvalidArgument`
(fatal, never retried), naming the parameter: a connection name that is not a string
(:class:`SqlArgumentError`) or names no ``[databases.NAME]`` (:class:`UnknownDatabase`, listing the
configured ones); ``sql`` that is not a non-empty string; ``args`` that are not a list or a dict,
do not match the placeholders, or hold a value the driver cannot bind (see :func:`check_value`);
``getKey`` that is not a bool; ``statements`` that are not a list of ``sql`` or ``(sql, args)``.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import math
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, CursorResult, Dialect, Engine

from exchange._arguments import shown
from exchange._config import Config, DatabaseConfig
from exchange._integrations.sql_engine import DatabaseSettings, build_engine, key_strategy, parse_url
from exchange._integrations.sql_errors import COMMUNICATION, classify, excerpt, translate
from exchange._integrations.sql_params import PlaceholderError, Prepared, prepare
from exchange._integrations.sql_values import adapt_params, to_json_value
from exchange.errors import DatabaseError, SqlArgumentError, UnknownDatabase

log = logging.getLogger(__name__)

Row = dict[str, Any]
Statement = tuple[str, Any]


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# what a driver can bind; lists and tuples only where the database has arrays (not SQLite)
_BINDABLE = (str, int, float, bytes, bytearray, memoryview, Decimal, dt.date, dt.time, dt.timedelta, uuid.UUID)


class SqlConnections:
    """The configured databases of one runtime; engines are created on first use and shared.

    Thread-safe: workflow runs on many worker threads call it at once.
    """

    def __init__(self, databases: Mapping[str, DatabaseConfig]) -> None:
        """Validate every URL and settings table now (ConfigError naming the key); connect later."""
        self._configs = dict(databases)
        self._settings = {name: DatabaseSettings.parse(name, cfg.settings) for name, cfg in databases.items()}
        for cfg in databases.values():
            parse_url(cfg)
        self._engines: dict[str, Engine] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: Config) -> SqlConnections:
        return cls(config.databases)

    def names(self) -> list[str]:
        return sorted(self._configs)

    def _checked_engine(self, call: str, name: Any) -> Engine:
        """The engine of connection ``name``, after checking that ``name`` is one (no connection)."""
        if not isinstance(name, str) or not name.strip():
            known = ", ".join(self.names()) or "none"
            raise SqlArgumentError(
                f"{call}: dbName must be a connection name (configured: {known}), got {shown(name)}"
            )
        return self.engine(name)

    def engine(self, name: str) -> Engine:
        """The pooled engine of connection ``name`` (UnknownDatabase if not configured)."""
        engine = self._engines.get(name)
        if engine is not None:
            return engine
        if name not in self._configs:
            raise UnknownDatabase(name, list(self._configs))
        with self._lock:
            engine = self._engines.get(name)
            if engine is None:
                engine = build_engine(self._configs[name], self._settings[name])
                self._engines[name] = engine
                log.info("database %s: engine created (%s)", name, engine.dialect.name)
        return engine

    # -- public operations -------------------------------------------------------------------------

    def query(self, name: str, sql: str, args: Any = None) -> list[Row]:
        """Run a row-returning statement and return its rows as JSON-safe dicts (column → value).

        ``args``: a list for ``?`` placeholders, a dict for ``:name``. The transaction is committed,
        so ``INSERT ... RETURNING`` works here too. Raises UnknownDatabase, DatabaseError (the
        statement failed, not retried), RetryableError/CommunicationError (try again later).
        """
        engine = self._checked_engine("db.query", name)
        prepared = self._prepare(engine.dialect, name, sql, args)
        with self._connection(name, engine) as conn:
            rows = self._run(conn, name, prepared, functools.partial(self._rows_or_count, name, prepared))
            self._commit(conn, name, sql)
            return rows if isinstance(rows, list) else []

    def update(self, name: str, sql: str, args: Any = None, get_key: bool = False) -> Any:
        """Run a statement and commit; return the number of rows affected (0 when unknown).

        With ``get_key=True`` (``db.update``'s ``getKey``) return the key generated by an INSERT
        instead (None when the statement inserted nothing or is not an INSERT); how it is found is
        the connection's ``get_key`` setting (PostgreSQL: the first column of ``RETURNING *``
        unless the statement has its own RETURNING; SQLite: the rowid; SQL Server:
        ``SCOPE_IDENTITY()`` in the same batch).
        """
        engine = self._checked_engine("db.update", name)
        if not isinstance(get_key, bool):  # the message names the step's parameter: the author wrote that
            raise SqlArgumentError(f"db.update: getKey must be True or False, got {shown(get_key)}")
        prepared = self._prepare(engine.dialect, name, sql, args)
        with self._connection(name, engine) as conn:
            if get_key and prepared.is_insert():
                value = self._insert_key(conn, name, prepared, args)
            else:
                value = self._run(conn, name, prepared, _rowcount)
                value = None if get_key else value
            self._commit(conn, name, sql)
            return value

    def transaction(self, name: str, statements: Sequence[Any]) -> list[Any]:
        """Run ``statements`` in order in ONE transaction: all are committed or none is.

        Each statement is ``sql``, ``(sql,)`` or ``(sql, args)``. Returns one result per statement:
        its rows (list of dicts) when it returns rows, else its affected-row count. A failing
        statement rolls everything back; its error says which statement (1-based) it was.
        """
        engine = self._checked_engine("db.transaction", name)
        normalized = _normalize(name, statements)
        results: list[Any] = []
        if not normalized:
            return results
        total = len(normalized)
        prepared_all = [
            (f"statement {index} of {total}", self._prepare(engine.dialect, name, sql, args,
                                                            f"statement {index} of {total}"))
            for index, (sql, args) in enumerate(normalized, start=1)
        ]
        with self._connection(name, engine) as conn:
            for label, prepared in prepared_all:
                results.append(
                    self._run(
                        conn,
                        name,
                        prepared,
                        functools.partial(self._rows_or_count, name, prepared),
                        label,
                    )
                )
            self._commit(conn, name, normalized[-1][0])
        return results

    def close(self) -> None:
        """Close every pooled connection; later calls open new engines."""
        with self._lock:
            engines, self._engines = self._engines, {}
        for name, engine in engines.items():
            engine.dispose()
            log.info("database %s: engine disposed", name)

    # -- internals ---------------------------------------------------------------------------------

    @contextmanager
    def _connection(self, name: str, engine: Engine) -> Iterator[Connection]:
        try:
            conn = engine.connect()
        except (sa_exc.DBAPIError, sa_exc.TimeoutError) as exc:
            raise translate(exc, name, None, connecting=True) from exc
        try:
            yield conn
        finally:
            try:
                conn.close()  # rolls back whatever was not committed
            except sa_exc.DBAPIError:
                log.debug("database %s: closing a broken connection failed", name, exc_info=True)

    def _prepare(self, dialect: Dialect, name: str, sql: str, args: Any, label: str | None = None) -> Prepared:
        """The statement in the driver's paramstyle, its placeholders matched with ``args`` and each
        value checked (SqlArgumentError); needs the dialect only, no connection."""
        where = f"{label}: " if label else ""
        try:
            prepared = prepare(sql, args, dialect.name, dialect.paramstyle)
        except PlaceholderError as exc:
            statement = f" (statement: {excerpt(sql)})" if isinstance(sql, str) else ""
            raise SqlArgumentError(f"database {name!r}: {where}{exc}{statement}") from None
        items = args.items() if isinstance(args, Mapping) else enumerate(args or ())
        for key, value in items:
            problem = check_value(value, dialect.name)
            if problem is not None:
                raise SqlArgumentError(f"database {name!r}: {where}args[{key!r}] {problem}")
        return prepared

    def _run(
        self,
        conn: Connection,
        name: str,
        prepared: Prepared,
        read: Callable[[CursorResult[Any]], Any],
        label: str | None = None,
    ) -> Any:
        """Execute and read the result inside one error boundary (reads can fail mid-stream too)."""
        params = adapt_params(prepared.params, conn.dialect.name)
        try:
            result = conn.exec_driver_sql(prepared.sql, params)
            return read(result)
        except sa_exc.DBAPIError as exc:
            raise translate(exc, name, prepared.source, context=label) from exc

    def _commit(self, conn: Connection, name: str, sql: str) -> None:
        try:
            conn.commit()
        except sa_exc.DBAPIError as exc:
            raise translate(exc, name, sql, context="commit") from exc

    def _rows_or_count(self, name: str, prepared: Prepared, result: CursorResult[Any]) -> list[Row] | int:
        """The rows when the statement returns rows, else its affected-row count."""
        if not result.returns_rows:
            return _rowcount(result)
        keys = [str(k) for k in result.keys()]
        if len(set(keys)) != len(keys):
            dupes = sorted({k for k in keys if keys.count(k) > 1})
            raise DatabaseError(
                f"database {name!r}: the result has duplicate column name(s) {', '.join(dupes)}; "
                f"give them distinct aliases (statement: {excerpt(prepared.source)})"
            )
        mode = self._settings[name].decimal
        return [{k: to_json_value(v, mode) for k, v in zip(keys, row)} for row in result.fetchall()]

    def _insert_key(self, conn: Connection, name: str, prepared: Prepared, args: Any) -> Any:
        strategy = key_strategy(self._settings[name], conn.dialect.name)
        own_rows = prepared.has_keyword("RETURNING") or (
            conn.dialect.name == "mssql" and prepared.has_keyword("OUTPUT")
        )
        if own_rows:
            return self._run(conn, name, prepared, _first_value)
        if strategy == "returning":
            with_returning = self._prepare(conn.dialect, name, _append(prepared, "RETURNING *"), args)
            return self._run(conn, name, with_returning, _first_value)
        if strategy == "scope_identity":
            batch = self._prepare(conn.dialect, name, _append(prepared, ";SELECT SCOPE_IDENTITY()"), args)
            return self._scope_identity(conn, name, batch)
        try:
            result_key = self._run(conn, name, prepared, _lastrowid)
        except (AttributeError, sa_exc.InvalidRequestError) as exc:
            raise DatabaseError(
                f"database {name!r}: the driver cannot report the inserted row's key ({exc}); "
                "add RETURNING/OUTPUT to the INSERT or set get_key for this connection"
            ) from exc
        return _key_value(result_key)

    def _scope_identity(self, conn: Connection, name: str, batch: Prepared) -> Any:
        # SCOPE_IDENTITY() only sees the INSERT when both run in one batch; SQLAlchemy's result
        # would close the cursor after the row-less first result, so walk the raw cursor's sets.
        if not conn.in_transaction():
            conn.begin()
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(batch.sql, adapt_params(batch.params, conn.dialect.name))
            while cursor.description is None:
                if not cursor.nextset():
                    return None
            row = cursor.fetchone()
            return _key_value(row[0] if row else None)
        except Exception as exc:
            if classify(exc) == COMMUNICATION:
                conn.invalidate()
            raise translate(exc, name, batch.source) from exc
        finally:
            cursor.close()


def check_value(value: Any, dialect: str) -> str | None:
    """Why the driver of ``dialect`` cannot bind ``value`` (a sentence naming no secret), or None.

    Bindable: None, bool, int, float, str, bytes, Decimal, date/time/datetime, timedelta, UUID, and
    on databases with arrays (not SQLite) lists and tuples of those. On SQLite an int must fit in 64
    bits and a float be finite (SQLite would store NaN as NULL)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (list, tuple)) and dialect != "sqlite":
        for item in value:
            problem = check_value(item, dialect)
            if problem is not None:
                return f"holds an element that cannot be bound: it {problem}"
        return None
    if not isinstance(value, _BINDABLE):
        return f"is a {type(value).__name__}, which the database driver cannot bind"
    if dialect == "sqlite":
        if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
            return "is an integer beyond 64 bits, which SQLite cannot store"
        if isinstance(value, float) and not math.isfinite(value):
            return f"is {value!r}, which SQLite cannot store (it would become NULL)"
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "holds text UTF-8 cannot encode (undecodable bytes?)"
    return None


def _rowcount(result: CursorResult[Any]) -> int:
    count = int(result.rowcount)
    result.close()  # unread rows (UPDATE ... RETURNING) would keep SQLite's statement open at COMMIT
    return max(count, 0)


def _lastrowid(result: CursorResult[Any]) -> Any:
    # the rowid of the last INSERT on this connection; stale unless this INSERT added a row
    return result.lastrowid if result.rowcount != 0 else None


def _key_value(value: Any) -> Any:
    if isinstance(value, Decimal) and value.is_finite() and value == value.to_integral_value():
        return int(value)  # SQL Server's SCOPE_IDENTITY() is NUMERIC(38,0)
    return to_json_value(value)


def _first_value(result: CursorResult[Any]) -> Any:
    row = result.fetchone() if result.returns_rows else None
    result.close()
    return _key_value(row[0] if row is not None else None)


def _append(prepared: Prepared, clause: str) -> str:
    """The original statement without a trailing ``;`` and with ``clause`` on a new line."""
    sql = prepared.source
    stripped = prepared.code.rstrip()
    if stripped.endswith(";"):
        cut = len(stripped) - 1
        sql = sql[:cut] + sql[cut + 1 :]
    return f"{sql}\n{clause}"


def _normalize(name: str, statements: Any) -> list[Statement]:
    if isinstance(statements, (str, bytes)) or not isinstance(statements, Sequence):
        raise SqlArgumentError(f"database {name!r}: statements must be a list of (sql, args) pairs")
    normalized: list[Statement] = []
    for index, item in enumerate(statements, start=1):
        if isinstance(item, str):
            normalized.append((item, None))
        elif (
            isinstance(item, Sequence)
            and not isinstance(item, bytes)
            and 1 <= len(item) <= 2
            and isinstance(item[0], str)
        ):
            normalized.append((item[0], item[1] if len(item) == 2 else None))
        else:
            raise SqlArgumentError(
                f"database {name!r}: statement {index} must be sql or (sql, args), got {type(item).__name__}"
            )
    return normalized
