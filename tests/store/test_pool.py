"""The pool of raw connections for reads: bounded, a broken connection replaced, closed for good."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from exchange._store.sql.pool import ConnectionPool
from tests.waiting import wait_until

SIZE = 3


class Opened:
    """Real SQLite connections, counted: how many are open now and at most."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.open: set[sqlite3.Connection] = set()
        self.made = 0
        self.most_open = 0

    def connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False)
        with self.lock:
            self.made += 1
            self.open.add(conn)
            self.most_open = max(self.most_open, len(self.open))
        return conn

    def closed(self, conn: sqlite3.Connection) -> bool:
        try:
            conn.execute("SELECT 1")
        except sqlite3.ProgrammingError:  # "Cannot operate on a closed database"
            with self.lock:
                self.open.discard(conn)
            return True
        return False


def test_no_more_than_size_connections_at_once_and_each_reused(tmp_path: Path) -> None:
    opened = Opened(tmp_path / "pool.db")
    pool = ConnectionPool(opened.connect, SIZE)
    inside, release = threading.Semaphore(0), threading.Event()
    holding = [0]
    counted = threading.Lock()

    def read() -> None:
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            with counted:
                holding[0] += 1
                assert holding[0] <= SIZE
            inside.release()
            release.wait(30)
            with counted:
                holding[0] -= 1

    readers = [threading.Thread(target=read) for _ in range(SIZE * 4)]
    for t in readers:
        t.start()
    for _ in range(SIZE):
        assert inside.acquire(timeout=30)
    # The others wait for a connection: none gets in while SIZE are held.
    assert not inside.acquire(timeout=0.2)
    release.set()
    for t in readers:
        t.join(30)
    assert holding[0] == 0
    assert opened.made == SIZE and opened.most_open == SIZE
    pool.close()


def test_a_discarded_connection_is_closed_and_the_next_block_gets_a_new_one(tmp_path: Path) -> None:
    opened = Opened(tmp_path / "pool.db")
    pool = ConnectionPool(opened.connect, 1)
    with pool.connection() as first:
        pool.discard(first)
    assert opened.closed(first)
    with pool.connection() as second:
        assert second is not first and second.execute("SELECT 1").fetchone() == (1,)
    with pool.connection() as third:
        assert third is second  # a healthy one is handed out again
    assert opened.made == 2
    pool.close()


def test_close_closes_idle_connections_at_once_and_busy_ones_when_their_block_ends(tmp_path: Path) -> None:
    opened = Opened(tmp_path / "pool.db")
    pool = ConnectionPool(opened.connect, 2)
    with pool.connection() as idle:
        pass
    held, release, busy = threading.Event(), threading.Event(), []

    def hold() -> None:
        with pool.connection() as conn:
            busy.append(conn)
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(30)
    pool.close()
    assert opened.closed(idle)
    assert not opened.closed(busy[0])
    release.set()
    holder.join(30)
    wait_until(lambda: opened.closed(busy[0]), message="the busy connection closed when its block ended")
    # Every slot is still there, so a block after the close fails only at connecting, not waiting.
    for _ in range(3):
        with pool.connection() as conn:
            assert conn not in (idle, busy[0])
    pool.close()
