"""TagService over a real OPC UA server: waits are event-driven through the driver's subscription."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from exchange._config import config_from_dict
from exchange._tags.service import TagService
from exchange._values import Quality
from exchange.errors import ReadOnlyTag
from simulators.servers.opcua import OpcUaSimServer
from tests.drivers.dut_opcua import opcua_settings, shared_opcua_server

TAGS = {
    "[plant]Line/Speed": {"device": "line", "address": "ns=2;s=Test.Float32"},
    "[plant]Line/Count": {"device": "line", "address": "ns=2;s=Test.Int32"},
    "[plant]Line/Locked": {"device": "line", "address": "ns=2;s=Test.ReadOnly", "access": "ro"},
}


@pytest.fixture
def opcua(request: pytest.FixtureRequest) -> OpcUaSimServer:
    return shared_opcua_server(request.config)


@pytest.fixture
def service(opcua: OpcUaSimServer) -> Iterator[TagService]:
    config = config_from_dict({"devices": {"line": opcua_settings(opcua.url)}, "tags": TAGS}, env={})
    svc = TagService(config)
    yield svc
    svc.close()


def test_wait_returns_on_the_subscription_not_the_poll(opcua: OpcUaSimServer, service: TagService) -> None:
    assert service.read_one("[plant]Line/Speed").value == 1.5
    changed_at: list[float] = []

    def change() -> None:
        changed_at.append(time.perf_counter())
        opcua.set("ns=2;s=Test.Float32", 33.3)

    timer = threading.Timer(0.3, change)
    timer.start()
    # with a 30 s poll only a subscription notification can end this wait in time
    result = service.wait_for_value("[plant]Line/Speed", 33.3, timeout_s=10, poll_s=30)
    returned_at = time.perf_counter()
    timer.join()
    assert result.quality is Quality.GOOD
    assert result.value == pytest.approx(33.3, rel=1e-6)
    assert returned_at - changed_at[0] < 1.0


def test_write_then_read_and_refusals_over_opcua(opcua: OpcUaSimServer, service: TagService) -> None:
    speed, count = "ns=2;s=Test.Float32", "ns=2;s=Test.Int32"
    before = (opcua.write_count(speed), opcua.write_count(count), opcua.write_count())
    service.write(["[plant]Line/Speed", "[plant]Line/Count"], [7.25, 12])
    assert (opcua.write_count(speed), opcua.write_count(count)) == (before[0] + 1, before[1] + 1)
    assert opcua.write_count() == before[2] + 1  # one Write request for the device
    assert [v.value for v in service.read(["[plant]Line/Speed", "[plant]Line/Count"])] == [7.25, 12]
    with pytest.raises(ReadOnlyTag):
        service.write(["[plant]Line/Count", "[plant]Line/Locked"], [1, 2])
    assert opcua.write_count() == before[2] + 1
