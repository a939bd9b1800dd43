"""``exchange simulate`` as a real process: its config parses, and raw clients drive the live plant."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from click.testing import CliRunner

from exchange._cli.main import cli
from exchange._config import config_from_dict
from simulators.ports import check_port_free
from simulators.spec import SimulationError
from simulators.testing import wait_until
from tests.conftest import free_port
from tests.simulators.raw_clients import RawClient, RawLogix, RawModbus, RawOpcUa, connect
from tests.sweeps import sample

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


class SimulateProcess:
    """``exchange simulate ARGS`` in a subprocess; stderr is drained by a thread into ``lines``."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        script = Path(sys.executable).with_name("exchange")  # the console script, once installed
        entry = [str(script)] if script.is_file() else [sys.executable, "-c",
                                                        "from exchange._cli.main import main; main()"]
        command = [*entry, "simulate", *args]
        self.proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        assert self.proc.stderr is not None
        self._reader = threading.Thread(target=self._drain, args=(self.proc.stderr,), daemon=True)
        self._reader.start()

    def _drain(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        wait_until(lambda: "simulated plant ready" in self.lines or self.proc.poll() is not None, timeout_s,
                   message=lambda: "\n".join(self.lines[-20:]))
        assert "simulated plant ready" in self.lines, "\n".join(self.lines[-20:])

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> tuple[int, str]:
        """Send ``sig``; the exit code and stdout once the process has ended."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout_s)  # the config is far below a pipe's buffer
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self._reader.join(timeout=5)
        return code, out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[list[SimulateProcess]]:
    started: list[SimulateProcess] = []
    yield started
    for proc in started:
        proc.kill()


def test_simulate_serves_all_three_protocols_and_the_config_matches(
    launch: list[SimulateProcess], tmp_path: Path,
) -> None:
    config_file = tmp_path / "exchange.toml"
    sim = SimulateProcess(["--modbus-port", "0", "--opcua-port", "0", "--enip-port", "0",
                           "--config-out", str(config_file), "--tick-hz", "20"], tmp_path)
    launch.append(sim)
    sim.wait_ready()
    config = config_from_dict(tomllib.loads(config_file.read_text()), base_dir=tmp_path)
    devices = config.devices
    modbus_port = int(devices["sim_modbus"].settings["port"])
    opcua_port = int(devices["sim_opcua"].settings["url"].rsplit(":", 1)[1].split("/")[0])
    enip_port = int(devices["sim_enip"].settings["port"])
    assert 0 not in (modbus_port, opcua_port, enip_port)
    assert config.tags["[plant]Line1/Tank/Level"].device == "sim_modbus"
    assert config.tags["[plant]Line1/Mixer/Running"].device == "sim_opcua"
    assert config.tags["[plant]Line1/Heater/Temperature"].device == "sim_enip"

    tank = RawModbus(HOST, modbus_port)
    mixer = RawOpcUa(HOST, opcua_port)
    heater = RawLogix(HOST, enip_port)
    try:
        level_before = tank.read("Line1/Tank/Level")
        tank.write("Line1/Tank/InletValve/Cmd", True)
        wait_until(lambda: tank.read("Line1/Tank/Level") > level_before, 10.0)
        # The simulator updates the server one point after another within a tick, so the level
        # can be seen risen just before the valve's feedback that caused it.
        wait_until(lambda: tank.read("Line1/Tank/InletValve/Open") is True, 10.0)

        assert mixer.read("Line1/Mixer/Running") is False
        mixer.write("Line1/Mixer/RunCmd", True)
        wait_until(lambda: mixer.read("Line1/Mixer/Running") is True, 10.0)

        temperature_before = heater.read("Line1/Heater/Temperature")
        heater.write("Line1/Heater/Setpoint", 90.0)
        heater.write("Line1/Heater/Enable", True)
        wait_until(lambda: heater.read("Line1/Heater/Temperature") > temperature_before + 0.5, 10.0)
    finally:
        tank.close()
        mixer.close()
        heater.close()
    code, out = sim.stop(signal.SIGTERM)
    assert code == 0, "\n".join(sim.lines[-20:])
    assert out == ""  # the config went to the file
    assert "simulated plant stopped" in sim.lines


def test_simulate_prints_the_config_on_stdout_and_stops_on_sigint(
    launch: list[SimulateProcess], tmp_path: Path,
) -> None:
    sim = SimulateProcess(["--protocols", "modbus", "--modbus-port", "0"], tmp_path)
    launch.append(sim)
    sim.wait_ready()
    code, out = sim.stop(signal.SIGINT)
    assert code == 0, "\n".join(sim.lines[-20:])
    config = config_from_dict(tomllib.loads(out))
    assert set(config.devices) == {"sim_modbus"}
    assert {tag.device for tag in config.tags.values()} == {"sim_modbus"}
    assert len(config.tags) == 12
    assert sim.lines.count("simulated plant ready") == 1


def test_simulate_serves_modbus_rtu_on_a_pty_pair_that_goes_with_it(
    launch: list[SimulateProcess], tmp_path: Path,
) -> None:
    from exchange._tags.service import TagService

    config_file = tmp_path / "exchange.toml"
    sim = SimulateProcess(["--protocols", "modbus", "--modbus-transport", "serial", "--config-out",
                           str(config_file), "--tick-hz", "50"], tmp_path)
    launch.append(sim)
    sim.wait_ready()
    config = config_from_dict(tomllib.loads(config_file.read_text()), base_dir=tmp_path)
    serial_port = Path(config.devices["sim_modbus"].settings["serial_port"])
    assert serial_port.exists()
    tags = TagService(config)
    try:
        tags.write(["[plant]Line1/Tank/InletValve/Cmd"], [True])
        wait_until(lambda: tags.read_one("[plant]Line1/Tank/Level").value > 0.0, 10.0)
    finally:
        tags.close()
    code, _ = sim.stop(signal.SIGTERM)
    assert code == 0, "\n".join(sim.lines[-20:])
    assert not serial_port.exists()  # socat stopped with the plant: no pty left behind


def test_a_fixed_port_in_use_is_refused_naming_it() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind((HOST, 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(cli, ["simulate", "--protocols", "enip", "--enip-port", str(port)])
    assert result.exit_code == 1
    assert f"device 'sim_enip' (enip): port {port} on 127.0.0.1 is already in use" in result.output


def test_a_port_a_live_cpppo_server_listens_on_is_refused() -> None:
    # cpppo listens with SO_REUSEADDR and SO_REUSEPORT: a check that set SO_REUSEPORT too would share it
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        busy.bind((HOST, 0))
        busy.listen()
        port = busy.getsockname()[1]
        # the check alone: should it pass, the whole command would serve on until the test timeout
        with pytest.raises(SimulationError, match=f"the PLC: port {port} on 127.0.0.1 is already in use"):
            check_port_free(HOST, port, "the PLC")


def _distinct_free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def _plain_bind_refused(port: int) -> bool:
    """Whether a bind without SO_REUSEADDR fails: a connection on the port lingers (TIME_WAIT, FIN_WAIT_2)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            return True
    return False


# One point per protocol, each served by its own server in the default split.
_READ_ON = {"modbus": "Line1/Tank/Level", "opcua": "Line1/Mixer/Running", "enip": "Line1/Heater/Temperature"}


def _connect_and_read_each(ports: dict[str, int]) -> list[RawClient]:
    """A connected client per protocol that has read its point (the connections are left open)."""
    clients: list[RawClient] = []
    try:
        for protocol, port in ports.items():
            client = connect(protocol, HOST, port)
            clients.append(client)
            assert client.read(_READ_ON[protocol]) is not None
    except BaseException:
        _close_all(clients)
        raise
    return clients


def _close_all(clients: list[RawClient]) -> None:
    """Close and forget every client (a second close of an OPC UA client would post to a dead loop)."""
    while clients:
        client = clients.pop()
        # after the servers went away a client's goodbye has nobody to talk to
        with contextlib.suppress(Exception):
            client.close()


# The clients hang up after the stop: the servers' side of each connection is in TIME_WAIT (pylogix
# says goodbye to the dead session, so the EtherNet/IP side is reset instead). Or they have not
# noticed yet: every server's side waits in FIN_WAIT_2. A run of the suite takes one (tests/sweeps.py).
RESTART_CASES = [("time-wait", True, {"modbus", "opcua"}), ("fin-wait", False, {"modbus", "opcua", "enip"})]


def test_simulate_restarts_on_its_fixed_ports_right_after_a_stop_with_clients_connected(
    launch: list[SimulateProcess], tmp_path: Path,
) -> None:
    cases, sampled = sample(RESTART_CASES, 0.5, "simulate restart cases")
    for name, close_clients_first, lingering_protocols in cases:
        try:
            _restart_on_fixed_ports(launch, tmp_path / name, close_clients_first, lingering_protocols)
        except AssertionError as exc:
            raise AssertionError(f"{name} ({sampled}): {exc}") from exc


def _restart_on_fixed_ports(launch: list[SimulateProcess], tmp_path: Path, close_clients_first: bool,
                            lingering_protocols: set[str]) -> None:
    tmp_path.mkdir()
    ports = dict(zip(("modbus", "opcua", "enip"), _distinct_free_ports(3), strict=True))
    args = ["--modbus-port", str(ports["modbus"]), "--opcua-port", str(ports["opcua"]),
            "--enip-port", str(ports["enip"]), "--config-out", str(tmp_path / "exchange.toml")]
    first = SimulateProcess(args, tmp_path)
    launch.append(first)
    first.wait_ready()
    clients = _connect_and_read_each(ports)
    try:
        code, _ = first.stop(signal.SIGTERM)  # the servers close the connections as they stop
        assert code == 0, "\n".join(first.lines[-20:])
        if close_clients_first:
            _close_all(clients)
        # the drill's premise: a bind without SO_REUSEADDR is refused on these ports for a while
        lingering = {protocol for protocol, port in ports.items() if _plain_bind_refused(port)}
        assert lingering >= lingering_protocols, lingering

        again = SimulateProcess(args, tmp_path)
        launch.append(again)
        again.wait_ready()
    finally:
        _close_all(clients)
    _close_all(_connect_and_read_each(ports))
    code, _ = again.stop(signal.SIGTERM)
    assert code == 0, "\n".join(again.lines[-20:])


def test_an_unknown_protocol_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["simulate", "--protocols", "modbus,profibus"])
    assert result.exit_code == 2
    assert "unknown protocol 'profibus'" in result.output


def test_an_unwritable_config_out_stops_the_servers_and_names_the_file(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "exchange.toml"
    before = set(threading.enumerate())  # a session-wide plant may be running already
    result = CliRunner().invoke(cli, ["simulate", "--protocols", "modbus", "--modbus-port", "0",
                                      "--config-out", str(target)])
    assert result.exit_code == 1
    assert f"cannot write the config to {target}" in result.output
    # the server that had started was stopped again: no ticker, no server thread left behind
    left = [t.name for t in set(threading.enumerate()) - before]
    assert not [name for name in left if name.startswith(("sim-ticker", "modbus-sim"))], left
