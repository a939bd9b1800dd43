"""Fixtures shared by the integration tests and the db/http step tests (imported by their conftests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integrations.http_server import ScriptedHttpServer
from tests.integrations.pg_control import ControlledPostgres


@pytest.fixture(scope="session")
def scripted_http_server() -> Iterator[ScriptedHttpServer]:
    server = ScriptedHttpServer()
    yield server
    server.close()


@pytest.fixture
def http_server(scripted_http_server: ScriptedHttpServer) -> Iterator[ScriptedHttpServer]:
    """The session's scripted HTTP server, with no scripts and an empty request log."""
    scripted_http_server.reset()
    yield scripted_http_server
    scripted_http_server.reset()


@pytest.fixture(scope="session")
def controlled_postgres() -> Iterator[ControlledPostgres]:
    """A PostgreSQL these tests may stop and start (socket + TCP on 127.0.0.1)."""
    server = ControlledPostgres()
    yield server
    server.close()


@pytest.fixture
def running_postgres(controlled_postgres: ControlledPostgres) -> ControlledPostgres:
    """The controlled PostgreSQL, started again if an earlier test left it stopped."""
    if not controlled_postgres.running:
        controlled_postgres.start()
    return controlled_postgres
