"""Fixtures for plant engineers: the simulated plant on free ports, and fault injection.

Registered as the pytest11 entry point ``exchange_plant``, so it is loaded in every test session of a
project that installs Exchange; nothing starts until a test asks for a fixture (servers are imported
inside the fixtures).

Fixtures:

``sim_plant`` (session)
    A :class:`simulators.plant_servers.PlantServers`, serving the plant on 127.0.0.1 free ports with its
    ticker running. ``.config_text`` (TOML), ``.config_path`` (that text written as ``exchange.toml`` in
    a temporary folder), ``.plant`` (the model; hold ``.lock`` to change it), ``.servers`` (protocol →
    server: ``get``/``set``/``write_count``...), ``.ports``, ``.read(path)``/``.write(path, value)``
    (server-side, by tag path), ``.address_of(path)``, ``.served_by(path)``, ``.reset()``.
    Shared by the whole session: a test that needs the initial state asks for ``fresh_sim_plant``.
``fresh_sim_plant`` (function)
    ``sim_plant`` reset to its initial state first (tank empty, everything off, no faults).
``plant_faults`` (function)
    A :class:`simulators.testing.PlantFaults`: ``stop``/``start``/``restart``/``drop_connections``
    (by protocol), ``freeze``/``unfreeze`` (by path), ``mixer_fault``; all undone when the test ends.
``sim_plant_protocols``, ``sim_plant_params`` (session)
    Override these in a conftest to serve fewer protocols (e.g. ``("opcua",)``: the whole plant on OPC UA)
    or to change the physics (a :class:`simulators.plant.PlantParams`).

Wait on plant conditions with :func:`simulators.testing.wait_until`, never with sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from simulators.plant_servers import PlantServers
    from simulators.testing import PlantFaults


@pytest.fixture(scope="session")
def sim_plant_protocols() -> tuple[str, ...]:
    """The protocols ``sim_plant`` serves (default: all three, one plant area each)."""
    return ("modbus", "opcua", "enip")


@pytest.fixture(scope="session")
def sim_plant_params() -> Any:
    """The plant's physics parameters (default :class:`simulators.plant.PlantParams`)."""
    from simulators.plant import PlantParams

    return PlantParams()


@pytest.fixture(scope="session")
def sim_plant(
    tmp_path_factory: pytest.TempPathFactory, sim_plant_protocols: tuple[str, ...], sim_plant_params: Any
) -> Iterator[PlantServers]:
    """The simulated plant served on free ports for the whole session, with a matching exchange.toml."""
    from simulators.plant import Plant
    from simulators.plant_servers import PlantServers

    servers = PlantServers(Plant(sim_plant_params), protocols=sim_plant_protocols, host="127.0.0.1")
    servers.start()
    try:
        servers.write_config(tmp_path_factory.mktemp("sim_plant") / "exchange.toml")
        yield servers
    finally:
        servers.stop()


@pytest.fixture
def fresh_sim_plant(sim_plant: PlantServers) -> PlantServers:
    """``sim_plant`` in its initial state: reset before the test."""
    sim_plant.reset()
    return sim_plant


@pytest.fixture
def plant_faults(sim_plant: PlantServers) -> Iterator[PlantFaults]:
    """Fault injection on ``sim_plant`` for one test; every fault is undone at teardown."""
    from simulators.testing import PlantFaults

    faults = PlantFaults(sim_plant)
    try:
        yield faults
    finally:
        faults.undo()
