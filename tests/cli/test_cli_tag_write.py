"""``exchange tags write`` and ``exchange tags audit`` through the real command, against the simulated
plant's real Modbus TCP, OPC UA and EtherNet/IP servers and a real SQLite store.

Whether a value reached the PLC is checked on the server itself (its value and its count of write
requests), never through Exchange: an allowed write lands exactly once, a refused one sends nothing
(and records nothing: the store is not even created), a write whose answer is lost (a proxy in front
of the Modbus server loses it, tests/netfaults.py) is never sent a second time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.operator.runtime import default_actor
from simulators.plant_servers import PlantServers
from simulators.testing import PlantFaults
from tests.cli.plant_env import INLET, LEVEL, SETPOINT, SPEED, plant_env
from tests.forkserver import ForkServer
from tests.harness import CliResult, ExchangeEnv
from tests.netfaults import AnswerDropper

SPEED_NODE = "ns=2;s=Line1.Mixer.Speed"
PROFILE = "[plant]Line1/Mixer/Profile"  # OPC UA, type = "Int16[5]", 0..1500 per element


@pytest.fixture
def plant(fresh_sim_plant: PlantServers) -> Iterator[PlantServers]:
    yield fresh_sim_plant
    fresh_sim_plant.reset()  # an open inlet valve must not go on filling the tank for the next test


@pytest.fixture
def proxy(plant: PlantServers) -> Iterator[AnswerDropper]:
    dropper = AnswerDropper(plant.ports["modbus"])
    yield dropper
    dropper.close()


@pytest.fixture
def env(tmp_path: Path, plant: PlantServers, proxy: AnswerDropper, exchange_zygote: ForkServer) -> ExchangeEnv:
    """The plant's config, plus the inlet valve command reached through ``proxy``: ``[t]InletBit`` as
    configured by default (a boolean in doubt is never read back) and ``[t]Inlet`` with
    ``on_doubt = "readback"``; and a tag the config allows but Modbus cannot write."""
    extra = f"""
[devices.via_proxy]
driver = "modbus"
host = "127.0.0.1"
port = {proxy.port}
unit_id = 1
zero_based = false
timeout_ms = 1000

[tags."[t]InletBit"]
device = "via_proxy"
address = "C1"

[tags."[t]Inlet"]
device = "via_proxy"
address = "C1"
on_doubt = "readback"

[tags."[t]LevelRw"]
device = "sim_modbus"
address = "IRF1"
"""
    return plant_env(tmp_path / "project", plant, exchange_zygote, extra)


def writes(plant: PlantServers) -> dict[str, int]:
    """Every server's count of client write requests."""
    return {protocol: server.write_count() for protocol, server in plant.servers.items()}


def one_error_line(result: CliResult, code: int = 1) -> str:
    assert result.returncode == code, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def last_error_line(result: CliResult, code: int) -> str:
    """The error line that ends stderr (the drivers' warnings about a lost link may come before it)."""
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), result.stderr
    return line


def audit(env: ExchangeEnv, *args: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = env.cli("tags", "audit", *args, "--json").check().json()
    return entries


def modbus_function(code: int) -> Callable[[bytes], bool]:
    return lambda data: len(data) >= 8 and data[7] == code


def test_allowed_writes_land_once_on_modbus_and_opcua_with_an_audit_entry(
    env: ExchangeEnv, plant: PlantServers
) -> None:
    before = writes(plant)
    done = env.cli("tags", "write", INLET, "true", "--yes", "--reason", "valve check").check()
    assert done.stdout.strip() == (f"wrote true to {INLET} (was false): acknowledged by the device (audit entry 1)")
    assert plant.read(INLET) is True and writes(plant) == {**before, "modbus": before["modbus"] + 1}

    speed_writes = plant.servers["opcua"].write_count(SPEED_NODE)
    result = env.cli("tags", "write", SPEED.lower(), "420", "--yes", "--confirm", "--json").check().json()
    assert plant.read(SPEED) == 420 and plant.servers["opcua"].write_count(SPEED_NODE) == speed_writes + 1
    assert writes(plant) == {**before, "modbus": before["modbus"] + 1, "opcua": before["opcua"] + 1}
    assert result | {"old": None, "note": None} == {
        "path": SPEED, "device": "sim_opcua", "address": SPEED_NODE, "value": 420, "old": None,
        "outcome": "WRITTEN", "note": None, "audit_id": 2, "confirmed": True}
    assert result["old"]["value"] == 0 and result["old"]["quality"] == "Good"

    inlet, speed = audit(env)
    assert inlet["actor"] == speed["actor"] == default_actor()
    assert (inlet["path"], inlet["reason"], inlet["outcome"]) == (INLET, "valve check", "WRITTEN")
    assert inlet["details"] | {"old_timestamp": None} == {
        "device": "sim_modbus", "address": "C1", "type": "Boolean", "value": True, "typed": "true",
        "old_value": False, "old_quality": "Good", "old_timestamp": None}
    assert inlet["finished_at"] >= inlet["at"]
    assert (speed["path"], speed["reason"], speed["details"]["old_value"]) == (SPEED, None, 0)
    assert "acknowledged by the device; confirmed: read back after" in speed["note"]

    lines = env.cli("tags", "audit", SPEED.upper()).check().stdout.splitlines()  # any case: the tag's path
    assert len(lines) == 1 and f"{default_actor()}  {SPEED}  0 -> 420  WRITTEN" in lines[0], lines
    assert "(valve check)" in env.cli("tags", "audit", "--limit", "2").check().stdout.splitlines()[0]
    assert [e["id"] for e in audit(env, "--limit", "1")] == [2]


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (LEVEL, "50", f"tag '{LEVEL}' (device 'sim_modbus', address 'IRF1') is read-only"),
        ("[t]LevelRw", "50", "cannot be written over its protocol"),
        (SPEED, "2000", "2000 is above the tag's max 1500"),
        (SPEED, "-1", "-1 is below the tag's min 0"),
        (SETPOINT, "120", "120.0 is above the tag's max 95"),
        (INLET, "maybe", "'maybe' is not a boolean"),
        (SPEED, "fast", "has a min/max, so it takes a number, got the text 'fast'"),
        (SETPOINT, "hot", "'hot' is not a number (the tag is Float32)"),
        ("[plant]Line1/Tank/Inlet", "true", "unknown tag '[plant]Line1/Tank/Inlet'"),
        (PROFILE, "[1, 2, 3, 4, 5, 6]", 'holds 5 elements (type = "Int16[5]"), got a list of 6; nothing was written'),
        (PROFILE, "[]", 'holds 5 elements (type = "Int16[5]"), got a list of 0'),
        (PROFILE, "300", 'is an array (type = "Int16[5]"): write a JSON list, e.g. [1, 2, 3], got \'300\''),
        (PROFILE, "[1, 2, 3", "write a JSON list"),
        (PROFILE, "[1, 2, 3, 4, 2000]", "element [4]: 2000 is above the tag's max 1500"),
        (PROFILE, "[1, [2], 3, 4, 5]", "arrays are one dimension"),
    ],
)
def test_a_refused_write_sends_nothing_and_records_nothing(
    env: ExchangeEnv, plant: PlantServers, path: str, value: str, words: str
) -> None:
    before, held = writes(plant), {p: plant.read(p) for p in (INLET, SPEED, SETPOINT)}
    line = one_error_line(env.cli("tags", "write", path, value, "--yes", "--reason", "test"))
    assert words in line and "Traceback" not in line, line
    assert writes(plant) == before and {p: plant.read(p) for p in held} == held
    assert env.sqlite_path is not None and not env.sqlite_path.exists()  # not even the audit's store


def test_a_value_only_the_device_can_judge_is_refused_before_sending(env: ExchangeEnv, plant: PlantServers) -> None:
    """Mixer/Speed has no ``type`` in the config: the OPC UA node is Int16, so 12.5 passes the
    tag's range and is refused by the driver's conversion, before the request goes out."""
    before = writes(plant)
    line = one_error_line(env.cli("tags", "write", SPEED, "12.5", "--yes"))
    assert "12.5 is not a whole number (the node is Int16)" in line, line
    assert writes(plant) == before and plant.read(SPEED) == 0
    (entry,) = audit(env)
    assert entry["outcome"] == "NOT_WRITTEN" and "not a whole number" in entry["note"]


def test_an_array_tag_is_written_from_a_json_list(env: ExchangeEnv, plant: PlantServers) -> None:
    node = "ns=2;s=Line1.Mixer.Profile"
    before = plant.servers["opcua"].write_count(node)
    result = env.cli("tags", "write", PROFILE, '[100, 200.0, "300", 400, 0]', "--yes", "--confirm",
                     "--json").check().json()
    assert plant.read(PROFILE) == [100, 200, 300, 400, 0] and plant.servers["opcua"].write_count(node) == before + 1
    assert (result["value"], result["outcome"], result["confirmed"]) == ([100, 200, 300, 400, 0], "WRITTEN", True)
    assert result["old"]["value"] == [0, 300, 600, 900, 0]
    (entry,) = audit(env)
    assert entry["details"]["typed"] == '[100, 200.0, "300", 400, 0]' and entry["details"]["type"] == "Int16[5]"
    line = env.cli("tags", "audit").check().stdout.strip()
    assert f"{PROFILE}  [0, 300, 600, 900, 0] -> [100, 200, 300, 400, 0]  WRITTEN" in line, line
    listed = {t["path"]: t for t in env.cli("tags", "list", "--json").check().json()}
    assert listed[PROFILE]["type"] == "Int16[5]"


def test_it_asks_before_writing_and_anything_but_yes_writes_nothing(env: ExchangeEnv, plant: PlantServers) -> None:
    before = plant.servers["opcua"].write_count(SPEED_NODE)
    for answer in ("n\n", "", "later\n"):
        refused = env.cli("tags", "write", SPEED, "300", input_text=answer)
        assert refused.returncode == 1, refused
        assert (f"write 300 to {SPEED} (device sim_opcua, address {SPEED_NODE}; now 0)? [y/N]: "
                in refused.stderr), refused.stderr
        assert "error: not confirmed; nothing written" in refused.stderr and "Traceback" not in refused.stderr
    assert plant.servers["opcua"].write_count(SPEED_NODE) == before and plant.read(SPEED) == 0
    env.cli("tags", "write", SPEED, "300", input_text="y\n").check()
    assert plant.read(SPEED) == 300 and plant.servers["opcua"].write_count(SPEED_NODE) == before + 1


def test_a_device_that_is_down_is_not_waited_for_and_gets_nothing(
    env: ExchangeEnv, plant: PlantServers, plant_faults: PlantFaults
) -> None:
    plant_faults.stop("modbus")
    line = last_error_line(env.cli("tags", "write", INLET, "true", "--yes", timeout_s=20), 1)
    assert "device 'sim_modbus'" in line and "not sent" in line and "does not wait" in line, line
    plant_faults.start("modbus")
    assert plant.read(INLET) is False
    (entry,) = audit(env)
    assert entry["outcome"] == "NOT_WRITTEN" and entry["details"]["old_quality"] == "Bad_NotConnected"


def test_a_write_the_device_refuses_is_not_written(env: ExchangeEnv, plant: PlantServers) -> None:
    outlet = "[plant]Line1/Tank/OutletValve/Cmd"
    plant.servers["modbus"].inject_exception("C2", 4)  # SERVER_DEVICE_FAILURE
    try:
        line = last_error_line(env.cli("tags", "write", outlet, "on", "--yes"), 1)
    finally:
        plant.servers["modbus"].inject_exception("C2", None)
    assert "C2" in line and "sim_modbus" in line, line
    assert plant.read(outlet) is False
    assert [e["outcome"] for e in audit(env)] == ["NOT_WRITTEN"]


def test_a_command_bit_whose_answer_is_lost_is_in_doubt_and_never_sent_again(
    env: ExchangeEnv, plant: PlantServers, proxy: AnswerDropper
) -> None:
    before = plant.servers["modbus"].write_count("C1")
    proxy.arm(modbus_function(5), forward=True)  # the PLC applies it; its answer is lost
    result = env.cli("tags", "write", "[t]InletBit", "true", "--yes", "--json")
    line = last_error_line(result, 4)
    assert proxy.fired.is_set()
    assert line.startswith("error: IN DOUBT (audit entry 1): device 'via_proxy'") and 'on_doubt is "fail"' in line
    assert result.json()["outcome"] == "IN_DOUBT"
    assert plant.read(INLET) is True and plant.servers["modbus"].write_count("C1") == before + 1  # not twice
    (entry,) = audit(env)
    assert entry["outcome"] == "IN_DOUBT" and "may have been applied" in entry["note"]


@pytest.mark.parametrize(("forward", "code"), [(False, 4), (True, 0)], ids=["request-lost", "answer-lost"])
def test_a_lost_answer_is_read_back_but_the_write_is_never_sent_twice(
    env: ExchangeEnv, plant: PlantServers, proxy: AnswerDropper, forward: bool, code: int
) -> None:
    before = plant.servers["modbus"].write_count("C1")
    proxy.arm(modbus_function(5), forward=forward)
    result = env.cli("tags", "write", "[t]Inlet", "true", "--yes")
    assert result.returncode == code, result
    assert proxy.fired.is_set()
    assert plant.servers["modbus"].write_count("C1") == before + (1 if forward else 0)  # never resent
    assert plant.read(INLET) is forward
    (entry,) = audit(env)
    if forward:
        assert "read back, the device holds the value" in result.stdout
        assert entry["outcome"] == "WRITTEN"
    else:
        assert "the device does not hold the value" in result.stderr and "not sent again" in result.stderr
        assert entry["outcome"] == "IN_DOUBT"


def test_confirm_exits_3_when_the_value_is_not_read_back_in_time(
    env: ExchangeEnv, plant: PlantServers, proxy: AnswerDropper
) -> None:
    written = []

    def first_read_after_the_write(data: bytes) -> bool:
        if modbus_function(5)(data):
            written.append(data)
        return bool(written) and modbus_function(1)(data)

    before = plant.servers["modbus"].write_count("C1")
    proxy.arm(first_read_after_the_write, forward=True, hold=True)  # the confirming read gets no answer
    result = env.cli("tags", "write", "[t]Inlet", "true", "--yes", "--confirm", "--timeout-seconds", "0.3")
    assert result.returncode == 3, result
    assert result.stdout.startswith("wrote true to [t]Inlet (was false): acknowledged by the device")
    assert "error: written but not confirmed: tag '[t]Inlet'" in result.stderr and "Traceback" not in result.stderr
    assert plant.read(INLET) is True and plant.servers["modbus"].write_count("C1") == before + 1
    (entry,) = audit(env)
    assert entry["outcome"] == "WRITTEN" and "not confirmed" in entry["note"]


def test_bad_options_are_usage_errors_and_write_nothing(env: ExchangeEnv, plant: PlantServers) -> None:
    before = writes(plant)
    no_confirm = env.cli("tags", "write", SPEED, "5", "--yes", "--timeout-seconds", "2")
    assert no_confirm.returncode == 2 and "give --confirm too" in no_confirm.stderr, no_confirm
    nan = env.cli("tags", "write", SPEED, "5", "--yes", "--confirm", "--timeout-seconds", "nan")
    assert nan.returncode == 2 and "--timeout-seconds" in nan.stderr, nan
    typo = env.cli("tags", "write", SPEED, "--yess")
    assert typo.returncode == 2 and "no such option: --yess" in typo.stderr, typo
    long_reason = env.cli("tags", "write", SPEED, "5", "--yes", "--reason", "x" * 1001)
    assert "reason" in one_error_line(long_reason) and "1000" in long_reason.stderr
    assert writes(plant) == before
