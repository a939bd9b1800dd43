"""New SQLite stores for tests, copied from one migrated per process.

A store's first open applies every schema migration, one committed transaction each: 0.3-0.4 s of
a loaded 2-core machine, paid by hundreds of tests whose subject is not the migration. A copy of a
store migrated once by this process is the same file as one a gateway has opened once (nothing in
a new store is particular to it), for the price of a file copy. Tests of what the first open or an
upgrade does take an empty path (``empty_store_url``, or ``ExchangeEnv.create(seeded=False)``).
PostgreSQL has the same through ``CREATE DATABASE ... TEMPLATE`` (``tests/conftest.py``).
"""

from __future__ import annotations

import atexit
import shutil
import sqlite3
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
_template: Path | None = None


def _template_file() -> Path:
    global _template
    with _lock:
        if _template is None:
            from exchange._store.store import Store

            folder = Path(tempfile.mkdtemp(prefix="exchange-sqlite-template-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "template.db"
            Store(f"sqlite:///{path}").close()
            # The last connection's close checkpoints the WAL into the file; say so, as the copy
            # takes the main file alone.
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
            _template = path
        return _template


def seeded_sqlite_url(path: Path) -> str:
    """The URL of a new SQLite store at ``path`` holding the current schema (its folder made). A
    file already there is left as it is."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_template_file(), path)
    return f"sqlite:///{path}"
