"""A gateway frozen (SIGSTOP, a paused VM) in the middle of a transaction must not keep its row locks:
the takeover of its runs skips locked rows, so a run whose row it locked would never be taken over.
The PostgreSQL store's sessions end a transaction left idle past PG_IDLE_IN_TRANSACTION_TIMEOUT_MS."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from exchange._store.sql.backends import PG_IDLE_IN_TRANSACTION_TIMEOUT_MS
from exchange._store.sql.typed_sql import Statement
from exchange._store.store import Store
from exchange._store.tables.schema import schema_meta
from tests.waiting import wait_until


def test_a_transaction_left_open_releases_its_row_locks(pg_url: str) -> None:
    store = Store(pg_url)
    frozen = store.db.engine.connect()  # a connection of the store, as a frozen gateway would hold it
    try:
        frozen.execute(text(f"SELECT version FROM {schema_meta.name} WHERE id = 1 FOR UPDATE"))  # then nothing
        locked_at = time.monotonic()
        probe = Statement("probe", f"SELECT id FROM {schema_meta.name} WHERE id = 1 FOR UPDATE SKIP LOCKED",
                          store.db.backend.paramstyle)
        assert store.db.query(probe) == []  # skipped while the frozen transaction holds it
        limit_s = PG_IDLE_IN_TRANSACTION_TIMEOUT_MS / 1000
        wait_until(lambda: store.db.query(probe) == [(1,)], limit_s + 10,
                   message="the frozen transaction's row lock to be released")
        assert time.monotonic() - locked_at >= limit_s * 0.9
        with pytest.raises(SQLAlchemyError):  # the server ended the frozen session
            frozen.execute(text("SELECT 1"))
    finally:
        frozen.close()
        store.close()
