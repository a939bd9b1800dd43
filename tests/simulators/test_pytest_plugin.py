"""The plant engineers' fixtures: a served plant with its config, and faults undone after each test."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from exchange._config import load_config
from simulators.opcua_extras import CONTROL_PATH, PROFILE_PATH
from simulators.plant_servers import PlantServers
from simulators.testing import PlantFaults, wait_until

ROOT = Path(__file__).resolve().parents[2]
LEVEL = "[plant]Line1/Tank/Level"
INLET = "[plant]Line1/Tank/InletValve/Cmd"
OPCUA_EXTRAS = {f"[plant]{PROFILE_PATH}", f"[plant]{CONTROL_PATH}"}


def test_sim_plant_serves_every_protocol_and_writes_a_matching_config(sim_plant: PlantServers) -> None:
    assert set(sim_plant.servers) == {"modbus", "opcua", "enip"}
    assert sim_plant.config_path is not None and sim_plant.config_path.name == "exchange.toml"
    config = load_config(sim_plant.config_path, env={})
    assert config.devices["sim_modbus"].settings["port"] == sim_plant.ports["modbus"]
    assert config.devices["sim_enip"].settings["port"] == sim_plant.ports["enip"]
    assert str(sim_plant.ports["opcua"]) in config.devices["sim_opcua"].settings["url"]
    assert tomllib.loads(sim_plant.config_text) == tomllib.loads(sim_plant.config_path.read_text())
    for path, tag in config.tags.items():
        device_protocol = config.devices[tag.device].driver
        if path in OPCUA_EXTRAS:  # not plant points: the array and the method's object, with the mixer
            assert device_protocol == "opcua" == sim_plant.served_by("Line1/Mixer/Speed")
            continue
        assert sim_plant.served_by(path) == device_protocol
        assert sim_plant.address_of(path) == tag.address
        sim_plant.read(path)  # every configured address exists on its server


def test_fresh_sim_plant_starts_empty_and_follows_commands(fresh_sim_plant: PlantServers) -> None:
    plant = fresh_sim_plant
    assert plant.read(LEVEL) == 0.0 and plant.read(INLET) is False
    plant.write(INLET, True)
    wait_until(lambda: plant.read(LEVEL) > 0.0, 5.0)
    assert plant.read("[plant]Line1/Tank/InletValve/Open") is True


def test_plant_faults_freeze_stop_and_restart(fresh_sim_plant: PlantServers, plant_faults: PlantFaults) -> None:
    from tests.simulators.raw_clients import RawModbus

    plant = fresh_sim_plant
    plant_faults.freeze(LEVEL, 55.0)
    plant.write(INLET, True)
    wait_until(lambda: plant.value(LEVEL) > 1.0, 5.0)
    assert plant.read(LEVEL) == 55.0
    plant_faults.unfreeze(LEVEL)
    wait_until(lambda: plant.read(LEVEL) < 55.0, 5.0)

    port = plant.ports["modbus"]
    plant_faults.stop("modbus")
    with pytest.raises(ConnectionError):
        RawModbus("127.0.0.1", port)
    level = plant.value(LEVEL)
    wait_until(lambda: plant.value(LEVEL) > level + 0.5, 5.0)  # the plant goes on
    plant_faults.start("modbus")
    client = RawModbus("127.0.0.1", port)
    try:
        wait_until(lambda: client.read(LEVEL.removeprefix("[plant]")) > level, 5.0)
        plant_faults.restart("opcua")
        assert plant.is_running("opcua") and plant.ports["opcua"] > 0
        plant_faults.mixer_fault()
        wait_until(lambda: plant.read("[plant]Line1/Mixer/Fault") is True, 5.0)
    finally:
        client.close()


def test_plant_faults_undo_clears_everything(sim_plant: PlantServers) -> None:
    faults = PlantFaults(sim_plant)
    faults.stop("enip")
    faults.freeze("Line1/Heater/Temperature", 10.0)
    faults.mixer_fault()
    assert not sim_plant.is_running("enip")
    faults.undo()
    assert sim_plant.is_running("enip")
    assert sim_plant.frozen == frozenset()
    assert sim_plant.mixer_fault is False
    wait_until(lambda: sim_plant.read("Line1/Heater/Temperature") >= 19.0, 5.0)


def test_importing_the_plugin_loads_no_protocol_library() -> None:
    code = ("import sys, simulators.pytest_plugin; "
            "print(sorted(m for m in sys.modules if m == 'simulators.plant_servers' or m.split('.')[0] in "
            "('asyncua', 'pymodbus', 'cpppo', 'pycomm3', 'pylogix')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_plant_engineers_test_suite_uses_the_plugin(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.fixture(scope="session")
        def sim_plant_protocols():
            return ("modbus",)   # the whole plant on one Modbus server
    """))
    (tmp_path / "test_fill.py").write_text(textwrap.dedent("""
        from exchange._config import load_config
        from simulators.testing import wait_until

        def test_fill(fresh_sim_plant):
            config = load_config(fresh_sim_plant.config_path, env={})
            assert {t.device for t in config.tags.values()} == {"sim_modbus"}
            fresh_sim_plant.write("[plant]Line1/Tank/InletValve/Cmd", True)
            wait_until(lambda: fresh_sim_plant.read("[plant]Line1/Tank/Level") > 0.2, 5.0)

        def test_stuck_sensor(fresh_sim_plant, plant_faults):
            plant_faults.freeze("[plant]Line1/Tank/Level", 99.0)
            assert fresh_sim_plant.read("[plant]Line1/Tank/Level") == 99.0

        def test_after_faults(sim_plant):
            assert sim_plant.frozen == frozenset()
    """))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if any(ep.name == "exchange_plant" for ep in entry_points(group="pytest11")):
        plugin: list[str] = []  # installed: pytest finds the plugin through its entry point, as users get it
    else:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        plugin = ["-p", "simulators.pytest_plugin"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugin, "-p", "no:cacheprovider", str(tmp_path)],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "3 passed" in result.stdout


def test_the_config_drives_exchanges_own_tag_layer(fresh_sim_plant: PlantServers) -> None:
    from exchange._tags.service import TagService
    from exchange._values import Quality

    plant = fresh_sim_plant
    assert plant.config_path is not None
    service = TagService(load_config(plant.config_path, env={}))
    try:
        paths = [str(path) for path in service.config.tags if path not in OPCUA_EXTRAS]
        values = service.read(paths)
        assert [v.quality for v in values] == [Quality.GOOD] * 12
        assert dict(zip(paths, (v.value for v in values)))["[plant]Line1/Heater/Setpoint"] == 60.0
        commands = ["[plant]Line1/Tank/InletValve/Cmd", "[plant]Line1/Mixer/RunCmd", "[plant]Line1/Heater/Enable"]
        before = {path: plant.servers[plant.served_by(path)].write_count(plant.address_of(path)) for path in commands}
        service.write(commands, [True, True, True])
        wait_until(lambda: service.read_one("[plant]Line1/Tank/Level").value > 0.0, 5.0)
        wait_until(lambda: service.read_one("[plant]Line1/Mixer/Running").value is True, 5.0)
        wait_until(lambda: service.read_one("[plant]Line1/Heater/Temperature").value > 20.0, 5.0)
        for path in commands:  # one write request per command, on each protocol
            assert plant.servers[plant.served_by(path)].write_count(plant.address_of(path)) == before[path] + 1
    finally:
        service.close()


def test_a_crashed_server_does_not_stop_the_rest_of_the_plant(
    fresh_sim_plant: PlantServers, caplog: pytest.LogCaptureFixture,
) -> None:
    from simulators.servers.enip import EnipSimServer

    plant = fresh_sim_plant
    enip = plant.servers["enip"]
    assert isinstance(enip, EnipSimServer)
    enip.kill()  # the heater's controller crashes, behind the plant's back
    try:
        plant.write(INLET, True)
        plant.write("Line1/Heater/Setpoint", 42.0)  # a change the plant cannot send to its server
        wait_until(lambda: plant.read(LEVEL) > 0.5, 5.0)  # the tank on Modbus carries on
        since = plant.time_s
        wait_until(lambda: plant.time_s > since + 1.0, 10.0)  # ten ticks and more
        # each failure is reported once, not at every tick
        assert caplog.text.count("reading device 'sim_enip' failed") == 1
        assert caplog.text.count("updating device 'sim_enip' failed") == 1
    finally:
        enip.start()
    wait_until(lambda: enip.get("Heater_Setpoint") == 42.0, 5.0)  # sent once the controller is back
