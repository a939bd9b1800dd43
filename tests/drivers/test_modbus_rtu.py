"""Modbus RTU on a serial line (socat pty pair) and RTU framing over TCP, against pymodbus's servers.

Several unit ids on one line share one link, serialised, with the inter-frame silence; link loss
(the server process killed, the serial port gone) gives Bad qualities and recovers when the device
is back; a write in doubt on a serial line is resolved by ``on_doubt`` exactly as on TCP, and no
write is ever sent twice (the server counts them).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._tags.delivery import HELD, NEVER_RESENT, SENT_AGAIN
from exchange._tags.service import TagService
from exchange._values import Quality
from exchange.errors import WriteInDoubt
from tests.drivers.modbus_servers import ServerProcess, SocatPair, Unit
from tests.tags.heard import Heard
from tests.waiting import wait_until

TIMEOUT_MS = 300  # a unit that does not answer is known soon


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[SocatPair]:
    made = SocatPair(tmp_path).start()
    try:
        yield made
    finally:
        made.stop()


def serial_device(pair: SocatPair, unit_id: int, **extra: Any) -> dict[str, Any]:
    return {"driver": "modbus", "transport": "serial", "serial_port": pair.client, "baudrate": 19200,
            "unit_id": unit_id, "timeout_ms": TIMEOUT_MS, "reconnect_min_ms": 20, "reconnect_max_ms": 200,
            "comm_timeout_s": 20, **extra}


def service(devices: dict[str, Any], tags: dict[str, Any]) -> TagService:
    return TagService(config_from_dict({"devices": devices, "tags": tags}, env={}))


def test_units_on_one_serial_line_share_the_port_serialised(pair: SocatPair) -> None:
    server = ServerProcess("serial", [Unit(3, {i: 1000 + i for i in range(100)}),
                                      Unit(4, {i: 2000 + i for i in range(100)})], serial_port=pair.server).start()
    tags = {f"[l]D{unit}/R{i}": {"device": f"d{unit}", "address": f"HR{i + 1}"} for unit in (3, 4) for i in range(100)}
    svc = service({"d3": serial_device(pair, 3), "d4": serial_device(pair, 4)}, tags)
    errors: list[str] = []

    def poll(unit: int) -> None:
        paths = [f"[l]D{unit}/R{i}" for i in range(100)]
        for _ in range(10):
            values = svc.read(paths)
            wrong = [(p, v) for i, (p, v) in enumerate(zip(paths, values)) if v.value != 1000 * (unit - 2) + i]
            if wrong:
                errors.append(f"unit {unit}: {wrong[:2]}")

    try:
        threads = [threading.Thread(target=poll, args=(unit,)) for unit in (3, 4, 3, 4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []  # the exclusive port opened once, the units' frames never mixed
        reads = [r.unit_id for r in server.received() if r.function_code == 3]
        assert sorted(set(reads)) == [3, 4] and len(reads) == 40  # one block read per poll, none repeated
    finally:
        svc.close()
        server.stop()


def test_the_line_keeps_the_inter_frame_silence(pair: SocatPair) -> None:
    server = ServerProcess("serial", [Unit(3), Unit(4)], serial_port=pair.server).start()
    devices = {"d3": serial_device(pair, 3, frame_gap_ms=40), "d4": serial_device(pair, 4, frame_gap_ms=40)}
    svc = service(devices, {"[g]A": {"device": "d3", "address": "HR1"}, "[g]B": {"device": "d4", "address": "HR1"}})
    try:
        for _ in range(5):
            svc.read(["[g]A", "[g]B"])  # two devices: two requests back to back on the one line
        arrivals = [r.at for r in server.received()]
        assert len(arrivals) == 10
        assert min(b - a for a, b in zip(arrivals, arrivals[1:])) >= 0.038  # 40 ms less clock granularity
    finally:
        svc.close()
        server.stop()


def test_serial_link_loss_is_bad_quality_and_recovers(pair: SocatPair) -> None:
    server = ServerProcess("serial", [Unit(3, {0: 42})], serial_port=pair.server).start()
    svc = service({"d3": serial_device(pair, 3)}, {"[x]A": {"device": "d3", "address": "HR1"}})
    try:
        assert svc.read(["[x]A"])[0].value == 42
        server.stop()  # the device is off: the line is fine, nobody answers
        [lost] = svc.read(["[x]A"])
        assert lost.quality is Quality.ERROR_TIMEOUT_EXPIRED and "no response within 300 ms" in (lost.error or "")
        assert svc.read(["[x]A"])[0].quality in (Quality.BAD_NOT_CONNECTED, Quality.ERROR_TIMEOUT_EXPIRED)
        server.start()
        wait_until(lambda: svc.read(["[x]A"])[0].value == 42, timeout_s=10)
        pair.stop()  # the adapter is unplugged: the port itself is gone
        wait_until(lambda: svc.read(["[x]A"])[0].quality is Quality.BAD_NOT_CONNECTED, timeout_s=10)
        server.stop()
        pair.start()
        server.start()
        wait_until(lambda: svc.read(["[x]A"])[0].value == 42, timeout_s=10)
    finally:
        svc.close()
        server.stop()


class Line:
    """A server and a device reaching it over ``transport``, for the in-doubt cases."""

    def __init__(self, transport: str, folder: Path) -> None:
        self.pair = SocatPair(folder).start() if transport == "serial" else None
        self.server = ServerProcess(transport, [Unit(3)], serial_port=self.pair.server if self.pair else None).start()
        if self.pair is not None:
            self.device = serial_device(self.pair, 3)
        else:
            self.device = {"driver": "modbus", "host": "127.0.0.1", "port": self.server.port, "unit_id": 3,
                           "timeout_ms": TIMEOUT_MS, "reconnect_min_ms": 20, "reconnect_max_ms": 200,
                           "comm_timeout_s": 20}
        tags = {"[d]Speed": {"device": "dev", "address": "HR10", "on_doubt": "readback"},
                "[d]Start": {"device": "dev", "address": "HR11", "on_doubt": "fail"}}
        self.service = service({"dev": self.device}, tags)

    def close(self) -> None:
        self.service.close()
        self.server.stop()
        if self.pair is not None:
            self.pair.stop()


@pytest.fixture(params=["tcp", "serial"])
def line(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Line]:
    made = Line(request.param, tmp_path)
    try:
        yield made
    finally:
        made.close()


def test_an_applied_write_whose_answer_is_lost_is_read_back_and_not_sent_again(line: Line) -> None:
    line.server.drop_write_answers(1)
    heard = Heard()
    line.service.write(["[d]Speed"], [1200], listener=heard, hooks=heard.hooks())
    assert line.server.holding(3, 9) == [1200]
    assert [(w.function_code, w.values) for w in line.server.writes()] == [(6, (1200,))]  # once
    assert ("in_doubt", ["[d]Speed"], HELD) in heard.events
    assert heard.events[-1] == ("written", ["[d]Speed"], "readback")


def test_on_doubt_fail_never_sends_again(line: Line) -> None:
    line.server.drop_write_answers(1)
    heard = Heard()
    with pytest.raises(WriteInDoubt, match='on_doubt is "fail"'):
        line.service.write(["[d]Start"], [1], listener=heard, hooks=heard.hooks())
    assert len(line.server.writes()) == 1
    assert heard.events == [("in_doubt", ["[d]Start"], NEVER_RESENT)]


@pytest.fixture
def serial_line(tmp_path: Path) -> Iterator[Line]:
    made = Line("serial", tmp_path)
    try:
        yield made
    finally:
        made.close()


def test_a_write_to_a_serial_device_that_went_off_is_in_doubt_and_sent_again_once_it_is_back(
    serial_line: Line,
) -> None:
    # Over TCP a device that is off refuses the connection: the write was not sent and simply waits.
    # On a serial line the frame goes out whoever listens: no answer, so the write is in doubt.
    line = serial_line
    line.server.stop()
    heard = Heard()
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            line.service.write(["[d]Speed"], [900], listener=heard, hooks=heard.hooks())
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test asserts on it
            outcome.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    wait_until(lambda: any("reading back a write in doubt" in reason for _, reason in heard.waits), timeout_s=10)
    line.server.start()  # a restarted device holds its initial memory: the write did not reach it
    writer.join(timeout=30)
    assert outcome == [None]
    assert line.server.holding(3, 9) == [900]
    assert len(line.server.writes()) == 1  # the restarted server got it exactly once
    assert ("in_doubt", ["[d]Speed"], SENT_AGAIN) in heard.events
    assert heard.events[-1] == ("written", ["[d]Speed"], "acknowledged")


def test_a_unit_that_does_not_answer_does_not_take_down_the_others_on_its_line(pair: SocatPair) -> None:
    server = ServerProcess("serial", [Unit(3, {0: 42}), Unit(5, silent=True)], serial_port=pair.server).start()
    tags = {"[u]Here": {"device": "d3", "address": "HR1"}, "[u]Gone": {"device": "d5", "address": "HR1"}}
    svc = service({"d3": serial_device(pair, 3), "d5": serial_device(pair, 5)}, tags)
    try:
        for _ in range(3):
            here, gone = svc.read(["[u]Here", "[u]Gone"])
            assert here.value == 42
            assert gone.quality in (Quality.ERROR_TIMEOUT_EXPIRED, Quality.BAD_NOT_CONNECTED)
        # while unit 5 backs off, its reads fail at once and unit 3 is read without waiting for it
        assert [r.unit_id for r in server.received()].count(5) <= 2
    finally:
        svc.close()
        server.stop()
