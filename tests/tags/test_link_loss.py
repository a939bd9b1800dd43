"""A lost link ridden out and a write in doubt resolved, on all three protocols against real servers.

A run writes to each protocol's simulator while the server is stopped and started again (link loss:
the run waits inside its step and succeeds, or fails past ``comm_timeout_s`` naming the device, or
is cancelled while it waits); the TagService writes through a proxy that loses the answer to the
write (tests/netfaults.py). Writes are counted at the server: a write is never applied twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._tags import delivery
from exchange._tags.service import TagService
from exchange.errors import WriteInDoubt
from exchange.workflows.testing import running_engine
from tests.drivers.contract import DeviceUnderTest
from tests.drivers.dut_enip import enip_dut  # noqa: F401
from tests.drivers.dut_modbus import modbus_dut  # noqa: F401
from tests.drivers.dut_opcua import opcua_dut  # noqa: F401
from tests.netfaults import AnswerDropper
from tests.tags.heard import Heard
from tests.waiting import wait_until

PROTOCOLS = ["modbus_dut", "opcua_dut", "enip_dut"]
OUTAGE_S = 5.0  # the network blip


@pytest.fixture(params=PROTOCOLS)
def dut(request: pytest.FixtureRequest) -> DeviceUnderTest:
    value: DeviceUnderTest = request.getfixturevalue(request.param)
    return value


def plant_config(dut: DeviceUnderTest, *, port: int | None = None, **device: Any) -> dict[str, Any]:
    """Config with tags Int16 and Bool on the device under test (``port``: through a proxy)."""
    settings = {**dut.settings, **device}
    if port is not None:
        if dut.protocol == "opcua":
            settings["url"] = f"opc.tcp://127.0.0.1:{port}/"
        else:
            settings["port"] = port
    tags = {}
    for name, key in (("Int16", "int16"), ("Bool", "bool")):
        point = dut.points[key]
        tag: dict[str, Any] = {"device": "plc", "address": point.address}
        if dut.protocol == "enip" and point.data_type is not None:
            tag["type"] = point.data_type.value
        tags[f"[t]{name}"] = tag
    return {"devices": {"plc": settings}, "tags": tags}


def tag_service(dut: DeviceUnderTest, *, port: int | None = None, **device: Any) -> TagService:
    """A TagService with tags Int16 and Bool on the device under test (``port``: through a proxy)."""
    return TagService(config_from_dict(plant_config(dut, port=port, **device), env={}))


@contextmanager
def plant_runtime(dut: DeviceUnderTest, tmp_path: Path, **device: Any) -> Iterator[Any]:
    """A running engine whose workflow ``ll.write(value)`` writes ``[t]Int16`` on the device."""
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "ll_app.py").write_text(WRITE_APP)
    config = {"store": {"url": f"sqlite:///{tmp_path}/exchange.db"}, "apps": {"paths": [str(apps)]},
              "engine": {"progress_interval_ms": 0}, **plant_config(dut, **device)}
    with running_engine(config, base_dir=tmp_path) as rt:
        yield rt


WRITE_APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import tags

@workflow(name="ll.write")
def write(value):
    tags.write("[t]Int16", value)
    return "written"
"""


def progress_of(rt: Any, run_id: str) -> str:
    progress = rt.getRun(run_id)["progress"]
    return str(progress["message"]) if progress else ""


def write_request(dut: DeviceUnderTest, key: str) -> Any:
    """A matcher for the bytes of a write request to the point ``key``, in the device's protocol."""
    address = dut.points[key].address
    if dut.protocol == "modbus":
        return lambda data: len(data) >= 8 and data[7] in (5, 6, 15, 16)
    if dut.protocol == "opcua":
        return lambda data: b"\x01\x00\xa1\x02" in data  # WriteRequest (ns=0;i=673), four-byte NodeId
    name = address.encode()
    words = (2 + len(name) + len(name) % 2) // 2
    return lambda data: bytes([0x4D, words, 0x91, len(name)]) + name in data  # CIP Write Tag


@pytest.fixture
def outage() -> Iterator[list[Any]]:
    """Servers a test stopped are started again at the end, whatever happened."""
    stopped: list[Any] = []
    yield stopped
    for server in stopped:
        server.start()


def test_the_default_comm_timeout_is_sixty_seconds(dut: DeviceUnderTest) -> None:
    svc = tag_service(dut)
    try:
        assert svc.comm_timeout_s("plc") == delivery.DEFAULT_COMM_TIMEOUT_S == 60.0
    finally:
        svc.close()


def test_a_five_second_link_loss_is_ridden_out_and_the_run_succeeds(
    dut: DeviceUnderTest, outage: list[Any], tmp_path: Path
) -> None:
    address = dut.points["int16"].address
    before = dut.server.write_count(address)
    with plant_runtime(dut, tmp_path) as rt:
        dut.server.stop()
        outage.append(dut.server)
        lost_at = time.monotonic()
        run_id = rt.start("ll.write", {"value": 1234})
        wait_until(lambda: "waiting for device 'plc'" in progress_of(rt, run_id), timeout_s=10,
                   message="the run's progress to name the device it waits for")
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - lost_at)))  # the outage lasts 5 s
        assert rt.getRun(run_id)["status"] == "RUNNING", "the run ended during the outage"
        dut.server.start()
        outage.clear()
        view = rt.waitFor(run_id, 30)
    assert view["status"] == "SUCCESS", view["error"]
    assert dut.server.get(address) == 1234
    assert dut.server.write_count(address) == before + 1
    (step,) = view["steps"]
    assert step["name"] == "tags.write" and step["attempts"] == 1  # waited inside the step, never retried
    writes = [e["payload"] for e in view["events"] if e["kind"] == "tag_write"]
    assert [(w["tag"], w["confirmed_by"]) for w in writes] == [("[t]Int16", "acknowledged")]


def test_a_link_lost_past_comm_timeout_fails_the_run_naming_the_device(
    dut: DeviceUnderTest, outage: list[Any], tmp_path: Path
) -> None:
    address = dut.points["int16"].address
    before = dut.server.write_count(address)
    with plant_runtime(dut, tmp_path, comm_timeout_s=1.5) as rt:
        dut.server.stop()
        outage.append(dut.server)
        started = time.monotonic()
        view = rt.waitFor(rt.start("ll.write", {"value": 77}), 30)
        assert time.monotonic() - started >= 1.5
        dut.server.start()
        outage.clear()
    assert view["status"] == "ERROR"
    assert view["error"]["type"].endswith("CommunicationError")
    message = view["error"]["message"]
    assert "device 'plc'" in message and "[t]Int16" in message and "comm_timeout_s" in message
    failed = [e["payload"] for e in view["events"] if e["kind"] == "tag_write_failed"]
    assert [(f["tag"], f["quality"]) for f in failed] == [("[t]Int16", "Bad_NotConnected")]
    assert dut.server.write_count(address) == before


def test_a_cancel_ends_the_wait_for_a_lost_link(dut: DeviceUnderTest, outage: list[Any], tmp_path: Path) -> None:
    address = dut.points["int16"].address
    before = dut.server.write_count(address)
    with plant_runtime(dut, tmp_path) as rt:
        dut.server.stop()
        outage.append(dut.server)
        run_id = rt.start("ll.write", {"value": 5})
        wait_until(lambda: "waiting for device 'plc'" in progress_of(rt, run_id), timeout_s=10,
                   message="the run's progress to name the device it waits for")
        rt.cancel(run_id, reason="operator")
        view = rt.waitFor(run_id, 10)
        dut.server.start()
        outage.clear()
    assert view["status"] == "CANCELLED"
    assert dut.server.write_count(address) == before


@pytest.mark.parametrize(
    ("forward", "resolution", "confirmed_by"),
    [
        # the device applied the write and its answer was lost: held, never resent
        (True, delivery.HELD, "readback"),
        # the request itself was lost: the device does not hold the value, so it is sent again once
        (False, delivery.SENT_AGAIN, "acknowledged"),
    ],
    ids=["applied-answer-lost-held", "request-lost-sent-again"],
)
def test_a_write_in_doubt_is_read_back_and_sent_at_most_once_more(
    dut: DeviceUnderTest, forward: bool, resolution: str, confirmed_by: str
) -> None:
    proxy = AnswerDropper(dut.server.port if dut.protocol != "opcua" else _opcua_port(dut))
    svc = tag_service(dut, port=proxy.port, comm_timeout_s=30)
    heard = Heard()
    address = dut.points["int16"].address
    try:
        svc.read(["[t]Int16"])
        before = dut.server.write_count(address)
        proxy.arm(write_request(dut, "int16"), forward=forward)
        svc.write(["[t]Int16"], [-321], listener=heard, hooks=heard.hooks())
        assert proxy.fired.is_set()
        assert dut.server.get(address) == -321
        assert dut.server.write_count(address) == before + 1  # applied once: never resent / the resend only
        assert heard.events == [
            ("in_doubt", ["[t]Int16"], resolution),
            ("written", ["[t]Int16"], confirmed_by),
        ]
    finally:
        svc.close()
        proxy.close()


def test_a_command_bit_in_doubt_is_never_sent_again(dut: DeviceUnderTest) -> None:
    proxy = AnswerDropper(dut.server.port if dut.protocol != "opcua" else _opcua_port(dut))
    svc = tag_service(dut, port=proxy.port, comm_timeout_s=30)
    heard = Heard()
    address = dut.points["bool"].address
    before = dut.server.write_count(address)
    try:
        svc.read(["[t]Bool"])
        proxy.arm(write_request(dut, "bool"), forward=True)
        with pytest.raises(WriteInDoubt) as caught:
            svc.write(["[t]Bool"], [True], listener=heard, hooks=heard.hooks())
        message = str(caught.value)
        assert "device 'plc'" in message and "[t]Bool" in message and 'on_doubt is "fail"' in message
        assert dut.server.write_count(address) == before + 1  # applied once; not resent
        assert heard.events == [("in_doubt", ["[t]Bool"], delivery.NEVER_RESENT)]
    finally:
        svc.close()
        proxy.close()


def test_a_write_sent_once_is_not_sent_again_when_the_device_does_not_hold_it(dut: DeviceUnderTest) -> None:
    """``resend_in_doubt=False`` (a write by hand): the request is lost, the read-back finds the old
    value, and the write is reported in doubt instead of being sent a second time."""
    proxy = AnswerDropper(dut.server.port if dut.protocol != "opcua" else _opcua_port(dut))
    svc = tag_service(dut, port=proxy.port, comm_timeout_s=30)
    heard = Heard()
    address = dut.points["int16"].address
    try:
        svc.read(["[t]Int16"])
        held, before = dut.server.get(address), dut.server.write_count(address)
        proxy.arm(write_request(dut, "int16"), forward=False)
        with pytest.raises(WriteInDoubt) as caught:
            svc.deliver(svc.prepare_write(["[t]Int16"], [held + 1]), listener=heard, hooks=heard.hooks(),
                        resend_in_doubt=False)
        assert proxy.fired.is_set()
        assert "[t]Int16" in str(caught.value) and "not sent again" in str(caught.value)
        assert dut.server.write_count(address) == before and dut.server.get(address) == held
        assert heard.events == [("in_doubt", ["[t]Int16"], delivery.NOT_RESENT)]
    finally:
        svc.close()
        proxy.close()


def _opcua_port(dut: DeviceUnderTest) -> int:
    url = str(dut.settings["url"])
    return int(url.rsplit(":", 1)[1].split("/", 1)[0])


LINK_RETURN_MAX_S = 1.0


def test_a_link_that_returns_is_written_to_within_a_second(dut: DeviceUnderTest, outage: list[Any]) -> None:
    """A write waiting for a lost link goes out within a second of the server being up again, once
    (before: 2.3 s, the tag layer's wait and the driver's reconnect backoff stacked). Counted at the
    server, timed from the moment its start returned."""
    address = dut.points["int16"].address
    svc = tag_service(dut)
    try:
        svc.write(["[t]Int16"], [1])  # the link is up and used
        before = dut.server.write_count(address)
        dut.server.stop()
        outage.append(dut.server)
        heard = Heard()
        outcome: list[BaseException | None] = []

        def write() -> None:
            try:
                svc.write(["[t]Int16"], [4321], listener=heard, hooks=heard.hooks())
                outcome.append(None)
            except BaseException as exc:  # handed to the test thread
                outcome.append(exc)

        writer = threading.Thread(target=write, name="link-return-writer")
        writer.start()
        # Long enough for both backoffs to reach their ceilings (delivery 2 s before, reconnect 5 s).
        wait_until(lambda: len(heard.waits) >= 6, timeout_s=20, message="the write to wait a while for the link")
        dut.server.start()
        outage.clear()
        up_at = time.monotonic()
        wait_until(lambda: dut.server.write_count(address) > before, timeout_s=15,
                   message="the write to reach the server")
        delay_s = time.monotonic() - up_at
        writer.join(15)
        print(f"\n{dut.protocol}: first write {delay_s:.2f} s after the server was up again "
              f"(waited {len(heard.waits)} times)")
        assert outcome == [None], outcome
        assert delay_s < LINK_RETURN_MAX_S, delay_s
        assert dut.server.get(address) == 4321
        assert dut.server.write_count(address) == before + 1  # one write recorded, one write sent
    finally:
        svc.close()
