"""TagService over real Modbus servers: batching per device, refused writes, faults, waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from exchange._config import Config, DeviceConfig, config_from_dict
from exchange._drivers import registry
from exchange._drivers.base import Driver, Point
from exchange._tags.service import TagService
from exchange._tags.table import TagWrite
from exchange._values import QualifiedValue, Quality
from exchange.errors import (
    Cancelled,
    CommunicationError,
    ConfirmTimeout,
    ReadOnlyTag,
    TagError,
    TagPathError,
    TagRangeError,
    TagTypeError,
    UnknownTag,
)
from simulators.servers.modbus import ModbusSimServer
from tests.drivers.dut_modbus import make_modbus_server, modbus_settings
from tests.netfaults import silent_listener
from tests.tags.heard import Heard

TAGS = {
    "[plant]A/Level": {"device": "plc1", "address": "HRF4", "access": "ro"},
    "[plant]A/Count": {"device": "plc1", "address": "HRI2"},
    "[plant]A/Mode": {"device": "plc1", "address": "HR1", "min": 0, "max": 5},
    "[plant]A/Pump": {"device": "plc1", "address": "C1"},
    "[plant]A/Flow": {"device": "plc1", "address": "IRF2"},
    "[plant]B/Speed": {"device": "plc2", "address": "HRUS10"},
    "[plant]B/Setpoint": {"device": "plc2", "address": "HRF4", "min": -10, "max": 100},
    "[plant]B/Mode": {"device": "plc2", "address": "HR1"},
}


@pytest.fixture
def servers() -> Iterator[tuple[ModbusSimServer, ModbusSimServer]]:
    one, two = make_modbus_server(), make_modbus_server()
    yield one, two
    one.stop()
    two.stop()


def make_config(ports: dict[str, int], tags: dict[str, dict[str, Any]] | None = None, **extra: Any) -> Config:
    devices = {name: {**modbus_settings(port), **extra} for name, port in ports.items()}
    return config_from_dict({"devices": devices, "tags": tags or TAGS}, env={})


@pytest.fixture
def service(servers: tuple[ModbusSimServer, ModbusSimServer]) -> Iterator[TagService]:
    svc = TagService.from_config(make_config({"plc1": servers[0].port, "plc2": servers[1].port}))
    yield svc
    svc.close()


def test_read_is_batched_per_device_and_keeps_the_order(
    servers: tuple[ModbusSimServer, ModbusSimServer], service: TagService
) -> None:
    one, two = servers
    one.set("HRF4", 42.5)
    two.set("HR1", 3)
    for server in servers:
        server.reset_counts()
    paths = ["[plant]B/Speed", "[plant]A/Level", "[plant]B/Mode", "[plant]A/Count", "[plant]A/Mode"]
    values = service.read(paths)
    assert [v.value for v in values] == [65_000, 42.5, 3, 70_000, -12]
    assert all(v.quality is Quality.GOOD for v in values)
    assert one.read_count() == 1  # HR1..HRF4 in one block
    assert two.read_count() == 1  # HR1..HRUS10 in one block


def test_unknown_or_malformed_paths_raise_and_read_nothing(
    servers: tuple[ModbusSimServer, ModbusSimServer], service: TagService
) -> None:
    servers[0].reset_counts()
    with pytest.raises(UnknownTag, match="\\[plant\\]A/Levle"):
        service.read(["[plant]A/Count", "[plant]A/Levle"])
    with pytest.raises(TagPathError):
        service.read(["A/Count"])
    assert servers[0].read_count() == 0
    assert service.read_one("[PLANT]a/count").value == 70_000  # paths ignore case


@pytest.mark.parametrize(
    ("paths", "values", "error", "fragment"),
    [
        (["[plant]B/Mode", "[plant]A/Level"], [1, 2.0], ReadOnlyTag, 'access = "ro"'),
        (["[plant]B/Mode", "[plant]A/Flow"], [1, 2.0], ReadOnlyTag, "cannot be written over its protocol"),
        (["[plant]B/Mode", "[plant]B/Speed"], [1, "abc"], TagTypeError, "'abc' is not a number"),
        (["[plant]B/Mode", "[plant]B/Mode"], [1, 2], TagError, "written twice"),
        (["[plant]B/Speed", "[plant]B/Mode"], [1, 70000], TagRangeError, "outside the Int16 range"),
        (["[plant]B/Mode", "[plant]B/Setpoint"], [1, 100.5], TagRangeError, "above the tag's max 100"),
        (["[plant]B/Mode", "[plant]A/Mode"], [1, 6], TagRangeError, "above the tag's max 5"),
        (["[plant]B/Mode", "[plant]A/Count"], [1, 2.5], TagTypeError, "not a whole number"),
        (["[plant]B/Mode", "[plant]A/Pump"], [1, "maybe"], TagTypeError, "not a boolean"),
        (["[plant]B/Mode", "[plant]Nope"], [1, 1], UnknownTag, "[plant]Nope"),
        (["[plant]B/Mode", "[plant]A/Mode"], [1], TagError, "2 paths but 1 values"),
    ],
)
def test_refused_writes_send_nothing(
    servers: tuple[ModbusSimServer, ModbusSimServer],
    service: TagService,
    paths: list[str],
    values: list[Any],
    error: type[Exception],
    fragment: str,
) -> None:
    before = [server.values() for server in servers]
    with pytest.raises(error) as caught:
        service.write(paths, values)
    assert fragment in str(caught.value)
    assert [server.write_count() for server in servers] == [0, 0]
    assert [server.values() for server in servers] == before


def test_write_errors_name_path_device_and_address(service: TagService) -> None:
    with pytest.raises(TagRangeError) as caught:
        service.write(["[plant]B/Mode"], [70000])
    message = str(caught.value)
    for fragment in ("[plant]B/Mode", "'plc2'", "'HR1'", "70000", "nothing was written"):
        assert fragment in message


def test_write_sends_one_request_per_device_and_reports_each_device(
    servers: tuple[ModbusSimServer, ModbusSimServer], service: TagService
) -> None:
    one, two = servers
    heard = Heard()
    planned = service.write(
        ["[plant]B/Mode", "[plant]A/Mode", "[plant]A/Count", "[plant]B/Setpoint"],
        [4, "2", 5.0, 55],
        listener=heard,
    )
    assert [w.value for w in planned] == [4, 2, 5, 55.0]
    assert isinstance(planned[0], TagWrite) and planned[0].requested == 4
    assert heard.events == [
        ("written", ["[plant]B/Mode", "[plant]B/Setpoint"], "acknowledged"),
        ("written", ["[plant]A/Mode", "[plant]A/Count"], "acknowledged"),
    ]
    assert (one.write_count(), two.write_count()) == (1, 2)  # A: HR1+HRI2 adjacent; B: HR1, HRF4 apart
    assert (one.get("HR1"), one.get("HRI2"), two.get("HR1"), two.get("HRF4")) == (2, 5, 4, 55.0)


def test_a_device_that_is_down(servers: tuple[ModbusSimServer, ModbusSimServer]) -> None:
    one, two = servers
    two.stop()
    service = TagService(make_config({"plc1": one.port, "plc2": two.port}, comm_timeout_s=0.3))
    try:
        values = service.read(["[plant]A/Count", "[plant]B/Mode"])
        assert [v.quality for v in values] == [Quality.GOOD, Quality.BAD_NOT_CONNECTED]
        assert "plc2" in (values[1].error or "")
        heard = Heard()
        started = time.monotonic()
        with pytest.raises(CommunicationError, match="plc2") as caught:
            service.write(["[plant]B/Mode"], [1], listener=heard)
        assert time.monotonic() - started >= 0.3  # it waited the device's comm_timeout_s for the link
        assert "could not be reached for 0.3 s (comm_timeout_s)" in str(caught.value)
        assert heard.events == [("failed", ["[plant]B/Mode"], "Bad_NotConnected")]
        with pytest.raises(CommunicationError) as caught:
            service.write(["[plant]A/Mode", "[plant]B/Mode"], [3, 1])
        assert "already written on other devices: [plant]A/Mode" in str(caught.value)
        assert one.get("HR1") == 3 and one.write_count() == 1
    finally:
        service.close()


def test_a_hung_device_does_not_delay_another(servers: tuple[ModbusSimServer, ModbusSimServer]) -> None:
    listener, accepted = silent_listener()
    tags = {"[p]Live": {"device": "live", "address": "HR1"}, "[p]Hung": {"device": "hung", "address": "HR1"}}
    config = make_config({"live": servers[0].port, "hung": listener.getsockname()[1]}, tags, timeout_ms=1500)
    svc = TagService(config)
    try:
        blocked = threading.Thread(target=svc.read, args=(["[p]Hung"],))
        started = time.monotonic()
        blocked.start()
        assert svc.read(["[p]Live"])[0].quality is Quality.GOOD
        assert time.monotonic() - started < 0.75, "the live device waited for the hung one"
        blocked.join()
        started = time.monotonic()
        both = svc.read(["[p]Hung", "[p]Live"])  # the hung device is known down now: fails fast
        assert [v.quality for v in both] == [Quality.BAD_NOT_CONNECTED, Quality.GOOD]
        assert time.monotonic() - started < 0.75  # half the 1.5 s timeout
    finally:
        svc.close()
        listener.close()
        for conn in accepted:
            conn.close()


def _set_later(server: ModbusSimServer, address: str, value: Any, delay_s: float) -> threading.Timer:
    timer = threading.Timer(delay_s, server.set, args=(address, value))
    timer.start()
    return timer


def test_wait_for_value_polls_until_the_value_arrives(
    servers: tuple[ModbusSimServer, ModbusSimServer], service: TagService
) -> None:
    calls: list[float] = []
    timer = _set_later(servers[1], "HRF4", 12.3, 0.1)
    result = service.wait_for_value(
        "[plant]B/Setpoint", 12.3, timeout_s=5, poll_s=0.02, check_cancelled=lambda: calls.append(1)
    )
    timer.join()
    assert result.quality is Quality.GOOD and result.value == pytest.approx(12.3, rel=1e-6)
    assert result.value != 12.3  # a Float32 value: equal only with the tolerance
    assert len(calls) >= 2  # checked on every poll


def test_wait_timeout_names_path_expected_and_last_value(service: TagService) -> None:
    started = time.monotonic()
    with pytest.raises(ConfirmTimeout) as caught:
        service.wait_for_value("[plant]B/Mode", 9, timeout_s=0.2, poll_s=0.05)
    assert 0.2 <= time.monotonic() - started < 2
    message = str(caught.value)
    for fragment in ("[plant]B/Mode", "9", "last seen -12", "'plc2'"):
        assert fragment in message
    assert (caught.value.path, caught.value.expected, caught.value.last) == ("[plant]B/Mode", 9, -12)  # type: ignore[attr-defined]


def test_wait_notices_cancellation_within_one_poll(
    servers: tuple[ModbusSimServer, ModbusSimServer], service: TagService
) -> None:
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()

    def check() -> None:
        if cancel.is_set():
            raise Cancelled("run-1", "test")

    servers[1].reset_counts()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        service.wait_for_value("[plant]B/Mode", 9, timeout_s=30, poll_s=0.05, check_cancelled=check)
    assert time.monotonic() - started < 1.0
    assert servers[1].read_count() <= 8


class PushingDriver:
    """A driver that pushes changes (as OPC UA does) by watching a Modbus driver in a thread."""

    def __init__(self, inner: Driver) -> None:
        self.inner = inner
        self.device = inner.device
        self.cancelled = 0

    def read(self, points: Sequence[Point]) -> list[QualifiedValue]:
        return self.inner.read(points)

    def write(self, writes: Sequence[tuple[Point, Any]]) -> None:
        self.inner.write(writes)

    def retry_now(self) -> None:
        self.inner.retry_now()

    def close(self) -> None:
        self.inner.close()

    def subscribe(self, point: Point, on_change: Callable[[QualifiedValue], None]) -> Any:
        stop = threading.Event()
        owner = self

        def watch() -> None:
            last = None
            while not stop.is_set():
                value = self.inner.read([point])[0]
                if value.value != last:
                    last = value.value
                    on_change(value)
                stop.wait(0.005)

        threading.Thread(target=watch, daemon=True).start()

        class Subscription:
            def cancel(self) -> None:
                owner.cancelled += 1
                stop.set()

        return Subscription()


def test_wait_uses_the_subscription_of_a_pushing_driver(servers: tuple[ModbusSimServer, ModbusSimServer]) -> None:
    drivers: list[PushingDriver] = []

    def factory(device: DeviceConfig) -> Driver:
        drivers.append(PushingDriver(registry.create_driver(device)))
        return drivers[-1]

    config = make_config({"plc1": servers[0].port, "plc2": servers[1].port})
    svc = TagService(config, driver_factory=factory)
    try:
        timer = _set_later(servers[1], "HR1", 4, 0.1)
        started = time.monotonic()
        # a 30 s poll: only the subscription can deliver the value this soon
        result = svc.wait_for_value("[plant]B/Mode", 4, timeout_s=10, poll_s=30)
        timer.join()
        assert result.value == 4
        assert time.monotonic() - started < 2
        assert [d.cancelled for d in drivers] == [1]
    finally:
        svc.close()


def test_close_closes_the_drivers(servers: tuple[ModbusSimServer, ModbusSimServer]) -> None:
    # A write to a closed service fails at once: it does not wait comm_timeout_s (default 60 s) for a
    # "link" that a closed service will never bring back.
    service = TagService.from_config(make_config({"plc1": servers[0].port, "plc2": servers[1].port}))
    try:
        assert service.read_one("[plant]A/Count").quality is Quality.GOOD
        service.close()
        assert service.read_one("[plant]A/Count").quality is Quality.BAD_NOT_CONNECTED
        started = time.monotonic()
        with pytest.raises(CommunicationError, match="the tag service is closed"):
            service.write(["[plant]A/Mode"], [1])
        assert time.monotonic() - started < 10  # far below the 60 s comm_timeout_s it used to wait out
        assert servers[0].write_count() == 0
    finally:
        service.close()
