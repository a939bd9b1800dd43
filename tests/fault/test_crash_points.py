"""Crash at every point of a run's life, on SQLite and PostgreSQL (see ``crash_points.py``).

Per backend, two chains run side by side on two stores: one kills its gateways right after a write,
the other right before one. Each chain executes two runs (the "open" and the "bypass" branch). A run
of the suite runs one chain per backend, chosen by a printed seed; ``EXCHANGE_TEST_FULL_SWEEPS=1``
runs both (tests/sweeps.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from exchange._tags.delivery import HELD, SENT_AGAIN
from exchange._values import DataType
from simulators.servers.base import SimPoint
from simulators.servers.modbus import ModbusSimServer
from tests.conftest import PostgresServer
from tests.fault.crash_points import Sweep, sweep
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv
from tests.sweeps import sample

ENGINE = {"workers": 1, "progress_interval_ms": 0, "dispatch_poll_ms": 10, "node_id": "sweep"}
CHAINS = {"after": [1, 2], "before": [3, 4]}  # kill mode -> the PLC registers of its runs


@pytest.fixture
def plc() -> Iterator[ModbusSimServer]:
    server = ModbusSimServer([SimPoint(f"HR{i}", DataType.INT16, 0) for i in (1, 2, 3, 4)])
    server.start()
    yield server
    server.stop()


@pytest.fixture
def forkserver(tmp_path: Path) -> Iterator[ForkServer]:
    server = ForkServer(tmp_path)
    yield server
    server.close()


def both_chains(
    make_env: Callable[[str], ExchangeEnv], plc: ModbusSimServer, forkserver: ForkServer, backend: str
) -> dict[str, Sweep]:
    """The chains of this run of the suite (both with full sweeps), side by side."""
    modes, _sampled = sample(list(CHAINS), 0.5, f"crash-point chains ({backend})")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {mode: pool.submit(sweep, make_env(mode), plc, mode, CHAINS[mode], forkserver) for mode in modes}
        return {mode: future.result() for mode, future in futures.items()}


def check_coverage(chains: dict[str, Sweep]) -> None:
    for mode, chain in chains.items():
        points = {p.killed_at for p in chain.processes if p.killed_at}
        # Two runs of about 17 writes each: every one of them was a kill point of this chain.
        assert len(points) >= 30, f"{mode}: only {len(points)} kill points: {sorted(points)}"
        assert any("the answers of idle polls" in point for point in points), "\n".join(sorted(points))
        assert any("sweep.open_valve" in point for point in points)
        # Cut off after the STARTED mark of the valve write: in doubt on recovery and read back.
        assert any(point.startswith("run ") and "start of the side effect of step 'sweep.open_valve'" in point
                   for point in points), "\n".join(sorted(points))
        # Killed right after the mark, the write was not sent: sent again. Killed right before the
        # outcome's commit (the next write after the wire: the audit events commit with it), it was
        # sent: the readback finds it and holds.
        expected = {SENT_AGAIN} if mode == "after" else {HELD}
        assert {r for r in (HELD, SENT_AGAIN) if r in chain.doubt_resolutions} == expected, chain.doubt_resolutions
    assert all(chain.late_posted > 0 for chain in chains.values())  # replays met messages they must not see


@pytest.mark.timeout(400)
def test_a_kill_before_and_after_every_write_sqlite(
    tmp_path: Path, plc: ModbusSimServer, forkserver: ForkServer
) -> None:
    chains = both_chains(lambda mode: ExchangeEnv.create(tmp_path / mode, engine=ENGINE), plc, forkserver, "sqlite")
    check_coverage(chains)


@pytest.mark.timeout(400)
def test_a_kill_before_and_after_every_write_postgresql(
    tmp_path: Path, plc: ModbusSimServer, postgres: PostgresServer, forkserver: ForkServer
) -> None:
    chains = both_chains(
        lambda mode: ExchangeEnv.create(
            tmp_path / mode, store_url=postgres.url(postgres.create_database(f"sweep_{mode}")), engine=ENGINE
        ),
        plc,
        forkserver,
        "postgresql",
    )
    check_coverage(chains)
