"""An engineer's own config served by ``simulate_config``: each protocol's own client library reads and
writes every tag at its configured address with its type, initial values are served, follows keep
their delay, the model integrates a level, and ``advance`` moves simulated time at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simulators.engine import SimulatedPlant
from simulators.testing import simulate_config
from tests.simulators.own_plant import write_project
from tests.waiting import wait_until

HOST = "127.0.0.1"
CMD, OPEN, LEVEL = "[site]Area9/Valve3/Cmd", "[site]Area9/Valve3/Open", "[site]Area9/Silo/Level"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedPlant]:
    with simulate_config(write_project(tmp_path_factory.mktemp("own_plant"))) as plant:
        yield plant


@pytest.fixture
def fresh(sim: SimulatedPlant) -> SimulatedPlant:
    sim.reset()
    return sim


class Modbus:
    """pymodbus's own client on one device of the plant."""

    def __init__(self, port: int, unit: int) -> None:
        from pymodbus.client import ModbusTcpClient

        self.client = ModbusTcpClient(HOST, port=port, timeout=3, retries=0)
        assert self.client.connect()  # type: ignore[no-untyped-call]
        self.unit = unit
        self.types = self.client.DATATYPE

    def registers(self, table: str, offset: int, kind: Any, word_order: str = "big") -> Any:
        read = self.client.read_holding_registers if table == "HR" else self.client.read_input_registers
        response = read(offset, count=kind.value[1], device_id=self.unit)
        assert not response.isError(), response
        return self.client.convert_from_registers(list(response.registers), kind, word_order=word_order)

    def bit(self, table: str, offset: int) -> bool:
        read = self.client.read_coils if table == "C" else self.client.read_discrete_inputs
        response = read(offset, count=1, device_id=self.unit)
        assert not response.isError(), response
        return bool(response.bits[0])

    def close(self) -> None:
        self.client.close()  # type: ignore[no-untyped-call]


def test_modbus_clients_read_and_write_every_tag_at_its_address_with_its_type(fresh: SimulatedPlant) -> None:
    silo = Modbus(fresh.ports["silo"], unit=3)  # unit_id = 3
    packer = Modbus(fresh.ports["packer"], unit=1)  # zero_based, word_order = "little"
    try:
        assert silo.registers("IR", 9, silo.types.FLOAT32) == 62.5  # IRF10: registers 9-10, initial
        assert silo.registers("HR", 19, silo.types.FLOAT32) == 80.0  # HRF20
        assert silo.registers("HR", 29, silo.types.UINT16) == 40000  # HR30 with type UInt16
        assert silo.bit("C", 2) is False and silo.bit("DI", 2) is False  # C3, DI3
        assert packer.registers("HR", 0, packer.types.INT32, "little") == -70000  # HRI0, zero-based
        assert packer.registers("HR", 4, packer.types.FLOAT64, "little") == 12.25  # HRD4: 4 registers

        response = silo.client.write_registers(19, silo.client.convert_to_registers(55.5, silo.types.FLOAT32),
                                               device_id=3)
        assert not response.isError()
        registers = packer.client.convert_to_registers(123456, packer.types.INT32, word_order="little")
        assert not packer.client.write_registers(0, registers, device_id=1).isError()
        assert not silo.client.write_coil(2, True, device_id=3).isError()
        # the plant takes what clients write (at its next tick)
        wait_until(lambda: fresh.value("[site]Area9/Silo/Setpoint") == 55.5, 5.0)
        wait_until(lambda: fresh.value("[site]Area9/Packer/Count") == 123456, 5.0)
        wait_until(lambda: fresh.value(CMD) is True, 5.0)
        # read-only tags refuse client writes, as the config says; a wrong unit gets no answer
        assert silo.client.write_registers(9, [1, 2], device_id=3).isError()
    finally:
        silo.close()
        packer.close()


def test_opcua_clients_find_the_node_ids_exactly_as_written(fresh: SimulatedPlant) -> None:
    from asyncua import ua
    from asyncua.sync import Client

    client = Client(fresh.endpoint("line"), timeout=5)
    client.connect()
    try:
        # nsu= URIs are registered first: ns=2 is urn:acme:area9, ns=3 the next one the tags use
        assert client.get_namespace_array()[2:] == ["urn:acme:area9", "urn:exchange:simulator:line:ns3"]
        speed = client.get_node("ns=2;s=Area9.Motor.Speed")
        assert speed.read_value() == 900 and speed.read_data_type_as_variant_type() == ua.VariantType.Int16
        run = client.get_node("ns=2;i=1001")
        assert run.read_value() is False and run.read_data_type_as_variant_type() == ua.VariantType.Boolean
        running = client.get_node("ns=2;s=Motor.Running")  # the nsu= address, by its index
        assert running.read_value() is False
        recipe = client.get_node("ns=3;s=Recipe.Name")
        assert recipe.read_value() == "wheat" and recipe.read_data_type_as_variant_type() == ua.VariantType.String

        speed.write_value(ua.DataValue(ua.Variant(1200, ua.VariantType.Int16)))
        recipe.write_value(ua.DataValue(ua.Variant("barley", ua.VariantType.String)))
        with pytest.raises(ua.UaStatusCodeError, match="BadTypeMismatch"):
            speed.write_value(ua.DataValue(ua.Variant(1.5, ua.VariantType.Double)))
        with pytest.raises(ua.UaStatusCodeError, match="BadUserAccessDenied|BadNotWritable"):
            running.write_value(ua.DataValue(ua.Variant(True, ua.VariantType.Boolean)))  # access = "ro"
        wait_until(lambda: fresh.value("[site]Area9/Motor/Speed") == 1200, 5.0)
        wait_until(lambda: fresh.value("[site]Area9/Motor/Recipe") == "barley", 5.0)

        run.write_value(ua.DataValue(ua.Variant(True, ua.VariantType.Boolean)))
        wait_until(lambda: running.read_value() is True, 5.0)  # follows Run after 100 ms
    finally:
        tloop = client.tloop
        try:
            tloop.post(client.aio_obj.disconnect())
            assert tloop.loop is not None
            tloop.post(tloop.loop.shutdown_default_executor())  # else an executor thread stays behind
        finally:
            tloop.stop()


def test_a_logix_client_reads_and_writes_scalars_program_tags_and_array_elements(fresh: SimulatedPlant) -> None:
    from pylogix import PLC

    plc = PLC(HOST, port=fresh.ports["logix"], timeout=5.0)
    try:
        assert plc.Read("Heater_Temp").Value == 21.5
        assert plc.Read("Program:Main.HeaterOn").Value is True or plc.Read("Program:Main.HeaterOn").Value == 1
        assert plc.Read("Zones[2]").Value == 7
        assert plc.Write("Heater_Temp", 33.25).Status == "Success"
        assert plc.Write("Zones[2]", -12).Status == "Success"
        wait_until(lambda: fresh.value("[site]Area9/Heater/Temp") == 33.25, 5.0)
        wait_until(lambda: fresh.value("[site]Area9/Heater/Zone2") == -12, 5.0)
        assert plc.Read("Zones[2]").Value == -12
    finally:
        plc.Close()


def test_exchanges_own_drivers_read_every_tag_good_through_the_written_config(fresh: SimulatedPlant) -> None:
    """The written config reaches the simulator: Exchange's tag layer (pymodbus, asyncua, pycomm3 with
    the config's tag types) reads every tag Good, with its initial value, and writes reach the plant."""
    from exchange._config import load_config
    from exchange._tags.service import TagService
    from exchange._values import Quality

    assert fresh.config_path is not None
    service = TagService(load_config(fresh.config_path, env={}))
    try:
        paths = list(fresh.spec.point_of_tag)
        values = dict(zip(paths, service.read(paths)))
        assert {p: v.quality for p, v in values.items()} == dict.fromkeys(paths, Quality.GOOD)
        assert values[LEVEL].value == 62.5 and values["[site]Area9/Motor/Recipe"].value == "wheat"
        assert values["[site]Area9/Heater/Zone2"].value == 7 and values["[site]Area9/Packer/Weight"].value == 12.25
        service.write(["[site]Area9/Heater/Zone2", "[site]Area9/Motor/Speed"], [9, 300])
        wait_until(lambda: fresh.value("[site]Area9/Heater/Zone2") == 9, 5.0)
        wait_until(lambda: fresh.value("[site]Area9/Motor/Speed") == 300, 5.0)
    finally:
        service.close()


def test_a_follower_takes_its_source_value_after_its_delay(fresh: SimulatedPlant) -> None:
    """Valve3/Open follows Valve3/Cmd after 300 ms, at tick_ms = 20: never earlier, and within a few
    ticks after (wide on a loaded machine, so the upper bound is generous)."""
    def took_s(wanted: bool) -> float:
        start = time.monotonic()
        fresh.write(CMD, wanted)
        wait_until(lambda: fresh.read(OPEN) is wanted, 5.0, interval_s=0.005)
        return time.monotonic() - start

    for wanted in (True, False):
        took = took_s(wanted)
        assert 0.3 <= took < 0.3 + 1.0, took


def test_a_follower_waits_its_whole_delay_after_a_late_tick(fresh: SimulatedPlant) -> None:
    """A tick held up (here: the plant's lock held 100 ms, as a busy client or a loaded machine
    does) must not date a write made right after it earlier than it was: its follower still waits
    300 ms. Before, the write was dated from the late tick's end while the plant's clock stood at
    its start (and capped at one tick after it), so the follower moved up to the hold early."""
    for wanted in (True, False):
        with fresh.lock:
            time.sleep(0.1)  # the fault: every tick in this window waits for the lock
        start = time.monotonic()
        fresh.write(CMD, wanted)
        wait_until(lambda wanted=wanted: fresh.read(OPEN) is wanted, 5.0, interval_s=0.005)
        took = time.monotonic() - start
        assert 0.3 <= took < 0.3 + 1.0, took


def test_the_model_integrates_the_level_while_the_valve_is_open(fresh: SimulatedPlant) -> None:
    fresh.write(CMD, True)
    wait_until(lambda: fresh.read(OPEN) is True, 5.0)
    since_s, level = fresh.time_s, fresh.value(LEVEL)
    wait_until(lambda: fresh.time_s >= since_s + 1.0, 5.0)  # a simulated second (ticks of 20 ms)
    # 2 %/s; the plant steps by the real time elapsed, so allow for the tick in flight
    assert fresh.value(LEVEL) == pytest.approx(level + 2.0 * (fresh.time_s - since_s), abs=0.1)
    fresh.write(CMD, False)
    wait_until(lambda: fresh.read(OPEN) is False, 5.0)
    settled, since_s = fresh.value(LEVEL), fresh.time_s
    wait_until(lambda: fresh.time_s >= since_s + 0.5, 5.0)
    assert fresh.value(LEVEL) == settled


def test_advance_moves_the_model_and_the_follows_without_waiting(tmp_path: Path) -> None:
    """A 20-minute fill in one call: advance(1200) steps the model and the follows by 1,200 simulated
    seconds in ticks of 20 ms (60,000 steps) and serves the result."""
    with simulate_config(write_project(tmp_path), ticker=False) as sim:
        sim.write(LEVEL, 0.0)
        sim.write(CMD, True)
        sim.advance(0.28)
        assert sim.read(OPEN) is False and sim.read(LEVEL) == 0.0  # the valve is still opening
        sim.advance(0.02)
        assert sim.read(OPEN) is True
        started = time.monotonic()
        sim.advance(20 * 60)
        assert time.monotonic() - started < 30  # the point: far less than 20 minutes
        assert sim.read(LEVEL) == 100.0  # 2 %/s: full after 50 s, and held at 100
        assert sim.time_s == pytest.approx(0.3 + 1200)
        sim.write(CMD, False)
        sim.write(LEVEL, 10.0)
        sim.advance(10)  # the valve closes 0.3 s later: 14 steps of 20 ms still fill
        assert sim.read(LEVEL) == pytest.approx(10.0 + 14 * 0.02 * 2.0, abs=1e-5) and sim.read(OPEN) is False
        sim.write(LEVEL, 10.0)
        sim.write(CMD, True)
        sim.advance(0.3 + 5)  # opens after 0.3 s, then 5 s of filling (the step it opens in included)
        assert sim.read(LEVEL) == pytest.approx(20.0 + 0.02 * 2.0, abs=1e-5)


def test_two_simulators_of_one_config_run_side_by_side(tmp_path: Path) -> None:
    """Free ports, separate config files, separate values (parallel test workers)."""
    path = write_project(tmp_path)
    with simulate_config(path, ticker=False) as one, simulate_config(path, ticker=False) as two:
        assert set(one.ports.values()).isdisjoint(two.ports.values())
        assert one.config_path != two.config_path
        one.write(LEVEL, 11.0)
        two.write(LEVEL, 22.0)
        assert (one.read(LEVEL), two.read(LEVEL)) == (11.0, 22.0)


def test_the_demo_lines_printed_config_is_served_by_the_same_simulator(tmp_path: Path) -> None:
    """One simulator, not two: the config ``exchange simulate`` prints for the demo line (devices,
    tags, ``[simulation]`` naming ``simulators.plant`` as its model) is an ordinary config that
    ``--from-config`` serves: the inlet's feedback follows after its stroke, the model fills the tank."""
    from simulators.plant_servers import PlantServers

    demo = PlantServers(protocols=["modbus", "opcua"])  # not started: only its config is wanted
    path = tmp_path / "exchange.toml"
    path.write_text(demo.config_text, encoding="utf-8")
    inlet, inlet_open, level = ("[plant]Line1/Tank/InletValve/Cmd", "[plant]Line1/Tank/InletValve/Open",
                                "[plant]Line1/Tank/Level")
    with simulate_config(path, ticker=False) as sim:
        assert sim.spec.model == "simulators.plant" and set(sim.spec.devices) == {"sim_modbus", "sim_opcua"}
        assert sim.read("[plant]Line1/Heater/Temperature") == 20.0  # initial: the ambient
        sim.write(inlet, True)
        sim.advance(0.1)
        assert sim.read(inlet_open) is False and sim.read(level) == 0.0
        sim.advance(0.1)  # valve_stroke_seconds: open, and the tick it opens in fills (tick_ms = 100)
        assert sim.read(inlet_open) is True and sim.read(level) == pytest.approx(0.5, abs=1e-4)
        sim.advance(4.0)
        assert sim.read(level) == pytest.approx(20.5, abs=1e-4)  # 5 %/s
