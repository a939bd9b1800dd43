"""Talking to the database: connections and their per-backend settings, typed statements, the group committer,
the hot-path statements, clocks, fault points and statistics."""

from __future__ import annotations

from exchange._store.sql.backends import sqlite_file
from exchange._store.sql.clock import StoreClock
from exchange._store.sql.commits import Deferred
from exchange._store.sql.database import Database, describe, is_integrity_error
from exchange._store.sql.file_lock import try_lock, unlock
from exchange._store.sql.mail_statements import RUNS_CHANGED
from exchange._store.sql.pool import close_connection
from exchange._store.sql.spelling import fence_params
from exchange._store.sql.typed_sql import Cursor, Statement

__all__ = [
    "Cursor",
    "Database",
    "Deferred",
    "RUNS_CHANGED",
    "Statement",
    "StoreClock",
    "close_connection",
    "describe",
    "fence_params",
    "is_integrity_error",
    "sqlite_file",
    "try_lock",
    "unlock",
]
