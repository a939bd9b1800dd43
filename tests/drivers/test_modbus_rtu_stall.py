"""A serial RTU device that stalls past a read's timeout and then answers: the late reply must never
be taken for the answer to a later request (issue 40).

RTU has no transaction id, and two reads of one register each get replies of the same shape: only
the line's timing can keep them apart. The device here (pymodbus's serial server on a socat pty
pair) hangs before answering one read for a chosen time and then answers it and, in order, whatever
came meanwhile. Every read made around it must give the register's own value with Good quality, or
a Bad quality; never another register's value.

The stalls swept run from just before the read's timeout to well past the timeout plus the unit's
first backoff step (the down-mark: after it the old driver sent the next request while the stalled
one was still queued). Each stall costs about a second, so a run samples a few of them, always
including one past the down-mark; the seed is printed and in every failure message.
``EXCHANGE_RTU_STALL_SWEEP=full`` runs them all; ``EXCHANGE_RTU_STALL_SEED=N`` repeats a sample.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._tags.service import TagService
from exchange._values import QualifiedValue, Quality
from tests.drivers.modbus_servers import ServerProcess, SocatPair, Unit

TIMEOUT_MS = 600  # late_reply_ms is left at its default: the same
DOWN_MS = 100  # reconnect_min_ms: how long a unit that did not answer is left alone first
STEP_MS = 50
# just before, at and just after the timeout, then past the timeout plus the down-mark; the longest
# (its reply comes up to ~100 ms after the stall, as pymodbus's server polls the port) stays well
# inside timeout_ms + late_reply_ms, the bound the driver keeps (line.py)
STALLS_MS = [TIMEOUT_MS + k * STEP_MS for k in range(-2, 5)]  # 500 ... 800
PAST_DOWN_MARK_MS = TIMEOUT_MS + DOWN_MS + 2 * STEP_MS  # 800: the old driver's next request went out under it
SAMPLED = 2  # stalls per run besides PAST_DOWN_MARK_MS
REGISTERS = 8


def value_of(offset: int) -> int:
    return 1000 + offset  # each register's own value: a wrong one names the register it came from


@pytest.fixture
def stalling(tmp_path: Path) -> Iterator[tuple[ServerProcess, TagService]]:
    pair = SocatPair(tmp_path).start()
    server = ServerProcess("serial", [Unit(3, {i: value_of(i) for i in range(REGISTERS)})],
                           serial_port=pair.server).start()
    device = {"driver": "modbus", "transport": "serial", "serial_port": pair.client, "baudrate": 19200,
              "unit_id": 3, "timeout_ms": TIMEOUT_MS, "reconnect_min_ms": DOWN_MS, "reconnect_max_ms": 200}
    tags = {f"[s]R{i}": {"device": "d3", "address": f"HR{i + 1}"} for i in range(REGISTERS)}
    svc = TagService(config_from_dict({"devices": {"d3": device}, "tags": tags}, env={}))
    try:
        yield server, svc
    finally:
        svc.close()
        server.stop()
        pair.stop()


def stalls_to_run() -> tuple[list[int], str]:
    if os.environ.get("EXCHANGE_RTU_STALL_SWEEP") == "full":
        return STALLS_MS, "full sweep"
    seed = int(os.environ.get("EXCHANGE_RTU_STALL_SEED") or random.randrange(1_000_000))
    others = [s for s in STALLS_MS if s != PAST_DOWN_MARK_MS]
    chosen = sorted(random.Random(seed).sample(others, SAMPLED) + [PAST_DOWN_MARK_MS])
    return chosen, f"EXCHANGE_RTU_STALL_SEED={seed}"


def test_a_reply_that_outlives_its_timeout_never_answers_a_later_read(
    stalling: tuple[ServerProcess, TagService],
) -> None:
    server, svc = stalling
    stalls, how = stalls_to_run()
    print(f"stalls {stalls} ms ({how})")
    seen: list[str] = []

    def read(offset: int, stall_ms: int) -> QualifiedValue:
        value = svc.read_one(f"[s]R{offset}")
        seen.append(f"{stall_ms} ms: R{offset} -> {value.quality.value} {value.value}")
        if value.quality is Quality.GOOD:
            assert value.value == value_of(offset), f"a late reply answered a later read ({how}): {seen}"
        return value

    def settle(stall_ms: int) -> None:
        # the line is back: every register reads Good again (deadline: the unit's backoff and the
        # line's silence after the stall, a few seconds at most)
        deadline = time.monotonic() + 15
        while not all(read(offset, stall_ms).quality is Quality.GOOD for offset in range(REGISTERS)):
            assert time.monotonic() < deadline, f"the line did not come back after a {stall_ms} ms stall: {seen}"
            time.sleep(0.01)  # a poll interval: the unit may be backing off

    settle(0)
    for number, stall_ms in enumerate(stalls):
        stalled = 1 + number % (REGISTERS - 1)  # not R0, the first one read after it
        server.stall(stalled, stall_ms / 1000)
        first = read(stalled, stall_ms)
        if stall_ms >= TIMEOUT_MS + STEP_MS:
            assert not first.quality.is_good, f"a {stall_ms} ms late reply was taken ({how}): {seen}"
        # the next reads, of other registers of the same shape, go out as soon as the driver lets them
        settle(stall_ms)
    requests: list[Any] = server.received()
    assert all(r.function_code == 3 and r.count == 1 for r in requests)
