"""``TagService.watch`` on a device without subscriptions (Modbus): one poller per device reads every
watched tag in one request per interval and tells each watcher only of its own tag's changes; a
cancelled last watch ends the poller's thread; closing the service ends it too."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from exchange._config import config_from_dict
from exchange._tags.service import TagService
from exchange._values import DataType, QualifiedValue
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.waiting import holds_for, wait_until

ADDRESSES = [f"HR{i}" for i in range(1, 21)]


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint(address, DataType.INT16, 0) for address in ADDRESSES])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def service(plc: ModbusSimServer, tmp_path: object) -> Iterator[TagService]:
    config = config_from_dict({
        "store": {"url": "sqlite:///x.db"}, "apps": {"paths": []},
        "devices": {"plc": {"driver": "modbus", "host": "127.0.0.1", "port": plc.port}},
        "tags": {f"[p]S{i}": {"device": "plc", "address": address, "type": "Int16"}
                 for i, address in enumerate(ADDRESSES)},
    })
    svc = TagService(config)
    yield svc
    svc.close()


def watcher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("tag-watch-")]


def test_twenty_watches_on_one_device_share_one_request_per_poll(plc: ModbusSimServer, service: TagService) -> None:
    seen: dict[str, list[object]] = {f"[p]S{i}": [] for i in range(len(ADDRESSES))}
    watches = [service.watch(path, lambda value, path=path: seen[path].append(value.value), poll_s=0.05)
               for path in seen]
    wait_until(lambda: all(values == [0] for values in seen.values()), message="every first value")
    plc.reset_counts()
    wait_until(lambda: plc.read_count() >= 10, message="ten polls")
    polls = plc.read_count()
    assert polls <= 12  # one request per poll for the twenty tags (a poll may be in flight)
    plc.set("HR7", 42)
    wait_until(lambda: seen["[p]S6"] == [0, 42], message="the change told")
    assert all(values == [0] for path, values in seen.items() if path != "[p]S6")  # only its watcher
    for watch in watches:
        watch.cancel()
    wait_until(lambda: not watcher_threads(), message="the poller's thread to end")
    plc.reset_counts()
    assert holds_for(lambda: plc.read_count() == 0, 0.2)


def test_closing_the_service_ends_its_pollers(service: TagService) -> None:
    got = threading.Event()

    def told(value: QualifiedValue) -> None:
        got.set()

    service.watch("[p]S0", told, poll_s=0.05)
    assert got.wait(5)
    service.close()
    wait_until(lambda: not watcher_threads(), message="the poller's thread to end")
