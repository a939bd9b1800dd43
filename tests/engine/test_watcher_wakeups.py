"""The gateway's mail watcher on SQLite: woken by writes to the store's files (inotify), not a timer.

A command sent by another process reaches a waiting run when it is committed, an idle gateway makes
almost no look at the store, and where writes cannot be watched it polls as before.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.gateway import watcher
from exchange._engine.gateway.watcher import LookBudget, MailWatcher
from exchange._store.gateways.file_changes import sqlite_file_changes
from exchange.workflows.bootstrap import getWorkflows, workflow
from tests.engine.conftest import Engine, make_runtime
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@workflow(name="watcher.wait_for_hold")
def wait_for_hold() -> Any:
    rt = getWorkflows()
    while True:
        cmd = rt.recvCommand(currentState="RUNNING", timeoutSeconds=60)
        if cmd is not None:
            return cmd["cmd"]


def send_from_another_process(store_url: str, run_id: str, tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        from exchange._config import config_from_dict
        from exchange._engine.operator.runtime import Runtime
        runtime = Runtime(config_from_dict({{"store": {{"url": {store_url!r}}}, "apps": {{"paths": []}}}},
                                           base_dir={str(tmp_path)!r}))
        runtime.send_command({run_id!r}, "HOLD", actor="test")
        runtime.close()
        """)
    subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=60)


@pytest.fixture
def engine_polling_hourly(sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    """An engine whose watcher would look at the store once an hour if it relied on a timer."""
    monkeypatch.setattr(watcher, "FALLBACK_POLL_SECONDS", 3600.0)
    eng = Engine(sqlite_url, tmp_path, mailbox_poll_ms=3_600_000)
    yield eng
    eng.close()


def test_a_command_from_another_process_wakes_the_run_when_it_is_committed(
    engine_polling_hourly: Engine, sqlite_url: str, tmp_path: Path
) -> None:
    runtime = engine_polling_hourly.runtime
    assert engine_polling_hourly.dispatcher.watcher.woken_by_writes
    run_id = runtime.start("watcher.wait_for_hold", {})
    wait_until(lambda: runtime.get_run(run_id, events=False)["state"] == "RUNNING", 20, message="RUNNING")
    send_from_another_process(sqlite_url, run_id, tmp_path)
    # only a look made because the store was written can deliver it (the timers are an hour long)
    assert runtime.wait_for(run_id, 20)["result"] == "HOLD"


def test_an_idle_gateway_looks_at_the_store_only_when_it_is_written(
    sqlite_engine: Engine, mocker: Any
) -> None:
    runtime = sqlite_engine.runtime
    run_id = runtime.start("watcher.wait_for_hold", {})
    wait_until(lambda: runtime.get_run(run_id, events=False)["state"] == "RUNNING", 20, message="RUNNING")
    looks = mocker.spy(MailWatcher, "_poll_if_changed")
    window_seconds = 1.0
    time.sleep(window_seconds)  # a measuring window, not a wait for something to happen
    polled_looks = window_seconds / (runtime.config.engine.mailbox_poll_ms / 1000)  # 100 with a timer
    assert looks.call_count < polled_looks / 5, looks.call_count


class ReportedWrites:
    """Stands in for inotify (the boundary): a write to the store's files is reported when the test
    says so, and the commits the test makes report none. So the test can report a commit's log
    written while that commit is still being synced, invisible to a look."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._reported = False
        self._interrupted = False

    def wait(self, timeout_seconds: float) -> bool:
        with self._changed:
            self._changed.wait_for(lambda: self._reported or self._interrupted, timeout_seconds)
            reported, self._reported, self._interrupted = self._reported, False, False
            return reported

    def report_write(self) -> None:
        with self._changed:
            self._reported = True
            self._changed.notify_all()

    def interrupt(self) -> None:
        with self._changed:
            self._interrupted = True
            self._changed.notify_all()

    def close(self) -> None:
        pass


def test_a_commit_still_syncing_when_a_look_finds_an_earlier_one_is_seen_by_the_looks_that_follow(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = ReportedWrites()
    monkeypatch.setattr(watcher, "sqlite_file_changes", lambda _path: writes)
    monkeypatch.setattr(watcher, "FALLBACK_POLL_SECONDS", 3600.0)  # no timer would find it
    runtime = make_runtime(sqlite_url, tmp_path)
    earlier, later = (runtime.start("watcher.wait_for_hold", {}) for _ in range(2))
    woken: list[str] = []
    mail = MailWatcher(runtime.store, woken.append, poll_seconds=0.01)
    mail.start()
    try:
        runtime.store.send_message(earlier, "cmd", {"cmd": "HOLD"}, actor="test", reason=None)
        # the log of the later message is written, and the look it wakes finds the earlier commit
        writes.report_write()
        wait_until(lambda: earlier in woken, 10, message="the look after the write")
        assert later not in woken
        # the later message's sync ends: its commit is visible now, and no write follows it
        runtime.store.send_message(later, "cmd", {"cmd": "HOLD"}, actor="test", reason=None)
        wait_until(lambda: later in woken, 10, message="a look after the later commit became visible")
    finally:
        mail.stop()
        runtime.close()


def test_where_writes_cannot_be_watched_the_watcher_polls(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watcher, "sqlite_file_changes", lambda _path: None)  # no inotify here
    eng = Engine(sqlite_url, tmp_path)
    try:
        assert not eng.dispatcher.watcher.woken_by_writes
        run_id = eng.runtime.start("watcher.wait_for_hold", {})
        wait_until(lambda: eng.runtime.get_run(run_id, events=False)["state"] == "RUNNING", 20, message="RUNNING")
        send_from_another_process(sqlite_url, run_id, tmp_path)
        assert eng.runtime.wait_for(run_id, 20)["result"] == "HOLD"
    finally:
        eng.close()


def test_file_changes_report_writes_to_the_database_and_not_to_its_neighbours(tmp_path: Path) -> None:
    import sqlite3

    database = tmp_path / "store.db"
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE t (x)")
    changes = sqlite_file_changes(database)
    assert changes is not None
    try:
        while changes.wait(0.05):  # the table's creation, still queued
            pass
        (tmp_path / "store.db.gateway-1.lock").write_text("a neighbour", encoding="utf-8")
        writer.execute("SELECT * FROM t").fetchall()
        assert not changes.wait(0.2)  # a read and another file are no write to the database
        writer.execute("INSERT INTO t VALUES (1)")
        assert changes.wait(20)
        started = time.monotonic()
        changes.interrupt()
        assert not changes.wait(20)
        assert time.monotonic() - started < 10  # ended by the interrupt, not the timeout
    finally:
        changes.close()
        writer.close()
    assert sqlite_file_changes(None) is None


def test_the_look_budget_allows_bursts_then_one_look_per_interval() -> None:
    budget = LookBudget(interval_seconds=60.0)
    assert [budget.delay_seconds() for _ in range(LookBudget.BURST)] == [0.0] * LookBudget.BURST
    assert budget.delay_seconds() == pytest.approx(60.0, abs=1.0)
    assert LookBudget(interval_seconds=0).delay_seconds() == 0.0
