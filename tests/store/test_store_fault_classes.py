"""What a failed statement is classed as: the disk refusing a write (full, failing, out of resources)
is an outage whatever DBAPI class the driver gives it, never bad data; a full disk says so."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg.errors
import pytest

from exchange._store.sql.database import Database, is_data_error, is_disk_full, is_outage
from exchange.errors import StoreDataError, StoreDiskFull, StoreError


def sqlite_error(cls: type[sqlite3.Error], text: str, code: int) -> sqlite3.Error:
    error = cls(text)
    error.sqlite_errorcode = code  # type: ignore[attr-defined]  # as the sqlite3 module sets it
    return error


FULL = [
    sqlite_error(sqlite3.OperationalError, "database or disk is full", 13),
    psycopg.errors.DiskFull('could not extend file "base/16384/16390": No space left on device'),
    OSError(28, "No space left on device"),
]
OUTAGES = [
    sqlite_error(sqlite3.OperationalError, "disk I/O error", 10 | (3 << 8)),  # SQLITE_IOERR_WRITE
    sqlite_error(sqlite3.OperationalError, "attempt to write a readonly database", 8),
    sqlite3.ProgrammingError("Cannot operate on a closed database."),  # a cleanup after a failure
    psycopg.errors.InsufficientResources("insufficient resources"),
    psycopg.errors.OutOfMemory("out of memory"),
    psycopg.errors.IoError("could not write to file"),
    psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
]
DATA = [
    psycopg.errors.UniqueViolation("duplicate key value violates unique constraint"),
    # a value quoted in the message does not make it an outage: the SQLSTATE decides
    psycopg.errors.UniqueViolation('Key (dedup_id)=(no space left on device) already exists.'),
    psycopg.errors.StringDataRightTruncation("value too long for type character varying(36)"),
    sqlite_error(sqlite3.IntegrityError, "UNIQUE constraint failed: exchange_runs.dedup_id", 19),
]


@pytest.mark.parametrize("error", FULL, ids=lambda e: type(e).__name__)
def test_a_full_disk_is_a_disk_full_outage(error: Exception, tmp_path: Path) -> None:
    assert is_disk_full(error) and is_outage(error) and not is_data_error(error)
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        translated = db.translate(error, "a message")
    finally:
        db.dispose()
    assert isinstance(translated, StoreDiskFull)
    assert str(translated).startswith("the store's disk is full: a message was refused")


@pytest.mark.parametrize("error", OUTAGES, ids=lambda e: type(e).__name__)
def test_the_disk_or_server_refusing_is_an_outage_not_bad_data(error: Exception, tmp_path: Path) -> None:
    assert is_outage(error) and not is_data_error(error) and not is_disk_full(error)
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        translated = db.translate(error, "a write")
    finally:
        db.dispose()
    assert type(translated) is StoreError


@pytest.mark.parametrize("error", DATA, ids=lambda e: type(e).__name__)
def test_bad_data_stays_bad_data(error: Exception, tmp_path: Path) -> None:
    assert is_data_error(error) and not is_outage(error)
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        assert isinstance(db.translate(error, "a write"), StoreDataError)
    finally:
        db.dispose()
