"""Exactly-once writes on EtherNet/IP, counted on the wire at the simulated controller.

pycomm3 1.2.14–1.2.16 puts the Write Tag request of a single-tag ``write()`` into the packet twice;
a controller executes both. The simulator's wire tap counts Write Tag requests before cpppo parses
them, so a duplicate shows as two writes (and one "stacked" message). The first test proves the tap
sees such a duplicate; the others prove Exchange's driver never sends one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from pycomm3 import LogixDriver
from pycomm3.cip import DINT
from pycomm3.packets.logix import WriteTagRequestPacket

from exchange._drivers.enip.tags import TagDefinitions, parse_logix_address
from exchange._values import DataType, Quality
from simulators.servers.enip import EnipSimServer
from tests.drivers.dut_enip import ENIP_POINTS, enip_driver, enip_point, make_enip_server


@pytest.fixture(scope="module")
def server() -> Iterator[EnipSimServer]:
    extra = {f"W{i}": (DataType.INT32, 0, True) for i in range(100)}
    sim = make_enip_server(extra)
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(autouse=True)
def fresh_counts(server: EnipSimServer) -> None:
    if not server.running:
        server.start()
    server.reset_counts()


def test_the_wire_tap_counts_a_duplicated_write_request_twice(server: EnipSimServer) -> None:
    plc = LogixDriver(f"127.0.0.1:{server.port}", init_tags=False)
    plc.open()
    try:
        definitions = TagDefinitions()
        definitions.declare(parse_logix_address("Counter"), DataType.INT32)
        request = WriteTagRequestPacket(
            plc._sequence, "Counter", 1, definitions.table["Counter"], 0, False, DINT.encode(5)
        )
        # What pycomm3's single-write path does: build the message, re-arm it, and let send() build
        # it again, so the packet carries the request twice.
        request.build_message()
        request._msg_setup = False
        plc.send(request)
    finally:
        plc._sock.close()
    assert server.write_count("Counter") == 2
    assert server.stacked_count() == 1


def test_a_single_tag_write_reaches_the_server_exactly_once(server: EnipSimServer) -> None:
    device, driver = enip_driver(server)
    try:
        point = enip_point(device, "Counter", DataType.INT32)
        driver.write([(point, 123_456)])
        assert server.get("Counter") == 123_456
        assert server.write_count("Counter") == 1
        assert server.write_count() == 1
        assert server.stacked_count() == 0
        for value in (1, 2, 3):  # also on a connection that already exists
            driver.write([(point, value)])
        assert server.write_count("Counter") == 4
        assert server.stacked_count() == 0
    finally:
        driver.close()


@pytest.mark.parametrize("address", ["Valve", "Step", "Tank_Level", "Total", "Program:MainProgram.Phase",
                                     "Arr[3]", "Motor.Speed"])
def test_single_writes_of_every_kind_of_address_are_sent_once(server: EnipSimServer, address: str) -> None:
    data_type = ENIP_POINTS[address][0]
    value = {DataType.BOOLEAN: True, DataType.INT16: 77, DataType.INT32: 88}.get(data_type, 4.5)
    device, driver = enip_driver(server)
    try:
        driver.write([(enip_point(device, address, data_type), value)])
    finally:
        driver.close()
    assert server.get(address) == value
    assert server.write_count(address) == 1
    assert server.write_count() == 1
    assert server.stacked_count() == 0


def test_a_multi_tag_write_sends_each_tag_exactly_once(server: EnipSimServer) -> None:
    device, driver = enip_driver(server)
    try:
        writes = [(enip_point(device, f"W{i}", DataType.INT32), 1000 + i) for i in range(100)]
        driver.write(writes)
    finally:
        driver.close()
    assert server.get_many([f"W{i}" for i in range(100)]) == {f"W{i}": 1000 + i for i in range(100)}
    assert all(server.write_count(f"W{i}") == 1 for i in range(100))
    assert server.write_count() == 100
    assert server.stacked_count() == 0
    assert server.message_count() <= 2, "100 writes travel in Multiple Service Packets, not one by one"


def test_writes_from_many_threads_are_each_sent_once(server: EnipSimServer) -> None:
    device, driver = enip_driver(server)
    errors: list[Exception] = []

    def worker(n: int) -> None:
        try:
            point = enip_point(device, f"W{n}", DataType.INT32)
            for value in range(10):
                driver.write([(point, value)])
                assert driver.read([point])[0].value == value
        except Exception as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        driver.close()
    assert not errors, errors
    assert [server.write_count(f"W{n}") for n in range(8)] == [10] * 8
    assert server.stacked_count() == 0


def test_after_a_restart_the_next_write_goes_out_once_on_a_new_connection(server: EnipSimServer) -> None:
    device, driver = enip_driver(server)
    try:
        point = enip_point(device, "Step", DataType.INT16)
        driver.write([(point, 1)])
        server.restart()
        driver.write([(point, 2)])  # the dead connection is noticed before sending, not after
        server.drop_connections()
        driver.write([(point, 3)])
        assert server.get("Step") == 3
        assert server.write_count("Step") == 3
        assert driver.read([point])[0].quality is Quality.GOOD
    finally:
        driver.close()
