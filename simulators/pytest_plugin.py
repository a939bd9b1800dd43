"""Fixtures for plant engineers: your own config simulated, the demo plant, and fault injection.

Registered as the pytest11 entry point ``exchange_plant``, so it is loaded in every test session of a
project that installs Exchange; nothing starts until a test asks for a fixture (servers are imported
inside the fixtures).

Fixtures for your own plant (``exchange.toml`` with its ``[simulation]``, see simulators/README.md):

``sim_config_path`` (session)
    The config to simulate: ``$EXCHANGE_CONFIG``, else ``exchange.toml`` in the working folder or in
    pytest's root folder. Override it in a conftest.
``exchange_sim_session`` (session)
    :func:`simulators.testing.simulate_config` of that config for the whole session: every device
    served on a free port; ``.config_path`` is the config pointing at them.
``exchange_sim`` (function)
    The same, reset to its initial state before the test (values, simulated time, faults), and every
    fault undone after it: ``read``/``write`` by tag path, ``advance``, ``stop_device``/
    ``start_device``/``restart_device``/``drop_connections``, ``freeze``/``unfreeze``,
    ``set_bad``/``set_good``.

Fixtures for the demo line (``Line1``):

``sim_plant`` (session)
    A :class:`simulators.plant_servers.PlantServers`, serving the plant on 127.0.0.1 free ports with its
    ticker running. ``.config_text`` (TOML), ``.config_path`` (that text written as ``exchange.toml`` in
    a temporary folder), ``.servers`` (protocol → server: ``get``/``set``/``write_count``...),
    ``.ports``, ``.read(path)``/``.write(path, value)`` (server-side, by tag path, with or without the
    ``[plant]`` provider), ``.address_of(path)``, ``.served_by(path)``, ``.advance(seconds)``, ``.reset()``.
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from simulators.engine import SimulatedPlant
    from simulators.plant_servers import PlantServers
    from simulators.testing import PlantFaults


@pytest.fixture(scope="session")
def sim_config_path(request: pytest.FixtureRequest) -> Path:
    """The config ``exchange_sim`` serves, found as the ``exchange`` command finds it: ``$EXCHANGE_CONFIG``,
    else ``exchange.toml`` in the working folder, else in pytest's root folder. Override it in a conftest."""
    import os

    candidates = [Path(os.environ["EXCHANGE_CONFIG"])] if os.environ.get("EXCHANGE_CONFIG") else [
        Path.cwd() / "exchange.toml", Path(request.config.rootpath) / "exchange.toml"]
    for path in candidates:
        if path.is_file():
            return path
    tried = ", ".join(str(path) for path in candidates)
    raise pytest.UsageError(f"exchange_sim: no config at {tried}; override the sim_config_path fixture in a conftest")


@pytest.fixture(scope="session")
def exchange_sim_session(sim_config_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedPlant]:
    """The plant of ``sim_config_path`` served on free ports for the whole session."""
    from simulators.testing import simulate_config

    out = tmp_path_factory.mktemp("exchange_sim") / Path(sim_config_path).name
    with simulate_config(sim_config_path, config_out=out) as sim:
        yield sim


@pytest.fixture
def exchange_sim(exchange_sim_session: SimulatedPlant) -> Iterator[SimulatedPlant]:
    """``exchange_sim_session`` reset before the test; its faults undone after it."""
    exchange_sim_session.reset()
    try:
        yield exchange_sim_session
    finally:
        exchange_sim_session.undo_faults()


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
    from simulators.plant_servers import PlantServers

    servers = PlantServers(sim_plant_params, protocols=sim_plant_protocols, host="127.0.0.1")
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
