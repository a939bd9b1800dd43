"""A full disk under the store is an outage, not bad data: the run pauses, the gateway backs off with
a bounded log, the CLI and the API say "the store's disk is full" (503), and the run ends SUCCESS
once there is space again, each step recorded once.

Before: COMMIT failed with "database or disk is full", SQLite had rolled back already, the failed
ROLLBACK closed the connection and closing the cursor then raised ProgrammingError, which replaced
the real error and was classed as bad data: the run was failed, and the gateway re-executed it ~6,500
times (21 MB of log) in 15 s because every resubmission reset its backoff.

Two tests: a real SQLite store on a small tmpfs filled by the run's own step outputs and then grown
(needs root to mount; it is not skipped where the suite runs as root), and the same refusal injected
at the driver boundary (the sqlite3 module), which runs everywhere.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from exchange._engine.gateway import dispatcher as dispatcher_module
from exchange.errors import StoreDiskFull
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from tests.api.conftest import start_api_gateway
from tests.conftest import PostgresServer
from tests.engine.conftest import Engine
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, read_lines
from tests.waiting import holds_for, wait_until

CHUNK_CHARS = 20_000  # each step's output: ~100 of them fill the small disk
OUTAGE_SECONDS = 8.0
LOG_LINES_MAX = 200  # over the whole outage (before: ~13,000 a second)
WAITS = "it waits for the store and will be executed again"
AGAIN = "will be executed again"  # the end of that line, then and now
BIG_REASON = "r" * 100_000  # more than a failed batch leaves free in the WAL file: refused for sure

FILL_APP = f'''
from exchange.workflows.bootstrap import step, workflow


@step(name="full.chunk")
def chunk(path, i):
    with open(path, "a", encoding="utf-8") as side:  # the side file is on a disk with room
        side.write("%s\\n" % i)
    return "%06d" % i + "x" * {CHUNK_CHARS}


@workflow(name="full.fill")
def fill(path, n):
    return sum(len(chunk(path, i)) for i in range(n))
'''


def _mount_tmpfs(where: Path, size: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True,
                   capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs for the store (unmounted after). Not root: skipped, naming why; root: mounted or
    failed, never skipped (CI runs as root, so the real disk is what it tests)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the injected test covers this machine")
    where = tmp_path / "disk"
    where.mkdir()
    _mount_tmpfs(where, "2m")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def test_a_full_disk_pauses_the_run_which_ends_success_once_the_disk_grows(
    small_disk: Path, tmp_path: Path, exchange_zygote: ForkServer
) -> None:
    n = 250  # 5 MB of outputs on a 2 MB disk
    env = ExchangeEnv.create(tmp_path / "env", store_url=f"sqlite:///{small_disk / 'exchange.db'}",
                             engine={"reason_max_chars": 200_000, "message_max_bytes": 200_000},
                             zygote=exchange_zygote)
    env.write_app("full_app", FILL_APP)
    side = tmp_path / "steps.txt"
    api_gateway = start_api_gateway(env, log_level="DEBUG")  # DEBUG: each failed execution says so
    api = next(api_gateway)
    runtime = env.runtime()
    try:
        (run_id,) = env.start_runs("full.fill", [{"path": str(side), "n": n}])
        wait_until(lambda: "the store's disk is full" in api.gateway.log_text(), 60,
                   message=lambda: f"the run to meet the full disk\n{api.gateway.log_text()[-3000:]}")
        log_before = api.gateway.log_text()
        stuck = len(read_lines(side))  # the steps executed so far: the last one's record was refused

        sent = env.cli("send", run_id, "HOLD", "--reason", BIG_REASON)
        assert sent.returncode == 1, sent
        assert "the store's disk is full" in sent.stderr and "refused a value" not in sent.stderr, sent.stderr
        answer = api.call("POST", f"/api/v1/runs/{run_id}/commands", "operator",
                          json={"cmd": "HOLD", "reason": BIG_REASON})
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"].startswith("the store's disk is full"), answer.text

        # The outage lasts: the run must not be failed meanwhile (nothing to wait for but time).
        assert holds_for(lambda: runtime.get_run(run_id, steps=False, events=False)["status"] == "RUNNING",
                         OUTAGE_SECONDS), runtime.get_run(run_id, steps=False, events=False)
        outage_log = api.gateway.log_text()[len(log_before):]
        attempts = outage_log.count(WAITS)  # failed executions (one line each, at DEBUG after the first)
        shown = [line for line in outage_log.splitlines() if " DEBUG " not in line]  # what INFO shows
        outage_bytes = len("\n".join(shown))

        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True, capture_output=True)
        view = runtime.wait_for(run_id, 60)
        print(f"\nfull disk for {OUTAGE_SECONDS:.0f} s: {attempts} failed executions, {len(shown)} log lines "
              f"at INFO ({outage_bytes} bytes); then {view['status']}")
        assert view["status"] == "SUCCESS", (view["error"], api.gateway.log_text()[-3000:])
        assert view["result"] == n * (6 + CHUNK_CHARS)
        assert [s["seq"] for s in view["steps"]] == list(range(1, n + 1))  # each step recorded once
        executed = Counter(int(line[0]) for line in read_lines(side))
        assert sorted(executed) == list(range(n))
        again = {i: count for i, count in executed.items() if count > 1}
        # At least once: only the step whose record the full disk refused ran again, once a retry.
        assert set(again) <= {stuck - 1}, again
        assert 2 <= attempts <= 8, attempts  # 3 retries at once, then 2 s, 4 s, 8 s apart
        assert len(shown) < LOG_LINES_MAX, "\n".join(shown[-50:])
    finally:
        runtime.close()
        api_gateway.close()


# ----- PostgreSQL: the store's tablespace on a small tmpfs ----------------------------------------

PG_EXECUTED: Counter[int] = Counter()


@step(name="diskfull.pg_chunk")
def pg_chunk(i: int) -> str:
    with LOCK:
        PG_EXECUTED[i] += 1
    return base64.b64encode(os.urandom(CHUNK_CHARS * 3 // 4)).decode()  # random: TOAST cannot shrink it


@workflow(name="diskfull.pg_fill")
def pg_fill(n: int) -> int:
    return sum(len(pg_chunk(i)) for i in range(n))


@pytest.fixture
def pg_small_disk(postgres: PostgresServer) -> Iterator[tuple[str, Path]]:
    """A fresh database whose tablespace is a 4 MB tmpfs (root only, as :func:`small_disk`)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the injected test covers this machine")
    top = Path(tempfile.mkdtemp(prefix="exchange-pgdisk-"))
    top.chmod(0o755)  # the server's own user must reach the mount point
    where = top / "disk"
    where.mkdir()
    _mount_tmpfs(where, "4m")
    shutil.chown(where, postgres.server.system_user, postgres.server.system_user)
    name = f"small_{uuid.uuid4().hex[:8]}"
    postgres.server.psql(f"CREATE TABLESPACE {name} LOCATION '{where}';")
    postgres.server.psql(f"CREATE DATABASE {name} TABLESPACE {name};")
    try:
        yield postgres.url(name), where
    finally:
        postgres.server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE);")
        postgres.server.psql(f"DROP TABLESPACE IF EXISTS {name};")
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def test_a_full_postgresql_tablespace_pauses_the_run_which_ends_success_once_it_grows(
    pg_small_disk: tuple[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL's own refusal (53100 "could not extend file ... No space left on device")."""
    url, where = pg_small_disk
    caplog.set_level(logging.DEBUG, logger="exchange._engine.gateway.executor")
    PG_EXECUTED.clear()
    eng = Engine(url, tmp_path)
    try:
        n = 400  # 8 MB of outputs on a 4 MB tablespace
        run_id = getWorkflows().start("diskfull.pg_fill", {"n": n})
        wait_until(lambda: any(AGAIN in r.getMessage() for r in caplog.records), 60,
                   message="the run to meet the full tablespace")
        assert "the store's disk is full" in next(r.getMessage() for r in caplog.records if AGAIN in r.getMessage())
        stuck = max(PG_EXECUTED)  # its outcome was refused
        assert holds_for(lambda: eng.runtime.get_run(run_id, steps=False, events=False)["status"] == "RUNNING",
                         OUTAGE_SECONDS / 2)
        attempts = sum(AGAIN in r.getMessage() for r in caplog.records)
        subprocess.run(["mount", "-o", "remount,size=64m", str(where)], check=True, capture_output=True)
        view = eng.runtime.wait_for(run_id, 60)
        print(f"\nfull tablespace for {OUTAGE_SECONDS / 2:.0f} s: {attempts} failed executions; then {view['status']}")
        assert view["status"] == "SUCCESS", view["error"]
        assert view["result"] == n * CHUNK_CHARS
        assert [s["seq"] for s in view["steps"]] == list(range(1, n + 1))
        assert sorted(PG_EXECUTED) == list(range(n))
        # The step whose outcome the full disk refused ran again; so may one in flight when a lease
        # renewal failed on a loaded machine (the run is taken back and replayed): never a recorded
        # one, and none more than twice (no spinning).
        assert PG_EXECUTED[stuck] > 1, PG_EXECUTED
        assert all(count <= 2 for i, count in PG_EXECUTED.items() if i != stuck), PG_EXECUTED
        assert 1 <= attempts <= 8, attempts
    finally:
        eng.close()


# ----- the same refusal injected at the driver boundary -------------------------------------------

class FullDisk:
    """Makes every COMMIT of a transaction that changed something fail as SQLite does on a full disk:
    the transaction rolled back, then ``OperationalError: database or disk is full`` (SQLITE_FULL).
    A transaction that changed nothing commits (it writes nothing to the disk)."""

    def __init__(self) -> None:
        self.full = False
        self.refused = 0
        self.changes_at_begin: dict[int, int] = {}  # id(connection) -> total_changes at its BEGIN

    def refuses(self, conn: sqlite3.Connection) -> bool:
        return self.full and conn.in_transaction and conn.total_changes > self.changes_at_begin.get(id(conn), 0)

    def refuse(self, conn: sqlite3.Connection) -> None:
        self.refused += 1
        conn.execute("ROLLBACK")  # SQLite rolls back by itself after SQLITE_FULL at COMMIT
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorcode = 13  # type: ignore[attr-defined]  # as sqlite3 sets them
        error.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
        raise error

    def connect(self, real_connect: Any) -> Any:
        disk = self

        class Cursor:
            def __init__(self, cur: sqlite3.Cursor, conn: sqlite3.Connection) -> None:
                self._cur, self._conn = cur, conn

            def execute(self, sql: str, *args: Any) -> Any:
                statement = sql.strip().upper()
                if statement == "COMMIT" and disk.refuses(self._conn):
                    disk.refuse(self._conn)
                self._cur.execute(sql, *args)
                if statement.startswith("BEGIN"):
                    disk.changes_at_begin[id(self._conn)] = self._conn.total_changes
                return self

            def __getattr__(self, name: str) -> Any:
                return getattr(self._cur, name)

            def __iter__(self) -> Any:
                return iter(self._cur)

        class Connection:
            def __init__(self, conn: sqlite3.Connection) -> None:
                object.__setattr__(self, "_conn", conn)

            def cursor(self, *args: Any) -> Cursor:
                return Cursor(self._conn.cursor(*args), self._conn)

            def execute(self, sql: str, *args: Any) -> Any:
                return self.cursor().execute(sql, *args)

            def commit(self) -> None:
                if disk.refuses(self._conn):
                    disk.refuse(self._conn)
                self._conn.commit()

            def __getattr__(self, name: str) -> Any:
                return getattr(self._conn, name)

            def __setattr__(self, name: str, value: Any) -> None:
                setattr(self._conn, name, value)

        def connect(*args: Any, **kwargs: Any) -> Any:
            return Connection(real_connect(*args, **kwargs))

        return connect


EXECUTED: Counter[int] = Counter()
LOCK = threading.Lock()


@step(name="diskfull.work")
def work(i: int) -> int:
    with LOCK:
        EXECUTED[i] += 1
    return i


@workflow(name="diskfull.loop")
def loop(n: int, pause_at: int) -> int:
    total = 0
    for i in range(n):
        total += work(i)
        if i == pause_at:  # the test fills the disk here
            while not PAUSE.is_set():
                PAUSE.wait(0.01)
    return total


PAUSE = threading.Event()


def test_a_disk_full_refusal_at_the_driver_pauses_the_run_and_it_resumes(
    mocker: MockerFixture, sqlite_url: str, tmp_path: Path
) -> None:
    """The refusal injected where SQLite gives it (the sqlite3 module): the original error survives
    the failed cleanup, classes as StoreDiskFull, the run pauses and backs off, and ends SUCCESS."""
    executions = mocker.spy(dispatcher_module, "execute_run")  # counted, not changed
    disk = FullDisk()
    # SQLAlchemy's driver is the sqlite3.dbapi2 module (the same connect as sqlite3's)
    mocker.patch.object(sqlite3.dbapi2, "connect", disk.connect(sqlite3.dbapi2.connect))
    EXECUTED.clear()
    PAUSE.clear()
    eng = Engine(sqlite_url, tmp_path)
    try:
        n, pause_at = 30, 9
        run_id = getWorkflows().start("diskfull.loop", {"n": n, "pause_at": pause_at})
        wait_until(lambda: EXECUTED[pause_at] == 1, 20, message="the run to reach the pause")
        disk.full = True
        PAUSE.set()
        wait_until(lambda: disk.refused > 0, 20, message="a refused commit")
        with pytest.raises(StoreDiskFull, match="^the store's disk is full: "):
            getWorkflows().sendCommand(run_id, "HOLD", "x")
        outage_s = 4.0
        assert holds_for(lambda: eng.runtime.get_run(run_id, steps=False, events=False)["status"] == "RUNNING",
                         outage_s)
        attempts = executions.call_count - 1  # after the first, each refused at its start
        print(f"\ninjected full disk for {outage_s:.0f} s: {attempts} failed executions, "
              f"{disk.refused} refused commits")
        assert 2 <= attempts <= 6, attempts  # backs off: 3 at once, then 2 s apart (before: thousands)
        disk.full = False
        view = eng.runtime.wait_for(run_id, 30)
        assert view["status"] == "SUCCESS", view["error"]
        assert view["result"] == sum(range(n))
        assert [s["seq"] for s in view["steps"]] == list(range(1, n + 1))
        assert {i for i, count in EXECUTED.items() if count > 1} == {pause_at + 1}
    finally:
        PAUSE.set()
        eng.close()
