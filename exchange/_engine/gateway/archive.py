"""Archiving batch records before retention deletes their runs (``[retention] archive_dir``).

Each finished run's record (``Runtime.record``, the JSON ``exchange record --json`` prints) is
written to ``<archive_dir>/<run id>.json`` as a new file renamed over the old name: written to
``.<run id>.json.tmp``, fsynced, renamed; the directory is fsynced once after a batch's renames and
before the batch's runs are deleted, so a run is deleted only once its record is on disk.

A crash between the archive and the delete leaves the run in the store and its record in the
directory: the next pass writes the same record again over it (a finished run's record does not
change) and deletes the run. A run retried after it was archived (it is no longer finished) is not
deleted; when it finishes and goes, its newer record replaces the older one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from exchange.errors import ConfigError

SUFFIX = ".json"


def check_archive_dir(path: str) -> None:
    """ConfigError naming ``[retention] archive_dir`` unless ``path`` is a directory this process
    can create files in (checked by creating and removing one)."""
    where = "[retention] archive_dir"
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"{where} {path!r} is not a directory" if folder.exists()
                          else f"{where} {path!r} does not exist (create it, writable by the gateway's user)")
    try:
        fd, probe = tempfile.mkstemp(prefix=".exchange-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(f"{where} {path!r} is not writable by this process: {exc.strerror or exc}") from None


def record_text(record: dict[str, Any]) -> bytes:
    """The archived bytes of a record: its JSON as ``exchange record --json`` prints it, one line."""
    return (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")


def archive_path(folder: str, run_id: str) -> Path:
    return Path(folder) / f"{run_id}{SUFFIX}"


def write_record(folder: str, run_id: str, data: bytes) -> Path:
    """Write ``data`` as ``<folder>/<run_id>.json`` through a temporary file, fsynced then renamed
    over it (the directory is not fsynced here: :func:`sync_dir` once per batch). OSError."""
    final = archive_path(folder, run_id)
    tmp = final.with_name(f".{final.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk: leave no half file behind
        raise
    return final


def sync_dir(folder: str) -> None:
    """fsync the directory, so that the renames into it survive a power cut. OSError."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
