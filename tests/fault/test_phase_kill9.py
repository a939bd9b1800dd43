"""A phase is started once whatever kills its gateway: ``phase.run`` swept through a kill -9 right
before and right after every store write of a run's life, by a chain of gateway processes on one
SQLite store, against the simulator's PLC (in this test process, so it lives through every kill and
counts every command it acted on). A run of the suite sweeps one of the two (kills after a write, or
before one), chosen by a printed seed; ``EXCHANGE_TEST_FULL_SWEEPS=1`` sweeps both (tests/sweeps.py).

The run finds HOLD and RESUME waiting when it starts: the phase takes them once it runs, and the test
lets the phase complete once the PLC has restarted it (so no kill outlasts the phase). Whatever the
kills, the PLC acts on Start once, on Hold once, on Restart once and on Reset once; the run ends
SUCCESS with the phase's reports; each command message is consumed once.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from simulators import config_out
from simulators.engine import SimulatedPlant
from tests.fault.crash_points import read_fault_log
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, Gateway, wait_until
from tests.phases.conftest import PHASE, plant_document, sections_for
from tests.sweeps import sample

APP = """
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import phase

@workflow(name="phase_kill9.charge")
def charge():
    return phase.run("R1/Charge", params={"target_l": 12.5})
"""
ENGINE = {"workers": 1, "progress_interval_ms": 0, "dispatch_poll_ms": 10, "node_id": "phase-sweep"}


@pytest.fixture
def forkserver(tmp_path: Path) -> Iterator[ForkServer]:
    server = ForkServer(tmp_path)
    yield server
    server.close()


def chain(root: Path, mode: str, forkserver: ForkServer) -> tuple[SimulatedPlant, dict[str, object], set[str]]:
    """Run the phase through a chain of gateways each killed ``mode`` ("after"/"before") a write."""
    with SimulatedPlant.from_document(plant_document(duration_s=600, transition_ms=40), free_ports=True).start() as plc:
        env = ExchangeEnv.create(root, engine=ENGINE)
        env.write_app("phase_kill9", APP)
        with env.config_path.open("a", encoding="utf-8") as config:
            config.write("\n" + config_out.dumps(sections_for(plc)))
        runtime = env.runtime()
        gateway = Gateway(env, log_level="WARNING", name=f"phase-{mode}", forkserver=forkserver)
        try:
            (run_id,) = env.start_runs("phase_kill9.charge", [{}])
            runtime.send_command(run_id, "HOLD", "sweep", actor="sweep")
            runtime.send_command(run_id, "RESUME", "sweep", actor="sweep")
            kill_at, covered, processes = 2, set[str](), 0

            def unfinished() -> bool:
                return not runtime.store.runs.get(run_id).finished

            def finish_once_restarted() -> None:
                # The phase runs until it was held and restarted: kills on the way never outrun it.
                if "RESTART" in plc.phase_commands(PHASE):
                    plc.finish_phase(PHASE)

            while unfinished():
                assert processes < 120, "the chain does not converge"
                log_path = root / f"faults-{processes}.log"
                gateway.spawn({f"EXCHANGE_FAULT_KILL_{mode.upper()}_WRITE": str(kill_at),
                               "EXCHANGE_FAULT_WRITE_LOG": str(log_path)})
                proc = gateway.proc
                assert proc is not None
                wait_until(lambda proc=proc: finish_once_restarted() or proc.poll() is not None or not unfinished(),
                           60, interval_s=0.005,
                           message=lambda n=processes: f"gateway {n} to die or finish\n{gateway.log_text()}")
                if proc.poll() is None:
                    gateway.stop()
                processes += 1
                killed = proc.returncode == -9
                assert killed or proc.returncode == 0, gateway.log_text()
                committed, killed_before = read_fault_log(log_path)
                point = killed_before if mode == "before" else (committed[-1] if committed and killed else None)
                if point is not None:
                    kill_at = kill_at + 1 if point in covered else (3 if mode == "before" else 2)
                    covered.add(point)
            view = runtime.get_run(run_id)
            print(f"\n{mode}: {processes} processes")
            return plc, dict(view), covered
        finally:
            gateway.__exit__()
            runtime.close()


def test_a_phase_is_started_once_through_a_kill_at_every_write(tmp_path: Path, forkserver: ForkServer) -> None:
    modes, sampled = sample(["after", "before"], 0.5, "phase kill -9 sweep")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {mode: pool.submit(chain, tmp_path / mode, mode, forkserver) for mode in modes}
        results = {mode: future.result() for mode, future in futures.items()}
    for mode, (plc, view, covered) in results.items():
        assert view["status"] == "SUCCESS", (mode, view["error"])
        result = view["result"]
        assert isinstance(result, dict) and result["reports"] == {"actual_l": pytest.approx(19.5)}
        # The PLC acted on each command once, however many gateways were killed on the way.
        assert plc.phase_commands(PHASE) == ["START", "HOLD", "RESTART", "RESET"], (mode, sorted(covered), sampled)
        events = view["events"]
        assert isinstance(events, list)
        taken = sorted(e["payload"]["cmd"] for e in events if e["kind"] == "command")
        assert taken == ["HOLD", "RESUME"], (mode, taken)
        assert len(covered) >= 6, (mode, sorted(covered))
        print(f"\nphase sweep, kills {mode} a write: {len(covered)} kill points")
