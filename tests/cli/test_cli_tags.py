"""``exchange tags list``, ``read`` and ``watch`` through the real command, against the simulated plant
served by real Modbus TCP, OPC UA and EtherNet/IP servers: what the config says, what the devices hold
(checked against the servers' own values), a device that is down, and changes made on the server.

Commands are forked from the session's zygote; ``watch`` runs as a shell starts it (``python -m
exchange._cli.main``), so the Ctrl-C test's signal meets a plain interpreter.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simulators.plant_servers import PlantServers
from simulators.testing import PlantFaults
from tests.cli.plant_env import INLET, LEVEL, RUNNING, SETPOINT, SPEED, plant_env
from tests.forkserver import ForkServer
from tests.harness import EXCHANGE_CMD, ExchangeEnv
from tests.waiting import wait_until


@pytest.fixture
def plant(fresh_sim_plant: PlantServers) -> Iterator[PlantServers]:
    yield fresh_sim_plant
    fresh_sim_plant.reset()  # what a test wrote (an open valve) does not go on filling the tank


@pytest.fixture
def env(tmp_path: Path, plant: PlantServers, exchange_zygote: ForkServer) -> ExchangeEnv:
    return plant_env(tmp_path / "project", plant, exchange_zygote)


def one_error_line(result: Any, code: int = 1) -> str:
    assert result.returncode == code, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return str(lines[0])


# ----- list ----------------------------------------------------------------------------------------


def test_list_shows_every_configured_tag_and_filters_by_device_and_pattern(env: ExchangeEnv) -> None:
    listed = {t["path"]: t for t in env.cli("tags", "list", "--json").check().json()}
    assert len(listed) == 14  # with the mixer's Profile array and its Control object (methods)
    assert listed[LEVEL] == {"path": LEVEL, "device": "sim_modbus", "address": "IRF1", "type": "Float32",
                             "access": "ro", "writable": False, "min": None, "max": None, "on_doubt": None}
    assert listed[SPEED]["type"] is None and listed[SPEED]["writable"] is True
    assert (listed[SPEED]["min"], listed[SPEED]["max"]) == (0, 1500)
    assert listed[SETPOINT]["device"] == "sim_enip" and listed[SETPOINT]["type"] == "Float32"

    text = env.cli("tags", "list").check().stdout.splitlines()
    assert text[0].split() == ["PATH", "DEVICE", "TYPE", "ADDRESS", "ACCESS", "LIMITS"]
    speed = next(line for line in text if line.startswith(SPEED))
    assert speed.split() == [SPEED, "sim_opcua", "(device)", "ns=2;s=Line1.Mixer.Speed", "rw", "0..1500"]

    modbus = env.cli("tags", "list", "--device", "sim_modbus", "--json").check().json()
    assert {t["path"] for t in modbus} == {p for p, t in listed.items() if t["device"] == "sim_modbus"}
    assert len(modbus) == 5
    cmds = env.cli("tags", "list", "TANK/*cmd", "--json").check().json()  # any case; [plant] is literal
    assert [t["path"] for t in cmds] == [INLET, "[plant]Line1/Tank/OutletValve/Cmd"]
    assert env.cli("tags", "list", "[plant]Line1/Mixer/Sp?ed", "--json").check().json()[0]["path"] == SPEED
    assert env.cli("tags", "list", "nothing-like-it").check().stdout.strip() == "no tags match"


def test_list_refuses_an_unknown_device_naming_the_configured_ones(env: ExchangeEnv) -> None:
    line = one_error_line(env.cli("tags", "list", "--device", "sim_profibus"))
    assert "unknown device 'sim_profibus'" in line and "sim_enip, sim_modbus, sim_opcua" in line


# ----- read ----------------------------------------------------------------------------------------


def test_read_gives_what_each_device_holds_with_quality_and_timestamp(env: ExchangeEnv, plant: PlantServers) -> None:
    plant.write(SPEED, 345)  # server-side, as the PLC program would
    plant.write(INLET, True)
    read = env.cli("tags", "read", LEVEL, SPEED, INLET, SETPOINT, "--json").check().json()
    assert [r["path"] for r in read] == [LEVEL, SPEED, INLET, SETPOINT]
    assert all(r["quality"] == "Good" and r["timestamp"].endswith("+00:00") for r in read), read
    assert read[1]["value"] == 345 and read[2]["value"] is True
    assert read[0]["value"] == pytest.approx(plant.read(LEVEL), abs=5.0)  # the tank is filling meanwhile
    assert read[3]["value"] == pytest.approx(plant.read(SETPOINT))

    text = env.cli("tags", "read", SPEED.lower(), INLET).check().stdout.splitlines()  # any case
    assert text[0].split()[:3] == [SPEED, "345", "Good"] and text[1].split()[:3] == [INLET, "true", "Good"]


def test_read_exits_3_with_bad_not_connected_for_a_device_that_is_down(
    env: ExchangeEnv, plant: PlantServers, plant_faults: PlantFaults
) -> None:
    plant.write(SPEED, 77)
    plant_faults.stop("modbus")
    result = env.cli("tags", "read", LEVEL, SPEED, "--json")
    assert result.returncode == 3, result
    level, speed = result.json()
    assert level["quality"] == "Bad_NotConnected" and level["value"] is None and "sim_modbus" in level["error"]
    assert speed["quality"] == "Good" and speed["value"] == 77  # the other device is read all the same
    text = env.cli("tags", "read", LEVEL)
    assert text.returncode == 3 and text.stdout.split()[:3] == [LEVEL, "-", "Bad_NotConnected"], text


def test_an_unknown_tag_is_one_line_naming_it_and_nothing_is_read(env: ExchangeEnv, plant: PlantServers) -> None:
    before = plant.servers["modbus"].read_count()
    line = one_error_line(env.cli("tags", "read", LEVEL, "[plant]Line1/Tank/Levle"))
    assert "unknown tag '[plant]Line1/Tank/Levle'" in line and f"did you mean '{LEVEL}'" in line
    assert plant.servers["modbus"].read_count() == before
    assert "tag path '[plant': the [provider] is not closed" in one_error_line(env.cli("tags", "read", "[plant"))
    assert env.cli("tags", "read").returncode == 2  # at least one PATH


# ----- watch ---------------------------------------------------------------------------------------


class Watcher:
    """``exchange tags watch ARGS`` started as a shell would; stdout and stderr in files read as they grow."""

    def __init__(self, env: ExchangeEnv, *args: str) -> None:
        self.signal_state: list[str] = []
        self.out_path, self.err_path = env.root / "watch.out", env.root / "watch.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([*EXCHANGE_CMD, "--config", str(env.config_path), "tags", "watch", *args],
                                         cwd=env.root, env={**env.process_env(), "PYTHONFAULTHANDLER": "1"},
                                         stdout=out, stderr=err)

    @property
    def lines(self) -> list[str]:
        return self.out_path.read_text(encoding="utf-8").splitlines()

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def wait_for_lines(self, count: int, timeout_s: float = 20.0) -> list[str]:
        wait_until(lambda: len(self.lines) >= count or self.proc.poll() is not None, timeout_s,
                   message=lambda: f"{count} lines from watch; got:\n{self.lines}\n{self.stderr}")
        assert len(self.lines) >= count, (self.lines, self.stderr)
        return self.lines

    def interrupt(self) -> None:
        """Ctrl-C, noting first how the process stood towards signals (blocked, ignored, caught)."""
        status = Path(f"/proc/{self.proc.pid}/status")
        self.signal_state = [line for line in status.read_text().splitlines() if line.startswith("Sig")]
        self.proc.send_signal(signal.SIGINT)

    def exit_code(self, timeout_s: float = 20.0) -> int:
        """The command's exit code; if it has not ended within ``timeout_s``, SIGABRT makes it print
        where each of its threads stands (faulthandler) and the test fails showing that."""
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)
            self.proc.wait(10)
            raise AssertionError(f"watch still ran {timeout_s} s later; signals when interrupted: "
                                 f"{self.signal_state}; its threads:\n{self.stderr}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_watch_prints_the_changes_made_on_the_servers_then_stops_after_count(
    env: ExchangeEnv, plant: PlantServers
) -> None:
    watcher = Watcher(env, SPEED, INLET, "--interval-ms", "50", "--count", "3", "--json")
    try:
        first = [json.loads(line) for line in watcher.wait_for_lines(2)]
        assert {(r["path"], r["value"]) for r in first} == {(SPEED, 0), (INLET, False)}
        plant.write(SPEED, 250)  # OPC UA: pushed by the subscription
        assert json.loads(watcher.wait_for_lines(3)[2])["value"] == 250
        plant.write(INLET, True)  # Modbus: seen by the next read
        assert json.loads(watcher.wait_for_lines(4)[3]) | {"timestamp": None} == {
            "path": INLET, "value": True, "quality": "Good", "timestamp": None}
        plant.write(SPEED, 260)
        assert watcher.exit_code() == 0, watcher.stderr
    finally:
        watcher.kill()
    readings = [json.loads(line) for line in watcher.lines]
    assert [(r["path"], r["value"]) for r in readings[2:]] == [(SPEED, 250), (INLET, True), (SPEED, 260)]
    assert "Traceback" not in watcher.stderr


def test_watch_shows_a_device_going_down_and_ctrl_c_ends_it_with_130(
    env: ExchangeEnv, plant: PlantServers, plant_faults: PlantFaults
) -> None:
    watcher = Watcher(env, LEVEL, RUNNING, "--interval-ms", "50")
    try:
        first = watcher.wait_for_lines(2)
        assert all("Good" in line for line in first), first
        plant_faults.stop("modbus")
        wait_until(lambda: any(line.startswith(LEVEL) and "Bad_NotConnected" in line for line in watcher.lines),
                   20, message=lambda: "\n".join(watcher.lines))
        plant_faults.start("modbus")
        wait_until(lambda: watcher.lines[-1].startswith(LEVEL) and " Good " in watcher.lines[-1], 20,
                   message=lambda: "\n".join(watcher.lines))
        watcher.interrupt()
        assert watcher.exit_code() == 130, watcher.stderr
    finally:
        watcher.kill()
    assert "stopped watching after 2 change(s)" in watcher.stderr, watcher.stderr
    assert "Traceback" not in watcher.stderr and "Aborted" not in watcher.stderr
