"""The demo line served over real protocol servers, seen through each protocol's own client library."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from simulators.plant import PlantParams
from simulators.plant_servers import PlantServers
from simulators.protocol_map import address
from simulators.testing import wait_until
from tests.simulators.raw_clients import RawClient, RawModbus, connect

HOST = "127.0.0.1"
LEVEL = "Line1/Tank/Level"
INLET = "Line1/Tank/InletValve/Cmd"
INLET_OPEN = "Line1/Tank/InletValve/Open"
FAST = PlantParams(inflow_percent_per_second=20.0, valve_stroke_seconds=0.1, mixer_delay_seconds=0.1,
                   heating_rate_c_per_second=100.0)


@pytest.fixture(scope="module", params=["modbus", "opcua", "enip"])
def whole_plant(request: pytest.FixtureRequest) -> Iterator[tuple[PlantServers, RawClient]]:
    """The whole plant on one protocol, ticking at 50 Hz, and a raw client of that protocol."""
    protocol: str = request.param
    servers = PlantServers(FAST, protocols=[protocol], host=HOST, tick_hz=50.0).start()
    client = connect(protocol, HOST, servers.ports[protocol])
    try:
        yield servers, client
    finally:
        client.close()
        servers.stop()


def test_client_commands_drive_the_plant_and_process_values_come_back(
    whole_plant: tuple[PlantServers, RawClient],
) -> None:
    servers, client = whole_plant
    protocol = servers.protocols[0]
    assert set(servers.assignment.values()) == {protocol}
    servers.reset()
    assert client.read(LEVEL) == 0.0 and client.read(INLET_OPEN) is False
    writes_before = servers.servers[protocol].write_count(address(protocol, INLET))

    client.write(INLET, True)
    wait_until(lambda: client.read(LEVEL) > 5.0, 5.0, message=lambda: f"level {client.read(LEVEL)}")
    assert client.read(INLET_OPEN) is True
    # the ticker pulls commands but never writes them: the client's value stands, written once
    assert client.read(INLET) is True
    assert servers.servers[protocol].write_count(address(protocol, INLET)) == writes_before + 1
    client.write(INLET, False)
    wait_until(lambda: client.read(INLET_OPEN) is False, 5.0)
    settled, since = client.read(LEVEL), servers.time_s
    wait_until(lambda: servers.time_s > since + 0.3, 5.0)  # plant time, not a sleep
    assert client.read(LEVEL) == pytest.approx(settled)

    client.write("Line1/Mixer/Speed", 700)
    client.write("Line1/Mixer/RunCmd", True)
    wait_until(lambda: client.read("Line1/Mixer/Running") is True, 5.0)
    assert servers.value("Line1/Mixer/Speed") == 700

    client.write("Line1/Heater/Setpoint", 45.5)
    client.write("Line1/Heater/Enable", True)
    wait_until(lambda: client.read("Line1/Heater/Temperature") == pytest.approx(45.5), 5.0,
               message=lambda: f"temperature {client.read('Line1/Heater/Temperature')}")
    assert servers.value("Line1/Heater/Setpoint") == 45.5


@pytest.fixture(scope="module")
def stepped_servers() -> Iterator[PlantServers]:
    """The whole plant on Modbus with no ticker: each test advances it with ``sync_step``."""
    servers = PlantServers(PlantParams(valve_stroke_seconds=0.0, mixer_delay_seconds=0.0),
                           protocols=["modbus"], host=HOST).start(ticker=False)
    try:
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def stepped(stepped_servers: PlantServers) -> Iterator[tuple[PlantServers, RawModbus]]:
    stepped_servers.reset()
    client = RawModbus(HOST, stepped_servers.ports["modbus"])
    try:
        yield stepped_servers, client
    finally:
        client.close()
        stepped_servers.reset()


def steps(servers: PlantServers, count: int, dt: float = 0.1) -> None:
    for _ in range(count):
        servers.sync_step(dt)


def test_a_frozen_process_value_keeps_its_value_while_the_plant_moves_on(
    stepped: tuple[PlantServers, RawModbus],
) -> None:
    servers, client = stepped
    client.write(INLET, True)
    steps(servers, 10)
    assert client.read(LEVEL) == pytest.approx(5.0)
    servers.freeze(LEVEL, 42.0)
    steps(servers, 10)
    assert client.read(LEVEL) == 42.0  # stuck sensor
    assert servers.value(LEVEL) == pytest.approx(10.0)  # while the tank goes on filling
    steps(servers, 20)
    assert client.read(LEVEL) == 42.0
    servers.unfreeze(LEVEL)
    servers.sync_step(0.1)
    assert client.read(LEVEL) == pytest.approx(20.5)


def test_a_frozen_command_ignores_client_writes(stepped: tuple[PlantServers, RawModbus]) -> None:
    servers, client = stepped
    servers.freeze(INLET)
    client.write(INLET, True)
    steps(servers, 10)
    assert client.read(INLET) is True  # the client's write landed in the PLC memory...
    assert client.read(INLET_OPEN) is False and client.read(LEVEL) == 0.0  # ...but the program ignores it
    servers.unfreeze()
    servers.sync_step(0.1)
    assert client.read(INLET_OPEN) is True and client.read(LEVEL) == pytest.approx(0.5)


def test_a_stopped_server_refuses_clients_and_comes_back_on_its_port_with_current_values(
    stepped: tuple[PlantServers, RawModbus],
) -> None:
    servers, client = stepped
    port = servers.ports["modbus"]
    client.write(INLET, True)
    servers.sync_step(0.0)  # the plant has seen the command
    servers.stop_server("modbus")
    assert not servers.is_running("modbus")
    with pytest.raises(ConnectionError, match="refused"):
        RawModbus(HOST, port)
    steps(servers, 10)  # the plant goes on while its PLC's server is down
    assert servers.value(LEVEL) == pytest.approx(5.0)
    servers.start_server("modbus")
    assert servers.ports["modbus"] == port
    again = RawModbus(HOST, port)
    try:
        assert again.read(LEVEL) == pytest.approx(5.0)
        assert again.read(INLET) is True  # the command survived the restart
    finally:
        again.close()


def test_restart_and_drop_connections_break_the_client_connection(
    stepped: tuple[PlantServers, RawModbus],
) -> None:
    from pymodbus.exceptions import ConnectionException

    servers, client = stepped
    client.write(INLET, True)
    steps(servers, 2)
    servers.restart_server("modbus")
    with pytest.raises(ConnectionException):
        client.read(LEVEL)
    assert client.read(LEVEL) == pytest.approx(1.0)  # pymodbus reconnects on the next call
    assert client.read(INLET) is True
    servers.drop_connections("modbus")
    with pytest.raises(ConnectionException):
        client.read(LEVEL)
    assert servers.is_running("modbus") and client.read(LEVEL) == pytest.approx(1.0)


def test_mixer_fault_and_reset(stepped: tuple[PlantServers, RawModbus]) -> None:
    servers, client = stepped
    client.write("Line1/Mixer/RunCmd", True)
    servers.sync_step(0.1)
    assert client.read("Line1/Mixer/Running") is True
    servers.set_mixer_fault(True)
    assert servers.mixer_fault is True
    servers.sync_step(0.1)
    assert client.read("Line1/Mixer/Running") is False and client.read("Line1/Mixer/Fault") is True
    client.write(INLET, True)
    servers.freeze("Line1/Heater/Temperature", 80.0)
    steps(servers, 5)
    servers.reset()
    assert servers.frozen == frozenset()
    assert client.read("Line1/Mixer/Fault") is False and client.read("Line1/Mixer/RunCmd") is False
    assert client.read(INLET) is False and client.read(LEVEL) == 0.0
    assert client.read("Line1/Heater/Temperature") == 20.0


def test_paths_are_accepted_with_a_provider_and_unknown_ones_are_named(
    stepped: tuple[PlantServers, RawModbus],
) -> None:
    servers, _ = stepped
    assert servers.address_of("[plant]Line1/Tank/Level") == "IRF1"
    servers.write("[plant]Line1/Tank/InletValve/Cmd", True)
    assert servers.read(INLET) is True
    with pytest.raises(KeyError, match="unknown tag '\\[plant\\]Line1/Tank/Volume'"):
        servers.read("Line1/Tank/Volume")
    with pytest.raises(KeyError, match="no device 'opcua'"):
        servers.stop_server("opcua")


def test_a_nan_setpoint_from_a_client_is_not_taken(stepped: tuple[PlantServers, RawModbus]) -> None:
    servers, client = stepped
    client.write("Line1/Heater/Setpoint", float("nan"))
    servers.sync_step(0.1)  # must not raise: one bad value does not stop the plant
    assert servers.value("Line1/Heater/Setpoint") == 60.0
    client.write("Line1/Heater/Setpoint", 50.0)
    servers.sync_step(0.1)
    assert servers.value("Line1/Heater/Setpoint") == 50.0


def test_a_value_frozen_while_the_server_is_down_is_served_when_it_starts(
    stepped: tuple[PlantServers, RawModbus],
) -> None:
    servers, _ = stepped
    servers.stop_server("modbus")
    servers.freeze(LEVEL, 77.0)
    steps(servers, 3)
    servers.start_server("modbus")
    client = RawModbus(HOST, servers.ports["modbus"])
    try:
        assert client.read(LEVEL) == 77.0
        steps(servers, 3)
        assert client.read(LEVEL) == 77.0
        servers.unfreeze(LEVEL)
        servers.sync_step(0.1)
        assert client.read(LEVEL) == 0.0
    finally:
        client.close()
