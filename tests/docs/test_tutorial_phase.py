"""Chapter 10 of the tutorial, "A phase in the PLC", run for real in a project of its own (a file of
its own too, so the test workers run it beside the walk-through of ``test_tutorial.py``)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from simulators.engine import SimulatedPlant
from simulators.testing import simulate_config
from tests.docs.test_tutorial import Background, backgrounds, doc_command, run, show_until, write_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path)


@pytest.fixture
def background() -> Iterator[Callable[[list[str], Path], Background]]:
    yield from backgrounds()

# The charge ends when the test says (``finish_phase``), not after a time the test's own commands
# would race on a loaded machine; the transitions and the watchdog are quicker than the reader's.
FAST_REACTOR = (("duration_s = 30", "duration_s = 3600"), ("transition_ms = 1000", "transition_ms = 100"),
                ("period_ms = 1000", "period_ms = 300"))


def phase_line(project: Path, state: str, timeout_s: float = 20) -> str:
    """Repeat ``exchange phases`` until R1/Charge is in ``state``; its line."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = run(doc_command("exchange phases"), project).splitlines()
        assert lines[0].split() == ["PHASE", "UNIT", "STATE", "OWNER", "RUN"], lines
        if lines[1].split()[2] == state:
            return lines[1]
        assert time.monotonic() < deadline, f"the phase never showed {state}; last: {lines[1]}"
        time.sleep(0.1)


def test_a_phase_in_the_plc(project: Path, background: Callable[[list[str], Path], Background]) -> None:
    """Chapter 10, in a project of its own: it needs neither Line1 nor the runs before it, and may
    run beside the walk-through. Its first gateway stands for the one the reader restarts with
    Ctrl-C to read the new config."""
    with ExitStack() as stack:
        walk_through(project, background, stack)


def walk_through(project: Path, background: Callable[[list[str], Path], Background], stack: ExitStack) -> None:
    reactor = project / "reactor.toml"
    text = reactor.read_text(encoding="utf-8")
    for slow, fast in FAST_REACTOR:
        assert slow in text, slow
        text = text.replace(slow, fast)
    reactor.write_text(text, encoding="utf-8")
    # The reader's `exchange simulate`, served in this process so that the test can end the charge.
    doc_command("exchange simulate --from-config reactor.toml --config-out r1.toml")
    plc = stack.enter_context(simulate_config(reactor, config_out=project / "r1.toml"))
    doc_command("cat r1.toml >> exchange.toml")
    with (project / "exchange.toml").open("a", encoding="utf-8") as config:
        config.write((project / "r1.toml").read_text(encoding="utf-8"))
    gateway = background(doc_command("exchange gateway"), project)  # (the reader's store exists by now)
    gateway.wait_for("recovered 0 run(s)")
    assert phase_line(project, "IDLE").split() == ["R1/Charge", "-", "IDLE", "free", "(0)", "-"]
    charge = run(doc_command("RUN=$(exchange start tutorial.charge -p target_l=250)"), project).strip()
    assert phase_line(project, "RUNNING").split()[3:6] == ["exchange", "(1)", charge]
    sent = run(doc_command('exchange send $RUN HOLD --reason "check the charge valve" --wait', RUN=charge),
               project)
    assert "(accepted in state RUNNING); state now HELD" in sent, sent
    # the run is HELD once the PLC says Held
    assert phase_line(project, "HELD", timeout_s=0).endswith(f"{charge} running held by operator")
    show = doc_command("exchange show $RUN", RUN=charge)
    held = run(show, project)
    assert "state HELD" in held and '"command": "HOLD", "number": 4' in held, held
    run(doc_command("exchange send $RUN RESUME", RUN=charge), project)
    phase_line(project, "RUNNING")

    doc_command('kill -9 $(pgrep -f "exchange gateway")')
    gateway.proc.kill()
    gateway.proc.wait(10)
    phase_line(project, "HELD")  # the heartbeat stood still: the PLC held its phase by itself
    gateway = background(doc_command("exchange gateway"), project)
    gateway.wait_for("recovered 1 run(s)")
    deadline = time.monotonic() + 20
    while "equipment" not in (attention := run(doc_command("exchange runs --attention"), project)):
        assert time.monotonic() < deadline, attention
        time.sleep(0.1)
    assert "phase R1/Charge held by its equipment (the PLC) in step 1 phase.run; RESUME restarts it" in attention
    assert phase_line(project, "HELD").endswith(f"{charge} running held by equipment")
    run(doc_command("exchange send $RUN RESUME", RUN=charge), project)
    phase_line(project, "RUNNING")
    plc.finish_phase("R1/Charge")
    record = doc_command("exchange show $RUN --events all", RUN=charge)
    finished = show_until(record, project, "status    SUCCESS")
    assert "state COMPLETE" in finished and '{"charged_l": 250.4, "stopped": false}' in finished, finished
    commands = [line.split('"command": "')[1].split('"')[0] for line in finished.splitlines()
                if "phase_command" in line]
    assert commands == ["START", "HOLD", "RESTART", "RESTART", "RESET"], finished  # Start once, by two gateways
    assert '"execution": 2' in finished and '"caused_by": "equipment"' in finished, finished
    assert phase_line(project, "IDLE").split()[3:5] == ["free", "(0)"]
    two_batches_one_reactor(project, background, gateway, plc)


def units_line(project: Path, holder: str, waiting: str, timeout_s: float = 20) -> None:
    """Repeat ``exchange units`` until R1 is held by ``holder`` with ``waiting`` waiting."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = run(doc_command("exchange units"), project).splitlines()
        assert lines[0].split() == ["UNIT", "CLASS", "HOLDER", "SINCE", "WAITING"], lines
        unit, unit_class, held_by, _since, waits = lines[1].split()
        assert (unit, unit_class) == ("R1", "reactor"), lines
        if (held_by, waits) == (holder, waiting):
            return
        assert time.monotonic() < deadline, f"R1 never held by {holder} with {waiting} waiting: {lines}"
        time.sleep(0.1)


def two_batches_one_reactor(project: Path, background: Callable[[list[str], Path], Background],
                            gateway: Background, plc: SimulatedPlant) -> None:
    """Chapter 11: the unit R1, its phase tied to it, two batches taking turns."""
    config = project / "exchange.toml"
    text = config.read_text(encoding="utf-8")
    assert text.count('[phases."R1/Charge"]\n') == 1, text
    text = text.replace('[phases."R1/Charge"]\n', '[phases."R1/Charge"]\nunit = "R1"\n')
    config.write_text(text + '\n[units.R1]\nclass = "reactor"\n', encoding="utf-8")
    gateway.proc.send_signal(signal.SIGINT)  # the reader's Ctrl-C
    gateway.proc.wait(20)
    background(doc_command("exchange gateway"), project).wait_for("recovered 0 run(s)")
    first = run(doc_command("FIRST=$(exchange start tutorial.batch -p target_l=200)"), project).strip()
    phase_line(project, "RUNNING")
    second = run(doc_command("SECOND=$(exchange start tutorial.batch -p target_l=300)"), project).strip()
    units_line(project, first, second)
    assert "units     waits for R1" in run(doc_command("exchange show $RUN", RUN=second), project)
    plc.finish_phase("R1/Charge")
    units_line(project, second, "-")
    assert phase_line(project, "RUNNING").split()[1:2] + phase_line(project, "RUNNING").split()[5:6] == ["R1", second]
    assert "status    SUCCESS" in show_until(doc_command("exchange show $RUN", RUN=first), project, "status    SUCCESS")
    plc.finish_phase("R1/Charge")
    done = show_until(doc_command("exchange show $RUN", RUN=second), project, "status    SUCCESS")
    assert '{"charged_l": 250.4}' in done, done
    units_line(project, "-", "-")
    assert plc.phase_commands("R1/Charge").count("START") == 3  # chapter 10's charge, then one per batch
