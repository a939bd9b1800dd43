"""The process values of the batch record: the ``[record]`` tags, sampled while runs execute here.

One thread per gateway (and per ``exchange run``, and ``running_engine``) reads, every
``interval_ms``, the union of the tags that the runs executing in this process want (the global
``[record] tags`` and their workflow's ``[record.WORKFLOW] tags``), in one
:meth:`~exchange._tags.service.TagService.read`: each device gets one batched request per interval,
however many runs want its tags. Each run then keeps, for each of its tags, a row when:

- it is the run's first reading of the tag (in this process);
- the value changed since the row it kept last (a Good value), or the read went from Good to not
  (a *gap*: value null, the quality kept) or back;
- ``keep_alive_ms`` passed since that row, so a flat line (or a long gap) is evidenced.

The rows of one interval, every run's, go to the store in one transaction
(:meth:`~exchange._store.runs.record_values.RecordValueTable.add`), which leaves out a run that
ended meanwhile: nothing is kept after a run's end. The time of a row is the store's clock when the
sampler looked which runs execute here, right before the read (so it lies within the run's span:
:meth:`~exchange._engine.operator.local_runs.LocalRuns.workflows`). A failed read is a gap, never a
failed run; a store that does not answer loses that interval's rows (logged once a minute) and the
next interval compares with what was stored.

A run is sampled while it executes in this process: from its first interval after its execution
started (so within ``interval_ms`` of it) until it ends or is suspended; a run waiting to be
claimed, or resumed after a crash elsewhere, is sampled where it executes.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exchange._config_record import RecordConfig
from exchange._engine import RepeatedLog
from exchange._store import ValueSample
from exchange._values.model import QualifiedValue, Quality
from exchange.errors import ExchangeError, StoreError

if TYPE_CHECKING:
    from exchange._engine import Runtime
    from exchange._tags.service import TagService

log = logging.getLogger(__name__)
STORE_FAILED = RepeatedLog(log)
GAP_TEXT_MAX = 200  # the store's column


@dataclass(frozen=True)
class _Kept:
    """The row a run kept last for a tag."""

    good: bool
    value: Any
    at: float


class ValueSampler:
    """Samples ``config``'s tags for the runs of ``runtime`` executing in this process, through
    ``tags`` (the runtime's TagService), on a thread of its own (:meth:`start`, :meth:`stop`)."""

    def __init__(self, runtime: Runtime, tags: TagService, config: RecordConfig) -> None:
        self.runtime = runtime
        self.tags = tags
        self.config = config
        self.interval_seconds = config.interval_ms / 1000
        self.keep_alive_seconds = config.keep_alive_ms / 1000
        self._kept: dict[tuple[str, str], _Kept] = {}  # (run id, tag) -> its last row
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # What the bench and the tests look at: intervals sampled, tags read, rows sent, and the
        # seconds spent reading and storing.
        self.ticks = 0
        self.reads = 0
        self.rows = 0
        self.read_seconds = 0.0
        self.store_seconds = 0.0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="exchange-record-values", daemon=True)
        self._thread.start()
        log.info("record: sampling every %s ms", self.config.interval_ms)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # a bug must not end the sampling of every later run
                log.exception("record: sampling the process values failed; trying again next interval")
            due += self.interval_seconds
            due = max(due, time.monotonic())  # a slow read skips the intervals it missed: never a burst
            self._stop.wait(max(0.0, due - time.monotonic()))

    def tick(self) -> int:
        """Sample once: read the tags the runs executing here want, keep what changed; the rows
        sent to the store (a run that ended meanwhile gets none of its own)."""
        at, local = self.runtime.local_runs.workflows(self.runtime.store.clock.now)
        wanted = {run_id: paths for run_id, workflow in local.items() if (paths := self.config.tags_for(workflow))}
        for key in [key for key in self._kept if key[0] not in wanted]:
            del self._kept[key]  # ended or gone elsewhere: a return here starts afresh
        if not wanted:
            return 0
        union = sorted({path for run_paths in wanted.values() for path in run_paths})
        began = time.perf_counter()
        readings = dict(zip(union, self._read(union), strict=True))
        self.read_seconds += time.perf_counter() - began
        self.ticks += 1
        self.reads += len(union)
        samples: list[ValueSample] = []
        kept: dict[tuple[str, str], _Kept] = {}
        for run_id, run_paths in wanted.items():
            for path in run_paths:
                reading = readings[path]
                row = _Kept(reading.quality.is_good, reading.value, at)
                if not self._keeps((run_id, path), row):
                    continue
                kept[(run_id, path)] = row
                samples.append(ValueSample(run_id, path, at, reading.value,
                                           None if row.good else _gap(reading), self.config.interval_ms))
        if not samples:
            return 0
        began = time.perf_counter()
        try:
            self.runtime.store.record_values.add(samples)
        except StoreError as exc:
            STORE_FAILED.log("record: the process values of %s run(s) could not be stored: %s", len(wanted), exc)
            return 0
        finally:
            self.store_seconds += time.perf_counter() - began
        self._kept.update(kept)
        self.rows += len(samples)
        return len(samples)

    def _read(self, paths: list[str]) -> list[QualifiedValue]:
        try:
            return self.tags.read(paths)
        except ExchangeError as exc:  # a device refused the whole request: a gap for each of them
            return [QualifiedValue.bad(Quality.ERROR, error=str(exc)) for _ in paths]

    def _keeps(self, key: tuple[str, str], row: _Kept) -> bool:
        last = self._kept.get(key)
        if last is None or last.good != row.good or row.at - last.at >= self.keep_alive_seconds:
            return True
        return row.good and (type(row.value) is not type(last.value) or row.value != last.value)


def _gap(reading: QualifiedValue) -> str:
    """What a gap keeps of a failed read: its quality, and why when the driver said (bounded)."""
    text = reading.quality.value if reading.error is None else f"{reading.quality.value}: {reading.error}"
    return text if len(text) <= GAP_TEXT_MAX else text[:GAP_TEXT_MAX - 3] + "..."


def start_sampler(runtime: Runtime) -> ValueSampler | None:
    """The sampler of ``runtime``'s ``[record]`` tags, started; None when none is configured."""
    config = runtime.config.record
    if not config.configured:
        return None
    from exchange.workflows._services import TAGS

    sampler = ValueSampler(runtime, runtime.services.get(TAGS), config)
    sampler.start()
    return sampler
