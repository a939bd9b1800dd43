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

The protocol libraries' loggers (``pymodbus``, ``asyncua``, ``pycomm3``, ``cpppo`` and its
``enip``) are kept at WARNING for the session, so a failing test's captured log shows the test's own
lines, not every frame on the wire, even with pytest's ``log_level = DEBUG``. Asked otherwise with
the ini option ``exchange_protocol_log_level`` or the environment variable
``EXCHANGE_PROTOCOL_LOG_LEVEL`` (which wins): a level name, or ``NOTSET`` to let them follow pytest's
``log_level``. A logger that already has a level of its own when the session starts (set by a
conftest) keeps it; the levels are restored when the session ends.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from simulators.engine import SimulatedPlant
    from simulators.plant_servers import PlantServers
    from simulators.testing import PlantFaults


PROTOCOL_LOGGERS = ("pymodbus", "asyncua", "pycomm3", "cpppo", "enip")
LOG_LEVEL_INI = "exchange_protocol_log_level"
LOG_LEVEL_ENV = "EXCHANGE_PROTOCOL_LOG_LEVEL"
DEFAULT_PROTOCOL_LOG_LEVEL = "WARNING"
_LEVEL_NAMES = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "NOTSET")
_saved_levels = pytest.StashKey[dict[str, int]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(LOG_LEVEL_INI, "level of the protocol libraries' loggers (pymodbus, asyncua, pycomm3, cpppo) "
                  f"in tests: {DEFAULT_PROTOCOL_LOG_LEVEL} unless set; NOTSET follows log_level "
                  f"(${LOG_LEVEL_ENV} wins)", default=None)


def protocol_log_level(config: pytest.Config) -> int:
    """The level asked for the protocol loggers (module doc); UsageError naming where a bad one was."""
    from_env = os.environ.get(LOG_LEVEL_ENV, "").strip()
    raw, where = (from_env, f"${LOG_LEVEL_ENV}") if from_env else (config.getini(LOG_LEVEL_INI), LOG_LEVEL_INI)
    text = str(raw or DEFAULT_PROTOCOL_LOG_LEVEL).strip().upper()
    if text not in _LEVEL_NAMES:
        raise pytest.UsageError(f"{where} must be one of {', '.join(_LEVEL_NAMES)}, got {raw!r}")
    level: int = logging.getLevelName(text)
    return level


def pytest_configure(config: pytest.Config) -> None:
    """Keep the protocol libraries' loggers at the level asked (module doc)."""
    level = protocol_log_level(config)
    saved: dict[str, int] = {}
    for name in PROTOCOL_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level != logging.NOTSET:
            continue  # a conftest chose this one's level: that is asking
        saved[name] = logger.level
        logger.setLevel(level)
    config.stash[_saved_levels] = saved


def pytest_unconfigure(config: pytest.Config) -> None:
    for name, level in config.stash.get(_saved_levels, {}).items():
        logging.getLogger(name).setLevel(level)


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
