"""``exchange_record_values``: the process values of the batch record, the ``[record]`` tags a
gateway sampled while a run ran (the sampler: :mod:`exchange._plant.record_values`).

Each run keeps its own rows (one per value kept, or gap), so a run's record reads one index range and
retention deletes them with the run like its steps (:mod:`exchange._store.runs.retention`). A sample
read once for several runs is written once per run: the rows are small (the sampler keeps a value
only when it changed, or once a ``keep_alive_ms``), and a run never points at rows another run owns.

:meth:`RecordValueTable.add` writes one sampler tick, every run's rows, in one transaction, and only
for the runs still active when it commits: a run that ended meanwhile gets nothing, so no value is
kept after a run's end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, exists, insert, select

from exchange._store import codec
from exchange._store import records as r
from exchange._store.sql import Database
from exchange._store.tables import record_values, runs

# One statement for every row of a tick (executemany), built once: the row goes in only while its run
# is active, judged by the run's primary key in the same statement (no list of ids to build or pad).
# The active statuses are parameters of each row: a list of them would be an expanding parameter,
# which executemany refuses.
_ACTIVE = {f"active_{i}": status for i, status in enumerate(r.ACTIVE_STATUSES)}
_COLUMNS = ("run_id", "tag", "at", "value", "quality", "interval_ms")
_INSERT_WHILE_ACTIVE = insert(record_values).from_select(
    list(_COLUMNS),
    select(*(bindparam(name, type_=record_values.c[name].type) for name in _COLUMNS)).where(
        exists().where(runs.c.id == bindparam("run_id", type_=runs.c.id.type),
                       runs.c.status.in_([bindparam(name) for name in _ACTIVE]))),
)


@dataclass(frozen=True)
class ValueSample:
    """One value kept for a run: ``value`` None and ``quality`` set for a gap (the read failed)."""

    run_id: str
    tag: str
    at: float  # store clock
    value: Any
    quality: str | None
    interval_ms: int


class RecordValueTable:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, samples: Sequence[ValueSample]) -> None:
        """Write ``samples`` (one tick of the sampler, any runs) in one transaction; the rows of a run
        no longer active are left out by the statement itself."""
        if not samples:
            return
        runs_count = len({s.run_id for s in samples})
        with self.db.transaction(f"the process values of {runs_count} run(s)") as conn:
            conn.execute(_INSERT_WHILE_ACTIVE, [_row(s) for s in samples])

    def of_run(self, run_id: str, limit: int = 1_000_000) -> list[ValueSample]:
        """The run's rows, by tag then time (the first ``limit`` of them)."""
        c = record_values.c
        query = (select(c.tag, c.at, c.value, c.quality, c.interval_ms).where(c.run_id == run_id)
                 .order_by(c.tag, c.at).limit(limit))
        with self.db.read() as conn:
            return [ValueSample(run_id, tag, float(at), None if value is None else codec.loads(value), quality,
                           int(interval_ms))
                    for tag, at, value, quality, interval_ms in conn.execute(query)]


def _row(sample: ValueSample) -> dict[str, Any]:
    value, quality = None, sample.quality
    if quality is None:
        try:
            value = codec.dumps(sample.value)
        except codec.NotJSON:  # NaN, infinity, a type JSON has no word for: kept as a gap that says so
            quality = f"not JSON: {type(sample.value).__name__}"
    return {"run_id": sample.run_id, "tag": sample.tag, "at": sample.at, "value": value, "quality": quality,
            "interval_ms": sample.interval_ms, **_ACTIVE}
