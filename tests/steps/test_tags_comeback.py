"""A device that comes back is read at once by whoever asks (issue 40, item 8).

A pymodbus server (in its own process, killed like a power cut and started again on its port) and a
device whose reconnect backoff is a minute long: while the device was away the driver stopped
trying, and background polls keep to that backoff. An explicit read (a workflow's ``tags.read``)
and the RESUME of a run held on a bad read try the link at once and succeed, well inside the minute.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exchange._values import Quality
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from exchange.workflows.steps import tags
from tests.drivers.modbus_servers import ServerProcess, Unit
from tests.steps.conftest import StepEngine
from tests.waiting import wait_until

BACKOFF_MS = 60_000  # reconnect_min_ms = reconnect_max_ms: a retry paced by it would take a minute
PROMPT_S = 15  # "at once": far inside the backoff, with room for a loaded machine
LEVEL = "[c]Tank/Level"


class LevelUnknown(Exception):
    """The level could not be read (a module-level class: it is recorded and raised again as itself)."""


@step(name="comeback.level")
def level() -> int:
    reading = tags.read(LEVEL)
    if reading["quality"] != "Good":
        raise LevelUnknown(f"level not read: {reading['quality']}")
    return int(reading["value"])


@workflow(name="comeback.batch", on_step_error="hold")
def batch() -> int:
    return level()


@pytest.fixture
def plc() -> Iterator[ServerProcess]:
    server = ServerProcess("tcp", [Unit(1, {0: 42})]).start()
    yield server
    server.stop()


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], plc: ServerProcess) -> StepEngine:
    device = {"driver": "modbus", "host": "127.0.0.1", "port": plc.port, "unit_id": 1, "timeout_ms": 1000,
              "reconnect_min_ms": BACKOFF_MS, "reconnect_max_ms": BACKOFF_MS}
    return make_engine(devices={"plc": device}, tags={LEVEL: {"device": "plc", "address": "HR1"}})


def power_cycle_and_miss(plc: ServerProcess, engine: StepEngine) -> Any:
    """The device goes away and a background read finds it gone (the backoff starts); it comes
    back. Returns the runtime's tag service."""
    service = tags.tag_service()
    assert service.read_one(LEVEL).value == 42
    plc.stop()
    assert service.read_one(LEVEL).quality is Quality.BAD_NOT_CONNECTED
    plc.start()
    return service


def test_an_explicit_read_tries_a_device_that_came_back_at_once(plc: ServerProcess, engine: StepEngine) -> None:
    service = power_cycle_and_miss(plc, engine)
    # a poll (a trigger's, a wait's later look) keeps to the backoff: the dead device is not hammered
    assert service.read_one(LEVEL).quality is Quality.BAD_NOT_CONNECTED
    started = time.monotonic()
    reading = tags.read(LEVEL)  # a workflow's explicit read, outside a run here
    assert (reading["quality"], reading["value"]) == ("Good", 42)
    assert time.monotonic() - started < PROMPT_S
    assert service.read_one(LEVEL).value == 42  # and the link is up for the polls again


def test_resume_of_a_run_held_on_a_bad_read_reads_the_device_that_came_back(
    plc: ServerProcess, engine: StepEngine,
) -> None:
    rt = getWorkflows()
    service = tags.tag_service()
    assert service.read_one(LEVEL).value == 42
    plc.stop()
    run_id = rt.start("comeback.batch", {})
    held = wait_until(lambda: (v := rt.getRun(run_id))["state"] == "HELD" and v["held_on"] is not None and v, 20,
                      message=lambda: f"run {run_id} held: {rt.getRun(run_id)['state']}")
    assert "level not read: Bad_NotConnected" in held["held_on"]["error"]["message"]
    plc.start()
    assert service.read_one(LEVEL).quality is Quality.BAD_NOT_CONNECTED  # the backoff still holds for polls
    started = time.monotonic()
    rt.sendCommand(run_id, "RESUME", "the PLC is back", actor="anna")
    view = engine.runtime.wait_for(run_id, PROMPT_S)
    assert (view["status"], view["result"]) == ("SUCCESS", 42), view.get("held_on") or view.get("error")
    assert time.monotonic() - started < PROMPT_S
