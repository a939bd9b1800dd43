"""OPC UA driver behaviour beyond the shared contract, against the real asyncua server.

Typed writes, one Read request for 100 nodes, Bad status codes surfaced with device and NodeId,
subscriptions (latency printed), reconnection after a server restart with subscriptions resumed,
fail-fast while down, and a clean close.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exchange._config import DeviceConfig
from exchange._drivers import registry
from exchange._drivers.base import Point
from exchange._drivers.opcua.driver import OpcUaDriver
from exchange._values import QualifiedValue, Quality
from exchange.errors import CommunicationError, DeviceError, TagRangeError, TagTypeError
from simulators.servers.opcua import OpcUaSimServer
from tests.conftest import free_port
from tests.drivers.dut_opcua import (
    BULK_ADDRESSES,
    MISSING_ADDRESS,
    opcua_settings,
    shared_opcua_server,
)
from tests.waiting import wait_until


class Recorder:
    """A subscription callback that keeps every value and lets the test wait for one, with a deadline."""

    def __init__(self) -> None:
        self.values: list[tuple[float, QualifiedValue]] = []
        self._changed = threading.Condition()

    def __call__(self, value: QualifiedValue) -> None:
        with self._changed:
            self.values.append((time.perf_counter(), value))
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[QualifiedValue], bool], timeout_s: float = 5.0) -> float:
        """perf_counter time of the first recorded value matching ``predicate``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for stamp, value in self.values:
                    if predicate(value):
                        return stamp
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching notification within {timeout_s} s: {self.values[-5:]}")
                self._changed.wait(left)

    def clear(self) -> None:
        with self._changed:
            self.values.clear()


def good(expected: Any) -> Callable[[QualifiedValue], bool]:
    return lambda v: v.quality is Quality.GOOD and v.value == expected


def point(address: str) -> Point:
    return Point(f"[test]{address}", address, None)


@pytest.fixture
def server(request: pytest.FixtureRequest) -> OpcUaSimServer:
    return shared_opcua_server(request.config)


@pytest.fixture
def driver(server: OpcUaSimServer) -> Iterator[OpcUaDriver]:
    device = DeviceConfig("plc", "opcua", opcua_settings(server.url))
    made = registry.create_driver(device)
    assert isinstance(made, OpcUaDriver)
    try:
        yield made
    finally:
        made.close()


def test_typed_writes_reach_nodes_of_every_type(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    # bare Python ints and floats would go out as Int64/Double and get BadTypeMismatch
    values = {
        "ns=2;s=Test.Int16": -1234,
        "ns=2;s=Test.UInt16": 65_535,
        "ns=2;s=Test.Int32": -2_000_000,
        "ns=2;s=Test.Float32": 12.5,
        "ns=2;s=Test.Float64": 0.1,
        "ns=2;s=Test.Bool": True,
        "ns=2;s=Test.String": "running",
        "ns=2;i=1001": 42,
    }
    for address, value in values.items():
        driver.write([(point(address), value)])
        assert server.get(address) == value, address
    readings = driver.read([point(a) for a in values])
    assert [r.value for r in readings] == list(values.values())
    assert {r.quality for r in readings} == {Quality.GOOD}


def test_many_tags_go_in_one_write_request(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    batch = [(point("ns=2;s=Test.Int16"), 7), (point("ns=2;s=Test.Float32"), 0.25), (point("ns=2;s=Test.Bool"), True)]
    before = server.write_count()
    driver.write(batch)
    assert server.write_count() == before + 1
    assert [server.get(p.address) for p, _ in batch] == [7, 0.25, True]


def test_a_hundred_nodes_are_read_in_one_request(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    driver.read([point("ns=2;s=Test.Int16")])  # connect first: only the batch below is counted
    before = server.read_count()
    before_each = [server.read_count(a) for a in BULK_ADDRESSES]
    results = driver.read([point(a) for a in BULK_ADDRESSES])
    assert server.read_count() == before + 1
    assert [server.read_count(a) for a in BULK_ADDRESSES] == [n + 1 for n in before_each]
    assert [r.value for r in results] == [i * 0.5 for i in range(100)]
    assert {r.quality for r in results} == {Quality.GOOD}


def test_unknown_node_is_bad_not_found_on_read(driver: OpcUaDriver) -> None:
    results = driver.read([point(MISSING_ADDRESS), point("ns=2;s=Test.Int16")])
    assert results[0].quality is Quality.BAD_NOT_FOUND and results[0].value is None
    assert results[0].error is not None
    assert "plc" in results[0].error and MISSING_ADDRESS in results[0].error
    assert "BadNodeIdUnknown" in results[0].error
    assert results[1].quality is Quality.GOOD


def test_write_to_unknown_node_names_device_node_and_status_and_sends_nothing(
    driver: OpcUaDriver, server: OpcUaSimServer
) -> None:
    before = server.write_count()
    with pytest.raises(DeviceError) as caught:
        driver.write([(point("ns=2;s=Test.Int16"), 99), (point(MISSING_ADDRESS), 1)])
    message = str(caught.value)
    assert "'plc'" in message and MISSING_ADDRESS in message and "BadNodeIdUnknown" in message
    assert server.write_count() == before
    assert server.get("ns=2;s=Test.Int16") == -12


def test_write_to_read_only_node_is_refused_by_the_server(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    with pytest.raises(DeviceError, match=r"ns=2;s=Test\.ReadOnly.*BadUserAccessDenied"):
        driver.write([(point("ns=2;s=Test.ReadOnly"), 6)])
    assert server.get("ns=2;s=Test.ReadOnly") == 5


@pytest.mark.parametrize(
    ("address", "value", "error"),
    [
        ("ns=2;s=Test.Int16", 70_000, TagRangeError),
        ("ns=2;s=Test.UInt16", -1, TagRangeError),
        ("ns=2;s=Test.Int16", "abc", TagTypeError),
        ("ns=2;s=Test.Int16", 1.5, TagTypeError),
        ("ns=2;s=Test.Float32", 1e39, TagRangeError),
        ("ns=2;s=Test.Bool", "maybe", TagTypeError),
    ],
)
def test_value_that_does_not_fit_the_node_type_is_refused_before_sending(
    driver: OpcUaDriver, server: OpcUaSimServer, address: str, value: Any, error: type[Exception]
) -> None:
    before = server.write_count()
    with pytest.raises(error) as caught:
        driver.write([(point(address), value)])
    assert address in str(caught.value) and repr(value) in str(caught.value)
    assert server.write_count() == before


def test_namespace_uri_addresses_are_resolved(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    by_uri = point(f"nsu={server.namespace_uri};s=Test.Float32")
    driver.write([(by_uri, 3.75)])
    assert server.get("ns=2;s=Test.Float32") == 3.75
    unknown = driver.read([point("nsu=urn:nowhere;s=Test.Float32"), by_uri])
    assert unknown[0].quality is Quality.BAD_NOT_FOUND and "urn:nowhere" in (unknown[0].error or "")
    assert unknown[1].value == 3.75


def test_reads_from_many_threads_share_one_connection(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    failures: list[Any] = []

    def work() -> None:
        for _ in range(25):
            result = driver.read([point("ns=2;s=Test.Int32"), point("ns=2;s=Test.Float32")])
            if [r.value for r in result] != [70_000, 1.5]:
                failures.append(result)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failures == []
    assert server.connection_count() == 1


def test_subscription_delivers_server_side_changes_quickly(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    recorder = Recorder()
    subscription = driver.subscribe(point("ns=2;s=Test.Int32"), recorder)
    recorder.wait_for(good(70_000))  # the current value comes first
    latencies_ms = []
    for value in range(1, 41):
        recorder.clear()
        started = time.perf_counter()
        server.set("ns=2;s=Test.Int32", value)
        latencies_ms.append((recorder.wait_for(good(value), timeout_s=2.0) - started) * 1000)
    subscription.cancel()
    latencies_ms.sort()
    print(
        f"\nOPC UA server-side change -> subscription callback: median {statistics.median(latencies_ms):.2f} ms, "
        f"p90 {latencies_ms[int(len(latencies_ms) * 0.9)]:.2f} ms, max {latencies_ms[-1]:.2f} ms (40 changes)"
    )


def test_first_subscribe_connects_and_delivers_each_value_once(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    assert not driver.connected
    recorder = Recorder()
    driver.subscribe(point("ns=2;s=Test.Int32"), recorder)
    server.set("ns=2;s=Test.Int32", 8)
    recorder.wait_for(good(8))
    assert [v.value for _, v in recorder.values] == [70_000, 8]  # in order, none twice


def test_subscriptions_made_at_once_from_many_threads_all_succeed(driver: OpcUaDriver) -> None:
    # The first subscribe creates the connection's one OPC UA subscription; those arriving while it is
    # being created wait for it and must each get their monitored item (200 phase.run calls starting
    # together did this; all but one fell back to polling).
    recorders = [Recorder() for _ in range(12)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(recorders))

    def subscribe(recorder: Recorder) -> None:
        start.wait(10)
        try:
            driver.subscribe(point("ns=2;s=Test.Int32"), recorder)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=subscribe, args=(recorder,)) for recorder in recorders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    for recorder in recorders:
        recorder.wait_for(good(70_000))


def test_cancelled_subscription_gets_no_more_values(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    cancelled, kept = Recorder(), Recorder()
    first = driver.subscribe(point("ns=2;s=Test.Int16"), cancelled)
    driver.subscribe(point("ns=2;s=Test.Float64"), kept)
    cancelled.wait_for(good(-12))
    first.cancel()
    first.cancel()  # idempotent
    server.set("ns=2;s=Test.Int16", 500)
    server.set("ns=2;s=Test.Float64", 9.5)
    kept.wait_for(good(9.5))  # published after the Int16 change, on the same subscription
    assert not any(v.value == 500 for _, v in cancelled.values)


def test_callback_may_cancel_its_subscription_but_not_call_the_driver(
    driver: OpcUaDriver, server: OpcUaSimServer
) -> None:
    seen: list[Any] = []
    kept = Recorder()
    handle: list[Any] = []

    def until_five(value: QualifiedValue) -> None:
        seen.append(value.value)
        if value.value == 5:
            try:
                driver.read([point("ns=2;s=Test.Int16")])
            except RuntimeError as exc:
                seen.append(str(exc))
            handle[0].cancel()  # from the loop thread: must not deadlock

    handle.append(driver.subscribe(point("ns=2;s=Test.Int32"), until_five))
    driver.subscribe(point("ns=2;s=Test.Float64"), kept)
    server.set("ns=2;s=Test.Int32", 5)
    wait_until(lambda: len(seen) >= 3, 5, message="the callback for 5")
    server.set("ns=2;s=Test.Int32", 6)
    server.set("ns=2;s=Test.Float64", 8.5)
    kept.wait_for(good(8.5))
    assert seen[0] == 70_000 and seen[1] == 5 and "subscription callback" in seen[2]
    assert 6 not in seen


def test_subscription_to_unknown_node_is_refused(driver: OpcUaDriver) -> None:
    with pytest.raises(DeviceError, match=rf"'plc'.*{MISSING_ADDRESS}.*BadNodeIdUnknown"):
        driver.subscribe(point(MISSING_ADDRESS), Recorder())


def test_restart_reconnects_and_resumes_subscriptions(driver: OpcUaDriver, server: OpcUaSimServer) -> None:
    recorder = Recorder()
    driver.subscribe(point("ns=2;s=Test.Int32"), recorder)
    recorder.wait_for(good(70_000))
    server.restart()  # listener and sessions gone: the driver needs a new session and subscription
    recorder.wait_for(lambda v: v.quality is Quality.BAD_NOT_CONNECTED)
    server.set("ns=2;s=Test.Int32", 123)
    recorder.wait_for(good(123), timeout_s=10)
    recorder.clear()
    server.set("ns=2;s=Test.Int32", 124)  # and the restored subscription keeps working
    recorder.wait_for(good(124))
    assert driver.read([point("ns=2;s=Test.Int32")])[0].value == 124


def test_power_cycle_fails_fast_while_down_then_resumes_subscriptions(
    driver: OpcUaDriver, server: OpcUaSimServer
) -> None:
    before_down, while_down = Recorder(), Recorder()
    driver.subscribe(point("ns=2;s=Test.Int16"), before_down)
    before_down.wait_for(good(-12))
    server.stop()
    try:
        before_down.wait_for(lambda v: v.quality is Quality.BAD_NOT_CONNECTED)
        started = time.monotonic()
        for _ in range(20):
            assert driver.read([point("ns=2;s=Test.Int16")])[0].quality is Quality.BAD_NOT_CONNECTED
        with pytest.raises(CommunicationError, match="'plc'"):
            driver.write([(point("ns=2;s=Test.Int16"), 1)])
        driver.subscribe(point("ns=2;s=Test.Float32"), while_down)  # accepted while down
        assert time.monotonic() - started < 1.0, "a device known to be down must fail fast"
        while_down.wait_for(lambda v: v.quality is Quality.BAD_NOT_CONNECTED)
        server.set("ns=2;s=Test.Int16", 321)  # kept for the next start, like retentive PLC memory
    finally:
        server.start()
    before_down.wait_for(good(321), timeout_s=10)
    while_down.wait_for(good(1.5), timeout_s=10)


def test_a_dead_device_fails_fast_and_does_not_block_a_live_one(driver: OpcUaDriver) -> None:
    dead = registry.create_driver(
        DeviceConfig("deadplc", "opcua", opcua_settings(f"opc.tcp://127.0.0.1:{free_port()}/plant/"))
    )
    assert isinstance(dead, OpcUaDriver)
    try:
        first = dead.read([point("ns=2;s=Test.Int16")])[0]
        assert first.quality is Quality.BAD_NOT_CONNECTED
        assert "deadplc" in (first.error or "") and "cannot be reached" in (first.error or "")
        with pytest.raises(CommunicationError, match="deadplc"):
            dead.write([(point("ns=2;s=Test.Int16"), 1)])
        dead.subscribe(point("ns=2;s=Test.Int16"), Recorder())  # keeps retrying in the background
        started = time.monotonic()
        for _ in range(20):
            assert dead.read([point("ns=2;s=Test.Int16")])[0].quality is Quality.BAD_NOT_CONNECTED
            assert driver.read([point("ns=2;s=Test.Int16")])[0].value == -12
        assert time.monotonic() - started < 2.0
    finally:
        dead.close()


def test_close_ends_the_session_and_leaves_no_thread(server: OpcUaSimServer) -> None:
    wait_until(lambda: server.connection_count() == 0, 5, message="earlier connections closed")
    threads_before = set(threading.enumerate())
    made = registry.create_driver(DeviceConfig("plc", "opcua", opcua_settings(server.url)))
    assert isinstance(made, OpcUaDriver)
    made.read([point("ns=2;s=Test.Int16")])
    made.subscribe(point("ns=2;s=Test.Int16"), Recorder())
    assert server.connection_count() == 1
    made.close()
    made.close()  # idempotent
    assert set(threading.enumerate()) == threads_before
    wait_until(lambda: server.connection_count() == 0, 5, message="the session closed at the server")
    assert made.read([point("ns=2;s=Test.Int16")])[0].quality is Quality.BAD_NOT_CONNECTED
    with pytest.raises(CommunicationError, match="closed"):
        made.write([(point("ns=2;s=Test.Int16"), 1)])

