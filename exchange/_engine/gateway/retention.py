"""Retention: finished runs older than ``[retention] finished_runs_days``, and the oldest beyond
``max_finished_runs``, are deleted with all their rows; so are the audit log's entries older than
``finished_runs_days``. Unfinished runs are never touched.

Deletions go in batches of :data:`BATCH_RUNS` runs, one short transaction each, with a pause between
them so the engine's own writes are not held up. A gateway applies retention every
``interval_minutes`` (one hour by default); of several gateways on one store, the one that takes
the store's retention lease does it (:meth:`Retention.apply_if_due`). ``exchange retention apply``
applies it at once.

With ``archive_dir`` each run's batch record is written there before the run is deleted
(:mod:`~exchange._engine.gateway.archive`); a run whose record could not be written stays, with a
WARNING, and is tried again on the next pass. The store's ``retention_archive`` setting says how many
runs the last pass could not archive (the ``exchange_retention_unarchived_runs`` metric).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from exchange._config import RetentionConfig
from exchange._engine.gateway.archive import check_archive_dir, record_text, sync_dir, write_record
from exchange._engine.operator import Runtime
from exchange._store import RETENTION, RETENTION_ARCHIVE, RetentionTable
from exchange.errors import UnknownRun

log = logging.getLogger(__name__)

BATCH_RUNS = 500
PAUSE_SECONDS = 0.02  # between batches: the engine's writers get the store in between
DAY_SECONDS = 86_400.0


@dataclass
class RetentionReport:
    by_age: int = 0  # runs deleted for being older than finished_runs_days
    by_count: int = 0  # runs deleted beyond max_finished_runs
    audit_entries: int = 0
    archived: int = 0  # records written to archive_dir (their runs deleted)
    unarchived: int = 0  # runs kept because their record could not be written (see the log)
    seconds: float = 0.0
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Retention:
    def __init__(self, runtime: Runtime, settings: RetentionConfig | None = None) -> None:
        self.runtime = runtime
        self.settings = settings or runtime.config.retention
        self.table = RetentionTable(runtime.store.db)
        self._report = RetentionReport()  # the pass under way
        self._first_unarchived = ("", "")  # its first run not archived, and why
        if self.settings.archive_dir is not None:
            check_archive_dir(self.settings.archive_dir)  # ConfigError naming it

    @property
    def configured(self) -> bool:
        return self.settings.finished_runs_days is not None or self.settings.max_finished_runs is not None

    def apply(self, *, dry_run: bool = False, stop: threading.Event | None = None) -> RetentionReport:
        """Delete what the settings say now (``dry_run``: count it only); ``stop`` ends it between
        batches (a gateway shutting down)."""
        started = time.monotonic()
        report = RetentionReport(dry_run=dry_run)
        self._report = report
        days = self.settings.finished_runs_days
        if days is not None:
            cutoff = self.runtime.store.clock.now() - days * DAY_SECONDS
            if dry_run:
                report.by_age = self.table.count_finished_before(cutoff)
            else:
                report.by_age = self._delete_batches(lambda: self.table.finished_before(cutoff, BATCH_RUNS), stop)
                report.audit_entries = self._prune_audit(cutoff, stop)
        most = self.settings.max_finished_runs
        if most is not None:
            excess = self.table.finished_count() - (report.by_age if dry_run else 0) - most
            if excess > 0:
                report.by_count = self._delete_excess(excess, dry_run, stop)
        report.seconds = round(time.monotonic() - started, 3)
        if not dry_run and self.settings.archive_dir is not None:
            self._note_unarchived(report)
        if report.by_age or report.by_count or report.audit_entries:
            log.info("retention%s: %s runs older than %s days, %s beyond %s finished runs, %s audit entries "
                     "(%.1f s)", " (dry run)" if dry_run else "", report.by_age, days, report.by_count, most,
                     report.audit_entries, report.seconds)
        return report

    def _delete_batches(self, next_ids: Callable[[], list[str]], stop: threading.Event | None) -> int:
        deleted = 0
        while stop is None or not stop.is_set():
            ids = next_ids()
            if not ids:
                break
            archived = self._archive(ids)
            deleted += self.table.delete_runs(archived)
            if len(ids) < BATCH_RUNS or len(archived) < len(ids):
                break  # the runs not archived would come first again: the next pass tries them
            time.sleep(PAUSE_SECONDS)
        return deleted

    def _delete_excess(self, excess: int, dry_run: bool, stop: threading.Event | None) -> int:
        if dry_run:
            return excess
        deleted = 0
        while deleted < excess and (stop is None or not stop.is_set()):
            ids = self.table.oldest_finished(min(BATCH_RUNS, excess - deleted))
            if not ids:
                break
            archived = self._archive(ids)
            deleted += self.table.delete_runs(archived)
            if len(archived) < len(ids):
                break  # the runs not archived would come first again: the next pass tries them
            time.sleep(PAUSE_SECONDS)
        return deleted

    def _archive(self, run_ids: list[str]) -> list[str]:
        """The runs of ``run_ids`` that may be deleted: all of them without ``archive_dir``; else
        those whose record is now in it, on disk (the directory fsynced after the last rename)."""
        folder = self.settings.archive_dir
        if folder is None:
            return run_ids
        done: list[str] = []
        for run_id in run_ids:
            try:
                write_record(folder, run_id, record_text(self.runtime.record(run_id)))
            except UnknownRun:
                continue  # deleted meanwhile (another `retention apply`): nothing to archive or delete
            except Exception as exc:  # a full disk, a lost mount, a store error: keep the run
                self._unarchived(run_id, exc)
                continue
            done.append(run_id)
        if done:
            try:
                sync_dir(folder)
            except OSError as exc:
                for run_id in done:
                    self._unarchived(run_id, exc)
                return []
        self._report.archived += len(done)
        return done

    def _unarchived(self, run_id: str, exc: BaseException) -> None:
        log.warning("retention: run %s not deleted: its record could not be archived to %s: %s "
                    "(tried again on the next pass)", run_id, self.settings.archive_dir, exc)
        report = self._report
        report.unarchived += 1
        if report.unarchived == 1:
            self._first_unarchived = (run_id, f"{type(exc).__name__}: {exc}")

    def _note_unarchived(self, report: RetentionReport) -> None:
        """Keep in the store how many runs this pass could not archive (every gateway's metric reads
        it), written only when it changes from none or to none."""
        control = self.runtime.store.control
        before = control.get(RETENTION_ARCHIVE)
        was_failing = before is not None and isinstance(before.value, dict) and before.value.get("runs")
        if report.unarchived:
            first, error = self._first_unarchived
            control.put(RETENTION_ARCHIVE, {"runs": report.unarchived, "first": first, "error": error[:500],
                                            "archive_dir": self.settings.archive_dir}, actor="retention")
        elif was_failing:
            control.put(RETENTION_ARCHIVE, {"runs": 0}, actor="retention")

    def _prune_audit(self, cutoff: float, stop: threading.Event | None) -> int:
        pruned = 0
        while stop is None or not stop.is_set():
            done = self.table.prune_audit(cutoff, BATCH_RUNS)
            pruned += done
            if done < BATCH_RUNS:
                break
            time.sleep(PAUSE_SECONDS)
        return pruned

    def apply_if_due(self, owner: str, stop: threading.Event | None = None) -> RetentionReport | None:
        """Apply when configured and no gateway applied it within ``interval_minutes``: the first
        gateway to take the store's retention lease does it; None when it was not this one's turn."""
        if not self.configured:
            return None
        interval_seconds = self.settings.interval_minutes * 60
        older_than = self.runtime.store.clock.now() - interval_seconds
        if not self.runtime.store.control.take_if_older(RETENTION, {"owner": owner}, actor=owner,
                                                        older_than=older_than):
            return None
        return self.apply(stop=stop)


class RetentionKeeper:
    """The gateway's thread that applies retention when due (it looks every few minutes)."""

    LOOK_SECONDS = 120.0

    def __init__(self, runtime: Runtime, owner: str) -> None:
        self.retention = Retention(runtime)
        self.owner = owner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="exchange-retention", daemon=True)

    def start(self) -> None:
        if self.retention.configured:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        look_seconds = min(self.LOOK_SECONDS, self.retention.settings.interval_minutes * 60)
        while not self._stop.is_set():
            try:
                self.retention.apply_if_due(self.owner, self._stop)
            except Exception:  # the store is away, a bug: the next look tries again
                log.exception("retention failed; trying again later")
            self._stop.wait(look_seconds)
