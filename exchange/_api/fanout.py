"""One store read per interval per watched thing, however many streams watch it.

Fifty consoles open on one run's page used to mean fifty reads of that run every interval; now the
first stream of a topic (a run, or a listing's filters) starts one poller, every later stream of the
same topic shares what it reads, and the poller stops with the last stream. A value that did not
change is not sent again; a stream that is slower than the changes only skips to the newest value.
"""

from __future__ import annotations

import asyncio
import logging
import operator
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

log = logging.getLogger(__name__)

HEARTBEAT = object()  # yielded when nothing changed for ``heartbeat_seconds``


@dataclass
class _Topic:
    ready: asyncio.Future[None]  # done once the first read answered (or failed)
    value: Any = None
    final: bool = False
    version: int = 0
    watchers: int = 0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    poller: asyncio.Task[None] | None = None


class Fanout:
    """Shared pollers for server-sent event streams (one per application and event loop)."""

    def __init__(self, interval_seconds: float, heartbeat_seconds: float) -> None:
        self.interval_seconds = interval_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self._topics: dict[Hashable, _Topic] = {}
        self.reads = 0  # store reads made by pollers and first reads (for tests and benches)

    async def watch(
        self, key: Hashable, read: Callable[[], Any], is_final: Callable[[Any], bool],
        differs: Callable[[Any, Any], bool] = operator.ne, interval_seconds: float | None = None,
    ) -> AsyncIterator[Any]:
        """The topic's value now, then each new value (one that ``differs`` from the last sent), or
        :data:`HEARTBEAT` after a quiet ``heartbeat_seconds``, until a value ``is_final`` says is
        the last. The first read's errors reach the caller (e.g. UnknownRun, before any event is
        sent). Every stream of one ``key`` must pass the same functions; ``interval_seconds`` (the
        fanout's by default) is the poller's, set by the topic's first stream."""
        topic = self._topics.get(key)
        if topic is None:  # the first stream reads; those joining meanwhile wait for its answer
            topic = self._topics[key] = _Topic(ready=asyncio.get_running_loop().create_future())
            try:
                topic.value = await run_in_threadpool(read)
                topic.final = is_final(topic.value)
            except BaseException as exc:
                del self._topics[key]
                topic.ready.set_exception(exc)
                topic.ready.exception()  # retrieved: no "never retrieved" warning when nobody waits
                raise
            finally:
                self.reads += 1
            topic.ready.set_result(None)
        else:
            await asyncio.shield(topic.ready)
        topic.watchers += 1
        if topic.poller is None and not topic.final:
            topic.poller = asyncio.create_task(
                self._poll(key, topic, read, is_final, differs, interval_seconds or self.interval_seconds),
                name=f"fanout {key!r}")
        try:
            seen = topic.version
            yield topic.value
            while not (topic.final and seen == topic.version):
                if not await self._changed_since(topic, seen):
                    yield HEARTBEAT
                    continue
                seen = topic.version
                yield topic.value
        finally:
            topic.watchers -= 1
            if topic.watchers == 0 and self._topics.get(key) is topic:
                del self._topics[key]
                if topic.poller is not None:
                    topic.poller.cancel()

    async def _changed_since(self, topic: _Topic, seen: int) -> bool:
        """Whether the topic got a new value within the heartbeat interval (never holding the
        topic's lock while a stream's client is slow)."""
        async with topic.changed:
            try:
                await asyncio.wait_for(topic.changed.wait_for(lambda: topic.version != seen), self.heartbeat_seconds)
            except TimeoutError:
                return False
        return True

    async def _poll(self, key: Hashable, topic: _Topic, read: Callable[[], Any], is_final: Callable[[Any], bool],
                    differs: Callable[[Any, Any], bool], interval_seconds: float) -> None:
        while topic.watchers > 0 and not topic.final:
            await asyncio.sleep(interval_seconds)
            try:
                value = await run_in_threadpool(read)
            except Exception as exc:  # the store is away: the streams stay open and catch up later
                log.warning("stream %r: reading failed, trying again: %s", key, exc)
                continue
            self.reads += 1
            if differs(topic.value, value):
                async with topic.changed:
                    topic.value = value
                    topic.final = is_final(value)
                    topic.version += 1
                    topic.changed.notify_all()
