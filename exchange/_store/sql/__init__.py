"""Talking to the database: connections and their per-backend settings, typed statements, the group committer,
the hot-path statements, clocks, fault points and statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._doors import lazy_door

if TYPE_CHECKING:
    from exchange._store.sql.backends import sqlite_file
    from exchange._store.sql.chain import event_entry, link_hash, step_entry
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
    "event_entry",
    "fence_params",
    "is_integrity_error",
    "link_hash",
    "sqlite_file",
    "step_entry",
    "try_lock",
    "unlock",
]

if not TYPE_CHECKING:  # a type checker reads the imports above; at run time each name comes on first use
    __getattr__ = lazy_door(__name__, {
        "exchange._store.sql.backends": ("sqlite_file",),
        "exchange._store.sql.chain": ("event_entry", "link_hash", "step_entry"),
        "exchange._store.sql.clock": ("StoreClock",),
        "exchange._store.sql.commits": ("Deferred",),
        "exchange._store.sql.database": ("Database", "describe", "is_integrity_error"),
        "exchange._store.sql.file_lock": ("try_lock", "unlock"),
        "exchange._store.sql.mail_statements": ("RUNS_CHANGED",),
        "exchange._store.sql.pool": ("close_connection",),
        "exchange._store.sql.spelling": ("fence_params",),
        "exchange._store.sql.typed_sql": ("Cursor", "Statement"),
    }, globals())
