"""The simulated plant on the field protocols of issue 30, reached by Exchange from its printed config.

Modbus RTU on a serial line (the simulator's own socat pty pair) and RTU frames over TCP: commands
drive the plant, a stopped server is Bad quality and comes back. OPC UA: the mixer's array and its
SetSpeed method, with the refusals' status codes in the error.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange._config import config_from_dict
from exchange._tags.service import TagService
from exchange.errors import DeviceError, TagRangeError
from simulators.opcua_extras import PROFILE_ADDRESS, PROFILE_INITIAL, SPEED_ADDRESS
from simulators.plant import PlantParams
from simulators.plant_servers import PlantServers
from simulators.testing import wait_until

FAST = PlantParams(inflow_percent_per_second=50.0, valve_stroke_seconds=0.0, mixer_delay_seconds=0.0)
LEVEL, INLET = "[plant]Line1/Tank/Level", "[plant]Line1/Tank/InletValve/Cmd"
PROFILE, CONTROL, SPEED = "[plant]Line1/Mixer/Profile", "[plant]Line1/Mixer/Control", "[plant]Line1/Mixer/Speed"


def service(servers: PlantServers, **device: object) -> TagService:
    """Exchange from the plant's printed config, with short timeouts (the server is local)."""
    raw = tomllib.loads(servers.config_text)
    for settings in raw["devices"].values():
        settings.update(device)
    return TagService(config_from_dict(raw, env={}))


@pytest.mark.parametrize("transport", ["serial", "rtu-over-tcp"])
def test_the_plant_serves_modbus_rtu_and_a_stopped_server_is_bad_quality(transport: str) -> None:
    servers = PlantServers(FAST, protocols=["modbus"], tick_hz=50.0, modbus_transport=transport).start()
    svc = service(servers, timeout_ms=300, comm_timeout_s=1)
    try:
        device = tomllib.loads(servers.config_text)["devices"]["sim_modbus"]
        assert device["transport"] == transport
        if transport == "serial":
            assert Path(device["serial_port"]).exists() and "host" not in device
        svc.write([INLET], [True])
        # A read may time out on a loaded machine (300 ms): a bad reading has no value, so look again.
        wait_until(lambda: (svc.read([LEVEL])[0].value or 0.0) > 5.0, 10.0, message=lambda: f"{svc.read([LEVEL])}")
        servers.stop_server("modbus")  # the device powered off; on serial the line stays, silent
        wait_until(lambda: svc.read([LEVEL])[0].quality.value != "Good", 5.0)
        servers.start_server("modbus")
        wait_until(lambda: svc.read([LEVEL])[0].quality.value == "Good", 10.0, message=lambda: f"{svc.read([LEVEL])}")
        assert svc.read([INLET])[0].value is True  # the plant gave the restarted server its commands back
    finally:
        svc.close()
        servers.stop()
    if transport == "serial":
        assert not Path(device["serial_port"]).exists()  # the pty pair goes with the plant


@pytest.fixture(scope="module")
def opcua_plant() -> Iterator[tuple[PlantServers, TagService]]:
    servers = PlantServers(FAST, protocols=["opcua"], tick_hz=50.0).start()
    svc = service(servers, timeout_ms=2000)
    try:
        yield servers, svc
    finally:
        svc.close()
        servers.stop()


def test_the_mixer_serves_an_array_tag(opcua_plant: tuple[PlantServers, TagService]) -> None:
    servers, svc = opcua_plant
    servers.reset()
    assert svc.read([PROFILE])[0].value == list(PROFILE_INITIAL)
    svc.write([PROFILE], [[100, 200.0, 300, 400, 500]])  # converted to the node's Int16 element by element
    assert servers.servers["opcua"].get(PROFILE_ADDRESS) == [100, 200, 300, 400, 500]
    with pytest.raises(TagRangeError, match=r"element \[1\].*1500"):  # the tag's max, per element
        svc.write([PROFILE], [[0, 1600, 0, 0, 0]])
    servers.reset()
    assert servers.servers["opcua"].get(PROFILE_ADDRESS) == list(PROFILE_INITIAL)


def test_a_list_of_another_length_is_refused_before_it_is_sent(opcua_plant: tuple[PlantServers, TagService]) -> None:
    """A five-element profile took six elements, and none: its tag says Int16[5], and its node
    declares five (ArrayDimensions), which holds a tag that says Int16[] as well."""
    servers, svc = opcua_plant
    servers.reset()
    raw = tomllib.loads(servers.config_text)
    raw["tags"][PROFILE]["type"] = "Int16[]"
    untold = TagService(config_from_dict(raw, env={}))
    server = servers.servers["opcua"]
    try:
        before = server.write_count()
        for value in ([0, 100, 200, 300, 400, 500], []):
            with pytest.raises(TagRangeError, match=rf"tag '\[plant\]Line1/Mixer/Profile' .* holds 5 elements "
                               rf'\(type = "Int16\[5\]"\), got a list of {len(value)}; nothing was written'):
                svc.write([PROFILE], [value])
            with pytest.raises(TagRangeError, match=rf"tag '\[plant\]Line1/Mixer/Profile' .*: the node holds 5 "
                               rf"elements \(its ArrayDimensions\), got a list of {len(value)}"):
                untold.write([PROFILE], [value])
        assert server.write_count() == before  # nothing reached the server
        assert server.get(PROFILE_ADDRESS) == list(PROFILE_INITIAL)
        untold.write([PROFILE], [[1, 2, 3, 4, 5]])  # the node's length goes through
        assert server.get(PROFILE_ADDRESS) == [1, 2, 3, 4, 5]
    finally:
        untold.close()
        servers.reset()


def test_the_mixer_serves_a_method_whose_refusals_carry_their_status(
    opcua_plant: tuple[PlantServers, TagService],
) -> None:
    servers, svc = opcua_plant
    servers.reset()
    opcua = servers.servers["opcua"]
    calls = opcua.call_count("SetSpeed")  # type: ignore[attr-defined]
    assert svc.call(CONTROL, "SetSpeed", [900]) == [0]  # the previous setpoint
    assert servers.value(SPEED) == 900  # the plant took it before the call returned
    assert svc.call(CONTROL, "SetSpeed", [450.0]) == [900]  # typed to the argument's Int16
    with pytest.raises(DeviceError, match="BadOutOfRange") as refused:
        svc.call(CONTROL, "SetSpeed", [1501])
    assert refused.value.status_code == 0x803C0000  # type: ignore[attr-defined]
    servers.set_mixer_fault(True)
    wait_until(lambda: svc.read(["[plant]Line1/Mixer/Fault"])[0].value is True, 5.0)
    with pytest.raises(DeviceError, match="BadInvalidState"):
        svc.call(CONTROL, "SetSpeed", [100])
    assert opcua.get(SPEED_ADDRESS) == 450  # refused calls changed nothing
    assert opcua.call_count("SetSpeed") == calls + 2  # type: ignore[attr-defined]
