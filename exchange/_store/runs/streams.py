"""``exchange_streams``: the values runs append with ``rt.writeStream`` (append-only, ordered).

Each value is keyed by the run, the stream's key and the sequence number of the step that wrote it,
so a write repeated by a replay (its step not yet recorded when the gateway died) finds its row and
adds nothing: every value is in the stream exactly once, in the order the run wrote them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select

from exchange._store import codec
from exchange._store.records import Fence
from exchange._store.sql import Database
from exchange._store.tables import streams

READ_LIMIT_MAX = 10_000


class StreamTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def append(self, fence: Fence, key: str, seq: int, value_json: str) -> bool:
        """Add the value the run's step ``seq`` writes to stream ``key`` (for the execution holding
        ``fence``); False when that step's value is already there."""
        where = (streams.c.run_id == fence.run_id, streams.c.key == key, streams.c.seq == seq)
        # Read first, outside the write: a replay of a write that happened opens no write at all
        # (one transaction would make every replay a write, e.g. another crash point of the sweep).
        with self.db.read() as conn:
            if conn.execute(select(streams.c.seq).where(*where)).first() is not None:
                return False
        with self.db.transaction(f"the stream {key!r}", fence=fence) as conn:
            conn.execute(insert(streams).values(run_id=fence.run_id, key=key, seq=seq, value=value_json,
                                                at=self.db.clock.now()))
        return True

    def read(self, run_id: str, key: str, after_seq: int, limit: int) -> list[dict[str, Any]]:
        """The stream's values after ``after_seq``, oldest first: ``{"seq", "value", "at"}``."""
        query = (select(streams.c.seq, streams.c.value, streams.c.at)
                 .where(streams.c.run_id == run_id, streams.c.key == key, streams.c.seq > after_seq)
                 .order_by(streams.c.seq).limit(limit))
        with self.db.read() as conn:
            return [{"seq": int(seq), "value": codec.loads(value), "at": float(at)}
                    for seq, value, at in conn.execute(query)]
