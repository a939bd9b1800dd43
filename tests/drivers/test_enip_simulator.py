"""The simulated Logix controller itself: values, faults, and the wire tap that counts requests.

pylogix (a different EtherNet/IP library from the one under test) serves as an independent client.
"""

from __future__ import annotations

import select
import struct
from collections.abc import Iterator

import pytest
from pylogix import PLC

from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.enip import EnipSimError, EnipSimServer
from simulators.servers.enip_child import WireTap, path_name
from tests.drivers.dut_enip import ENIP_POINTS, make_enip_server


@pytest.fixture(scope="module")
def server() -> Iterator[EnipSimServer]:
    sim = make_enip_server()
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture
def pylogix(server: EnipSimServer) -> Iterator[PLC]:
    if not server.running:
        server.start()
    server.reset_counts()
    plc = PLC()
    plc.IPAddress, plc.Port = server.host, server.port
    try:
        yield plc
    finally:
        plc.Close()


def test_initial_values_are_served_with_their_types(server: EnipSimServer, pylogix: PLC) -> None:
    expected = {address: initial for address, (_, initial, _) in ENIP_POINTS.items()}
    assert server.get_many(expected) == expected
    assert isinstance(server.get("Valve"), bool) and isinstance(server.get("Step"), int)
    for address in ("Step", "Counter", "Tank_Level", "Program:MainProgram.Phase", "Arr[3]", "Motor.Speed"):
        response = pylogix.Read(address)
        assert response.Status == "Success", (address, response.Status)
        assert response.Value == pytest.approx(expected[address]), address


def test_server_side_values_reach_clients_and_client_writes_reach_the_server(
    server: EnipSimServer, pylogix: PLC
) -> None:
    server.set_many({"Counter": -5, "Arr[9]": 2.75, "Valve": True})
    assert [pylogix.Read(a).Value for a in ("Counter", "Arr[9]")] == [-5, 2.75]
    assert pylogix.Write("Step", 321).Status == "Success"
    assert server.get("Step") == 321
    assert server.write_count("Step") == 1 and server.write_count() == 1


def test_read_only_points_refuse_client_writes_but_not_the_plc_program(
    server: EnipSimServer, pylogix: PLC
) -> None:
    assert pylogix.Write("Setpoint_RO", 1).Status != "Success"
    assert server.get("Setpoint_RO") == 40
    assert server.write_count("Setpoint_RO") == 1, "a refused write still reached the server"
    server.set("Setpoint_RO", 41)
    assert pylogix.Read("Setpoint_RO").Value == 41


def test_bad_values_and_addresses_are_refused_naming_them(server: EnipSimServer) -> None:
    with pytest.raises(ValueError, match="70000 is out of range for Int16"):
        server.set("Step", 70_000)
    with pytest.raises(KeyError, match="Nope"):
        server.get("Nope")
    with pytest.raises(ValueError, match="'Arr' conflicts|conflicts with another point"):
        EnipSimServer([SimPoint("Arr", DataType.INT16), SimPoint("Arr[2]", DataType.INT16)])
    with pytest.raises(ValueError, match="one-dimensional"):
        EnipSimServer([SimPoint("Grid[1,2]", DataType.INT16)])


def test_restart_and_kill_keep_the_port_values_and_counts(server: EnipSimServer, pylogix: PLC) -> None:
    port = server.port
    assert pylogix.Write("Counter", 11).Status == "Success"
    server.restart()
    assert server.port == port and server.get("Counter") == 11
    server.kill()
    assert not server.running
    with pytest.raises(EnipSimError, match="not running"):
        server.get("Counter")
    server.start()
    assert server.port == port and server.get("Counter") == 11
    assert server.write_count("Counter") == 1


def test_drop_connections_closes_clients_before_returning(server: EnipSimServer, pylogix: PLC) -> None:
    assert pylogix.Read("Step").Status == "Success"
    sock = pylogix.conn.Socket
    server.drop_connections()
    readable, _, _ = select.select([sock], [], [], 0)
    assert readable and sock.recv(16) == b"", "the client sees end of stream at once"
    assert server.running


def test_two_servers_run_side_by_side_with_their_own_values() -> None:
    first = EnipSimServer([SimPoint("Level", DataType.FLOAT32, 1.0)])
    second = EnipSimServer([SimPoint("Level", DataType.FLOAT32, 2.0)])
    with first, second:
        assert first.port != second.port
        first.set("Level", 5.0)
        assert (first.get("Level"), second.get("Level")) == (5.0, 2.0)


def _symbolic(name: str) -> bytes:
    raw = name.encode()
    return bytes([0x91, len(raw)]) + raw + (b"\x00" if len(raw) % 2 else b"")


def _write(path: bytes, type_code: int, data: bytes) -> bytes:
    return bytes([0x4D, len(path) // 2]) + path + struct.pack("<HH", type_code, 1) + data


def _cpf_connected(message: bytes) -> bytes:
    item = struct.pack("<H", 7) + message
    address_item = struct.pack("<HHI", 0xA1, 4, 1)
    return struct.pack("<IHH", 0, 0, 2) + address_item + struct.pack("<HH", 0xB1, len(item)) + item


def test_path_names_follow_the_client_address_spelling() -> None:
    assert path_name(_symbolic("Program:Main") + _symbolic("Step")) == "Program:Main.Step"
    assert path_name(_symbolic("Arr") + b"\x28\x03") == "Arr[3]"
    assert path_name(_symbolic("Arr") + b"\x29\x00" + struct.pack("<H", 300)) == "Arr[300]"
    assert path_name(_symbolic("Grid") + b"\x28\x01\x28\x02" + _symbolic("X")) == "Grid[1,2].X"


def test_the_tap_counts_requests_in_multiple_service_packets_and_stacked_duplicates() -> None:
    tap = WireTap()
    one = _write(_symbolic("A"), 0xC4, struct.pack("<i", 5))
    two = _write(_symbolic("B"), 0xCA, struct.pack("<f", 1.5))
    offsets = struct.pack("<HHH", 2, 6, 6 + len(one))
    multiple = bytes([0x0A, 2, 0x20, 0x02, 0x24, 0x01]) + offsets + one + two
    tap.observe(_cpf_connected(multiple))
    assert (dict(tap.writes), tap.messages, tap.stacked) == ({"A": 1, "B": 1}, 1, 0)
    tap.observe(_cpf_connected(one + struct.pack("<H", 7) + one))  # the pycomm3 duplicate
    assert (tap.writes["A"], tap.messages, tap.stacked) == (3, 2, 1)
