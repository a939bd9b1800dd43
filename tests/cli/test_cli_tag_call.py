"""``exchange tags call`` through the real command, against the simulated plant's real OPC UA server
(asyncua) and its method ``SetSpeed(Speed: Int16) -> (Previous: Int16)`` on ``Mixer/Control``, and a
real SQLite store.

Whether the method ran is checked on the server itself (its count of calls that reached the
handler, and the speed it set), never through Exchange: an allowed call runs exactly once, a refused
one sends nothing (and records nothing: the store is not even created), a call whose answer is lost
(a proxy in front of the server loses it, tests/netfaults.py) is never made a second time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._engine.operator.runtime import default_actor
from simulators.plant_servers import PlantServers
from tests.cli.plant_env import SPEED, plant_env
from tests.conftest import free_port
from tests.forkserver import ForkServer
from tests.harness import CliResult, ExchangeEnv
from tests.netfaults import AnswerDropper

CONTROL = "[plant]Line1/Mixer/Control"
CONTROL_NODE = "ns=2;s=Line1.Mixer.Control"
CALL_REQUEST = b"\x01\x00\xc8\x02"  # the binary encoding id of a CallRequest (i=712), in an OPC UA MSG
CALL_RESPONSE = b"\x01\x00\xcb\x02"  # ... and of its CallResponse (i=715)


@pytest.fixture
def plant(fresh_sim_plant: PlantServers) -> Iterator[PlantServers]:
    yield fresh_sim_plant
    fresh_sim_plant.reset()


@pytest.fixture
def proxy(plant: PlantServers) -> Iterator[AnswerDropper]:
    dropper = AnswerDropper(plant.ports["opcua"])
    yield dropper
    dropper.close()


@pytest.fixture
def env(tmp_path: Path, plant: PlantServers, proxy: AnswerDropper, exchange_zygote: ForkServer) -> ExchangeEnv:
    """The plant's config, plus the mixer's object through ``proxy`` (``[t]Control``), on a device
    nothing answers for (``[t]Down``: connection refused), and as a read-only tag."""
    extra = f"""
[devices.down]
driver = "opcua"
url = "opc.tcp://127.0.0.1:{free_port()}/plant/"
comm_timeout_s = 20

[tags."[t]Down"]
device = "down"
address = "{CONTROL_NODE}"

[devices.via_proxy]
driver = "opcua"
url = "opc.tcp://127.0.0.1:{proxy.port}/plant/"
timeout_ms = 1500

[tags."[t]Control"]
device = "via_proxy"
address = "{CONTROL_NODE}"

[tags."[t]ControlRo"]
device = "sim_opcua"
address = "{CONTROL_NODE}"
access = "ro"
"""
    return plant_env(tmp_path / "project", plant, exchange_zygote, extra)


def calls(plant: PlantServers) -> int:
    return plant.servers["opcua"].call_count("SetSpeed")  # type: ignore[attr-defined, no-any-return]


def error_line(result: CliResult, code: int = 1) -> str:
    """The error line that ends stderr (a driver's warning about a lost link may come before it)."""
    assert result.returncode == code, result
    assert "Traceback" not in result.stderr, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), result.stderr
    return line


def audit(env: ExchangeEnv) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = env.cli("tags", "audit", "--json").check().json()
    return entries


def test_a_method_is_called_once_with_its_outputs_and_an_audit_entry(env: ExchangeEnv, plant: PlantServers) -> None:
    before = calls(plant)
    done = env.cli("tags", "call", CONTROL, "SetSpeed", "600", "--yes", "--reason", "commissioning").check()
    assert done.stdout.strip() == f"called SetSpeed(600) on {CONTROL}: outputs [0] (audit entry 1)"
    assert calls(plant) == before + 1 and plant.read(SPEED) == 600
    result = env.cli("tags", "call", CONTROL.lower(), "SetSpeed", "--json", "--yes", "--", "900").check().json()
    assert result == {"path": CONTROL, "device": "sim_opcua", "address": CONTROL_NODE, "method": "SetSpeed",
                      "args": ["900"], "outputs": [600], "outcome": "CALLED", "note": "called; outputs [600]",
                      "audit_id": 2}
    assert calls(plant) == before + 2 and plant.read(SPEED) == 900

    first, second = audit(env)
    assert (first["action"], first["path"], first["actor"], first["reason"], first["outcome"]) == (
        "tag_call", CONTROL, default_actor(), "commissioning", "CALLED")
    assert first["details"] == {"device": "sim_opcua", "address": CONTROL_NODE, "method": "SetSpeed",
                                "args": ["600"], "typed": ["600"]}
    assert second["note"] == "called; outputs [600]" and second["finished_at"] >= second["at"]
    lines = env.cli("tags", "audit", CONTROL).check().stdout.splitlines()
    assert f"{CONTROL}  call SetSpeed(600)  CALLED  (commissioning)" in lines[0], lines
    assert lines[1].strip() == "called; outputs [0]", lines


REFUSED = [  # (tag, METHOD ARGS..., what the one error line says)
    (CONTROL, ["SetSpd", "600"], f"object {CONTROL_NODE} has no method 'SetSpd' (its methods: SetSpeed)"),
    (CONTROL, ["SetSpeed"], f"method SetSpeed(Speed: Int16) on {CONTROL_NODE} takes 1 argument(s), got 0"),
    (CONTROL, ["SetSpeed", "70000"], f"argument 1 'Speed' of SetSpeed on {CONTROL_NODE}: '70000' is outside the "
                                     "Int16 range"),
    ("[t]ControlRo", ["SetSpeed", "600"], 'is read-only (access = "ro")'),
    ("[plant]Line1/Tank/InletValve/Cmd", ["Open"], "has no methods to call (method calls are OPC UA's)"),
    ("[plant]Line1/Mixer/Ctrl", ["SetSpeed", "600"], "unknown tag '[plant]Line1/Mixer/Ctrl'"),
]


def test_a_call_that_cannot_be_made_as_asked_sends_nothing_and_records_nothing(
    env: ExchangeEnv, plant: PlantServers
) -> None:
    """The method's declared arguments are checked on the device (the driver's own tests go through
    every type); here, that each refusal is one line and nothing reaches the method or the store."""
    before = calls(plant)
    for path, args, words in REFUSED:
        line = error_line(env.cli("tags", "call", path, *args, "--yes"))
        assert words in line, (path, args, line)
    assert calls(plant) == before and plant.read(SPEED) == 0
    assert env.sqlite_path is not None and not env.sqlite_path.exists()  # not even the audit's store


def test_a_call_the_device_refuses_is_not_called_with_its_status(env: ExchangeEnv, plant: PlantServers) -> None:
    line = error_line(env.cli("tags", "call", CONTROL, "SetSpeed", "2000", "--yes"))
    assert "refused the call of SetSpeed on ns=2;s=Line1.Mixer.Control: BadOutOfRange" in line, line
    assert plant.read(SPEED) == 0
    (entry,) = audit(env)
    assert entry["outcome"] == "NOT_CALLED" and "BadOutOfRange" in entry["note"]


def test_it_asks_first_and_a_device_that_is_down_is_not_waited_for(env: ExchangeEnv, plant: PlantServers) -> None:
    before = calls(plant)
    refused = env.cli("tags", "call", CONTROL, "SetSpeed", "300", input_text="n\n")
    assert (f"call SetSpeed(300) on {CONTROL} (device sim_opcua, address {CONTROL_NODE})? [y/N]: "
            in refused.stderr), refused.stderr
    assert "not confirmed; SetSpeed was not called" in error_line(refused)
    assert calls(plant) == before  # asked once every check passed; nothing recorded
    assert env.sqlite_path is not None and not env.sqlite_path.exists()
    env.cli("tags", "call", CONTROL, "SetSpeed", "300", input_text="y\n").check()
    assert plant.read(SPEED) == 300 and calls(plant) == before + 1

    line = error_line(env.cli("tags", "call", "[t]Down", "SetSpeed", "400", "--yes", timeout_s=30))
    assert "device 'down'" in line and "was not made" in line and "does not wait" in line, line
    assert plant.read(SPEED) == 300 and calls(plant) == before + 1


def test_a_call_whose_answer_is_lost_is_in_doubt_and_never_made_again(
    env: ExchangeEnv, plant: PlantServers, proxy: AnswerDropper
) -> None:
    before = calls(plant)
    proxy.arm(lambda data: data.startswith(b"MSG") and CALL_REQUEST in data, forward=True,  # it runs; answer lost
              answer=lambda data: data.startswith(b"MSG") and CALL_RESPONSE in data)  # not a keep-alive's
    result = env.cli("tags", "call", "[t]Control", "SetSpeed", "750", "--yes", "--json", timeout_s=30)
    line = error_line(result, 4)
    assert proxy.fired.is_set()
    assert line.startswith("error: IN DOUBT (audit entry 1): device 'via_proxy': the call of SetSpeed on [t]Control "
                           "is in doubt"), line
    assert result.json()["outcome"] == "IN_DOUBT"
    assert plant.read(SPEED) == 750 and calls(plant) == before + 1  # it ran, once
    (entry,) = audit(env)
    assert entry["outcome"] == "IN_DOUBT" and "may have run" in entry["note"]


def test_bad_options_are_usage_errors_and_call_nothing(env: ExchangeEnv, plant: PlantServers) -> None:
    before = calls(plant)
    typo = env.cli("tags", "call", CONTROL, "SetSpeed", "600", "--yess")
    assert typo.returncode == 2 and "no such option: --yess" in typo.stderr, typo
    negative = env.cli("tags", "call", CONTROL, "SetSpeed", "-5", "--yes")  # a number: the device refuses it
    assert "BadOutOfRange" in error_line(negative)
    long_reason = env.cli("tags", "call", CONTROL, "SetSpeed", "5", "--yes", "--reason", "x" * 1001)
    assert "reason" in error_line(long_reason) and "1000" in long_reason.stderr
    assert calls(plant) == before
