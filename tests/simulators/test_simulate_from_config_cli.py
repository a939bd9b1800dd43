"""``exchange simulate --from-config`` as a real process: it serves an engineer's config on its ports
(or free ones) and writes the config that reaches it."""

from __future__ import annotations

import os
import signal
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from exchange._config import load_config
from tests.conftest import free_port
from tests.forkserver import ForkServer
from tests.simulators.own_plant import CONFIG, write_project
from tests.simulators.test_simulate_cli import SimulateProcess


@pytest.fixture
def launch() -> Iterator[list[SimulateProcess]]:
    started: list[SimulateProcess] = []
    yield started
    for proc in started:
        proc.kill()


def modbus_read_float(port: int, unit: int, offset: int) -> float:
    from pymodbus.client import ModbusTcpClient

    client = ModbusTcpClient("127.0.0.1", port=port, timeout=3, retries=0)
    assert client.connect()  # type: ignore[no-untyped-call]
    try:
        response = client.read_input_registers(offset, count=2, device_id=unit)
        assert not response.isError(), response
        return float(client.convert_from_registers(list(response.registers), client.DATATYPE.FLOAT32))
    finally:
        client.close()  # type: ignore[no-untyped-call]


def test_free_ports_and_a_config_out_in_another_folder(launch: list[SimulateProcess], tmp_path: Path) -> None:
    project = tmp_path / "project"
    write_project(project)
    out = tmp_path / "elsewhere" / "sim.toml"
    out.parent.mkdir()
    # a bare --from-config: the config the other commands read, ./exchange.toml here
    sim = SimulateProcess(["--from-config", "--free-ports", "--config-out", str(out)], project)
    launch.append(sim)
    sim.wait_ready()
    written = tomllib.loads(out.read_text())
    config = load_config(out, env={})
    devices = written["devices"]
    # every device on the simulator's host and a real port; what a gateway needs to reach each
    assert {d.get("host") for n, d in devices.items() if n != "line"} == {"127.0.0.1"}
    assert 0 not in [d.get("port", 1) for d in devices.values()]
    assert devices["silo"]["unit_id"] == 3 and devices["packer"]["word_order"] == "little"
    assert devices["line"]["url"].startswith("opc.tcp://127.0.0.1:") and devices["line"]["url"].endswith("/area9/")
    assert "username" not in devices["line"] and "password" not in devices["line"]  # served without security
    assert devices["logix"]["upload_tags"] is False
    assert written["tags"]["[site]Area9/Heater/On"]["type"] == "Boolean"  # a type for every Logix tag
    # the file moved: relative paths still name the project's files
    assert written["store"]["url"] == f"sqlite:///{project / 'var' / 'exchange.db'}"
    assert written["apps"]["paths"] == [str(project / "apps")]
    assert written["simulation"]["model"] == str(project / "sim" / "area9.py")
    assert config.simulation.tags["[site]Area9/Silo/Level"].initial == 62.5
    # the stderr lines name each device where it is served
    for name in ("silo", "packer", "line", "logix"):
        assert any(line.startswith(f"  {name} (") for line in sim.lines), sim.lines
    assert modbus_read_float(int(devices["silo"]["port"]), 3, 9) == 62.5
    code, stdout = sim.stop(signal.SIGTERM)
    assert code == 0, "\n".join(sim.lines[-20:])
    assert stdout == ""


def test_the_configured_ports_are_served_and_the_config_goes_to_stdout(
    launch: list[SimulateProcess], tmp_path: Path,
) -> None:
    ports = []
    while len(set(ports)) < 4:
        ports.append(free_port())
    ports = list(dict.fromkeys(ports))
    text = CONFIG.replace('host = "10.0.0.5"\nport = 502', f'host = "10.0.0.5"\nport = {ports[0]}')
    text = text.replace('host = "10.0.0.6"\nport = 502', f'host = "10.0.0.6"\nport = {ports[1]}')
    text = text.replace("10.0.0.7:4840", f"10.0.0.7:{ports[2]}")
    text = text.replace('host = "10.0.0.8"', f'host = "10.0.0.8"\nport = {ports[3]}')
    write_project(tmp_path, config=text)
    sim = SimulateProcess(["--from-config", "exchange.toml"], tmp_path)
    launch.append(sim)
    sim.wait_ready()
    assert modbus_read_float(ports[0], 3, 9) == 62.5
    code, stdout = sim.stop(signal.SIGINT)
    assert code == 0, "\n".join(sim.lines[-20:])
    written = tomllib.loads(stdout)
    assert [written["devices"][name].get("port") for name in ("silo", "packer", "logix")] == [
        ports[0], ports[1], ports[3]]
    assert written["devices"]["line"]["url"] == f"opc.tcp://127.0.0.1:{ports[2]}/area9/"
    assert written["store"]["url"] == "sqlite:///var/exchange.db"  # printed for this folder: as written


@pytest.mark.parametrize(
    ("args", "env", "fragment"),
    [
        (("simulate", "--from-config"), {}, "--from-config: no config to serve: give --from-config FILE, or "
                                            "exchange --config FILE, or set EXCHANGE_CONFIG"),
        (("--config", "plant.toml", "simulate", "--from-config"), {}, "'plant.toml' does not exist"),
        (("simulate", "--from-config", "--free-ports"), {"EXCHANGE_CONFIG": "line9.toml"},
         "'line9.toml' does not exist"),
        (("simulate", "--from-config", "nowhere.toml"), {}, "'nowhere.toml' does not exist"),
    ],
    ids=["none-found", "global-config-missing", "environment-config-missing", "named-file-missing"],
)
def test_from_config_names_the_config_it_looked_for(
    tmp_path: Path, exchange_zygote: ForkServer, args: tuple[str, ...], env: dict[str, str], fragment: str
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    done = exchange_zygote.run(args, cwd=tmp_path, env={**clean, **env}, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert fragment in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
