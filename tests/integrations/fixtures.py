"""Fixtures shared by the integration tests and the db/http step tests (imported by their conftests)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest

from tests.integrations.http_server import ScriptedHttpServer
from tests.integrations.pg_control import ControlledPostgres

T = TypeVar("T")
_SHARED: dict[str, list[Any]] = {}


@contextmanager
def _shared(key: str, factory: Callable[[], T]) -> Iterator[T]:
    """One instance per test session even though several conftests register these fixtures."""
    entry = _SHARED.get(key)
    if entry is None:
        entry = _SHARED[key] = [factory(), 0]
    entry[1] += 1
    try:
        yield entry[0]
    finally:
        entry[1] -= 1
        if entry[1] == 0:
            del _SHARED[key]
            entry[0].close()


@pytest.fixture(scope="session")
def scripted_http_server() -> Iterator[ScriptedHttpServer]:
    with _shared("http", ScriptedHttpServer) as server:
        yield server


@pytest.fixture
def http_server(scripted_http_server: ScriptedHttpServer) -> Iterator[ScriptedHttpServer]:
    """The session's scripted HTTP server, with no scripts and an empty request log."""
    scripted_http_server.reset()
    yield scripted_http_server
    scripted_http_server.reset()


@pytest.fixture(scope="session")
def controlled_postgres() -> Iterator[ControlledPostgres]:
    """A PostgreSQL these tests may stop and start (socket + TCP on 127.0.0.1)."""
    with _shared("postgres", ControlledPostgres) as server:
        yield server


@pytest.fixture
def running_postgres(controlled_postgres: ControlledPostgres) -> ControlledPostgres:
    """The controlled PostgreSQL, started again if an earlier test left it stopped."""
    if not controlled_postgres.running:
        controlled_postgres.start()
    return controlled_postgres
