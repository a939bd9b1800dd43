"""The streams' fan-out: many streams of one topic share one poller; it stops with the last stream or
the final value; a first read's error reaches the caller."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from exchange._api.fanout import HEARTBEAT, Fanout
from exchange.errors import UnknownRun

WATCHERS = 20


def test_twenty_streams_of_one_topic_share_one_read_per_interval() -> None:
    counter = itertools.count()

    def read() -> int:
        return next(counter)

    async def main() -> tuple[list[list[int]], int]:
        fanout = Fanout(interval_seconds=0.01, heartbeat_seconds=5)

        async def stream() -> list[int]:
            seen: list[int] = []
            async for value in fanout.watch("tank", read, lambda value: value >= 10):
                seen.append(value)
            return seen

        seen = await asyncio.wait_for(asyncio.gather(*(stream() for _ in range(WATCHERS))), 20)
        return seen, fanout.reads

    seen, reads = asyncio.run(main())
    assert reads <= 12  # one first read and one per interval until 10, not one per stream (200+)
    for values in seen:
        assert values == sorted(set(values)) and values[-1] == 10  # in order, no repeats, ended at the final


def test_the_poller_stops_with_the_last_stream_and_values_that_did_not_change_are_not_resent() -> None:
    reads: list[int] = []

    def read() -> str:
        reads.append(1)
        return "steady" if len(reads) < 5 else "changed"

    async def main() -> tuple[list[object], int, int]:
        fanout = Fanout(interval_seconds=0.01, heartbeat_seconds=5)
        got: list[object] = []
        async for value in fanout.watch("line1", read, lambda _value: False):
            got.append(value)
            if value == "changed":
                break
        after_leaving = len(reads)
        await asyncio.sleep(0.1)  # ten intervals: a poller still running would read again
        return got, after_leaving, len(reads)

    got, after_leaving, total = asyncio.run(main())
    assert got == ["steady", "changed"]
    assert total == after_leaving


def test_a_quiet_topic_sends_heartbeats_and_a_failed_first_read_reaches_the_caller() -> None:
    def missing() -> None:
        raise UnknownRun("0000")

    async def main() -> list[object]:
        fanout = Fanout(interval_seconds=0.01, heartbeat_seconds=0.05)
        got: list[object] = []
        async for value in fanout.watch("quiet", lambda: "same", lambda _value: False):
            got.append(value)
            if len(got) == 3:
                break
        with pytest.raises(UnknownRun):
            async for _value in fanout.watch("gone", missing, lambda _value: False):
                pass
        return got

    assert asyncio.run(main()) == ["same", HEARTBEAT, HEARTBEAT]
