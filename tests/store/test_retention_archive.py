"""Retention with ``[retention] archive_dir``: each run's batch record is written to the directory
before the run is deleted; a record that cannot be written keeps its run (and says so in the store,
for the metric); a crash between the archive and the delete leaves both, and the next pass ends the
job with the same file; a directory that is missing or read-only is refused at once."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from exchange._api.metrics import GatewayCollector
from exchange._config import RetentionConfig, config_from_dict
from exchange._engine.gateway import retention as retention_module
from exchange._engine.gateway.retention import DAY_SECONDS, Retention
from exchange._engine.operator.runtime import Runtime
from exchange._store import RETENTION_ARCHIVE
from exchange._store import records as r
from exchange._store.tables.schema import runs
from exchange.errors import ConfigError
from tests.store.test_audit_chain import written_run


def _runtime(store_url: str, archive_dir: Path | str) -> Runtime:
    return Runtime(config_from_dict({"store": {"url": store_url}, "apps": {"paths": []},
                                     "retention": {"finished_runs_days": 1, "archive_dir": str(archive_dir)}},
                                    env={}))


def _old_finished_runs(runtime: Runtime, count: int) -> list[str]:
    """``count`` runs written as a gateway and an operator write them, finished two days ago."""
    store = runtime.store
    ids = []
    for _ in range(count):
        fence = written_run(store)
        assert store.finish_run(fence, r.SUCCESS, result_json='{"litres": 120}')
        ids.append(fence.run_id)
    old = store.clock.now() - 2 * DAY_SECONDS
    with store.db.transaction("age") as conn:
        conn.execute(update(runs).where(runs.c.id.in_(ids)).values(finished_at=old))
    return ids


def _remaining(runtime: Runtime) -> set[str]:
    with runtime.store.db.read() as conn:
        return set(conn.execute(select(runs.c.id)).scalars())


def test_each_record_is_archived_then_its_run_deleted(sqlite_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    runtime = _runtime(sqlite_url, folder)
    try:
        ids = _old_finished_runs(runtime, 3)
        expected = {run_id: runtime.record(run_id) for run_id in ids}
        report = Retention(runtime).apply()
        assert (report.by_age, report.archived, report.unarchived) == (3, 3, 0)
        assert _remaining(runtime).isdisjoint(ids)
        assert sorted(os.listdir(folder)) == sorted(f"{run_id}.json" for run_id in ids)  # no .tmp left
        for run_id, record in expected.items():
            archived = json.loads((folder / f"{run_id}.json").read_text("utf-8"))
            assert archived == json.loads(json.dumps(record, default=str))
            assert archived["run"]["id"] == run_id and archived["audit_head"] and archived["steps"]
        assert runtime.store.control.get(RETENTION_ARCHIVE) is None  # never failed: nothing noted
    finally:
        runtime.close()


def test_a_record_that_cannot_be_written_keeps_its_run(sqlite_url: str, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    runtime = _runtime(sqlite_url, folder)
    try:
        ids = _old_finished_runs(runtime, 2)
        retention = Retention(runtime)  # the directory was there at start...
        folder.rmdir()  # ... and is gone (an unmounted share; a full disk fails the same way)
        report = retention.apply()
        assert (report.by_age, report.archived, report.unarchived) == (0, 0, 2)
        assert set(ids) <= _remaining(runtime)
        warned = [rec.getMessage() for rec in caplog.records if rec.levelname == "WARNING"]
        assert any(ids[0] in text and "not deleted" in text and "No such file" in text for text in warned)
        noted = runtime.store.control.get(RETENTION_ARCHIVE)
        assert noted is not None and noted.value["runs"] == 2 and noted.value["first"] in ids
        gauge = next(GatewayCollector(runtime).unarchived(runtime.store))  # every gateway's /metrics
        assert (gauge.name, gauge.samples[0].value) == ("exchange_retention_unarchived_runs", 2)

        folder.mkdir()
        report = retention.apply()  # back: the next pass archives and deletes them
        assert (report.by_age, report.archived, report.unarchived) == (2, 2, 0)
        assert _remaining(runtime).isdisjoint(ids)
        noted = runtime.store.control.get(RETENTION_ARCHIVE)
        assert noted is not None and noted.value == {"runs": 0}
    finally:
        runtime.close()


def test_a_crash_between_archive_and_delete_is_finished_by_the_next_pass(
        sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    runtime = _runtime(sqlite_url, folder)
    try:
        ids = _old_finished_runs(runtime, 2)

        class Killed(BaseException):  # as a kill -9 would: nothing after the archive runs
            pass

        def killed(self: Any, run_ids: Any) -> int:
            raise Killed

        with monkeypatch.context() as patch:
            patch.setattr(retention_module.RetentionTable, "delete_runs", killed)
            with pytest.raises(Killed):
                Retention(runtime).apply()
        first = {run_id: (folder / f"{run_id}.json").read_bytes() for run_id in ids}
        assert set(ids) <= _remaining(runtime)  # archived, not deleted: consistent

        report = Retention(runtime).apply()
        assert (report.by_age, report.archived) == (2, 2)
        assert _remaining(runtime).isdisjoint(ids)
        assert {run_id: (folder / f"{run_id}.json").read_bytes() for run_id in ids} == first  # the same record
    finally:
        runtime.close()


def test_a_missing_or_read_only_archive_dir_is_refused_by_name(sqlite_url: str, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    runtime = _runtime(sqlite_url, missing)
    try:
        with pytest.raises(ConfigError, match=r"\[retention\] archive_dir '.*nowhere' does not exist"):
            Retention(runtime)
        a_file = tmp_path / "a-file"
        a_file.write_text("")
        with pytest.raises(ConfigError, match="is not a directory"):
            Retention(runtime, RetentionConfig(archive_dir=str(a_file)))
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o500)
        if not os.access(read_only, os.W_OK):
            with pytest.raises(ConfigError, match="is not writable by this process"):
                Retention(runtime, RetentionConfig(archive_dir=str(read_only)))
    finally:
        runtime.close()
    with pytest.raises(ConfigError, match="retention.archive_dir must be a directory's path"):
        config_from_dict({"retention": {"archive_dir": ""}}, env={})
    relative = config_from_dict({"retention": {"archive_dir": "records"}}, base_dir=tmp_path, env={})
    assert relative.retention.archive_dir == str(tmp_path.resolve() / "records")
