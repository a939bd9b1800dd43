"""Gateways started together on an empty store all open it: the schema migration runs once, the
others wait for it and find the schema made (before, on PostgreSQL, 1 or 2 of 3 gateways exited on
``UniqueViolation ... pg_type_typname_nsp_index``, worded as bad data, in 5 of 5 trials)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exchange._store import schema
from exchange._store.store import Store
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
