"""Gateways started together on an empty store all open it: the schema migration runs once, the
others wait for it and find the schema made (before, on PostgreSQL, 1 or 2 of 3 gateways exited on
``UniqueViolation ... pg_type_typname_nsp_index``, worded as bad data, in 5 of 5 trials)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from exchange._store.sql.backends import switch_to_wal
from exchange._store.store import Store
from exchange._store.tables import schema
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, Gateway

GATEWAYS = 3
ROUNDS = 3  # each round a new empty database: one round lost the race 5 times in 5 before


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_gateways_started_together_on_an_empty_store_all_become_ready(
    backend: str, tmp_path: Path, exchange_zygote: ForkServer, request: pytest.FixtureRequest
) -> None:
    for round_no in range(ROUNDS):
        root = tmp_path / f"round{round_no}"
        if backend == "postgresql":
            server = request.getfixturevalue("postgres")
            url = server.url(server.create_database("race"))
        else:
            url = f"sqlite:///{root / 'shared' / 'exchange.db'}"
        envs = [ExchangeEnv.create(root / f"g{i}", store_url=url, engine={"node_id": f"g{i}"},
                                   zygote=exchange_zygote) for i in range(GATEWAYS)]
        gateways: list[Gateway] = [env.gateway() for env in envs]
        try:
            for gateway in gateways:  # forked from the zygote: they start within milliseconds
                gateway.spawn()
            for gateway in gateways:
                gateway.wait_ready(60)
            for gateway in gateways:
                assert "refused a value" not in gateway.log_text(), gateway.log_text()
        finally:
            for gateway in gateways:
                gateway.stop()
        store = Store(url, create=False)
        try:
            with store.db.read() as conn:
                assert schema.current_version(conn) == schema.LATEST_VERSION
        finally:
            store.close()


def _switching_to_wal_elsewhere(path: Path) -> sqlite3.Connection:
    """A connection holding a new file's RESERVED lock in rollback mode, as a gateway's connection
    does while it switches the file to WAL."""
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = sqlite3.connect(path, isolation_level=None, timeout=0, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    return holder


def test_a_store_opened_while_another_gateway_switches_the_file_to_wal_waits_for_it(tmp_path: Path) -> None:
    # SQLite refuses that switch at once, without its busy handler: before, the gateway exited with
    # "database is locked" (20 of 800 opens when four processes opened a new file at once).
    path = tmp_path / "exchange.db"
    holder = _switching_to_wal_elsewhere(path)
    hold_s = 0.3
    released = threading.Timer(hold_s, holder.rollback)
    started = time.monotonic()
    released.start()
    try:
        store = Store(f"sqlite:///{path}")
    finally:
        released.join()
        holder.close()
    try:
        assert time.monotonic() - started >= hold_s  # it waited for the switch, and opened after it
        with store.db.read() as conn:
            assert schema.current_version(conn) == schema.LATEST_VERSION
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        store.close()


def test_a_switch_to_wal_held_up_past_the_busy_timeout_says_the_database_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "exchange.db"
    holder = _switching_to_wal_elsewhere(path)
    waiting = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            switch_to_wal(waiting.cursor(), timeout_ms=200)
        assert time.monotonic() - started >= 0.15  # it retried before giving up
    finally:
        waiting.close()
        holder.close()
