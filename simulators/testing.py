"""Helpers for tests against a simulated plant: your own config's (:func:`simulate_config`), waiting
on a condition (:func:`wait_until`), and the demo line's faults undone at teardown (:class:`PlantFaults`).

Light on purpose (stdlib only at import): the pytest plugin imports it in every test session.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulators.engine import SimulatedPlant
    from simulators.plant_servers import PlantServers
    from simulators.state import StepFunction


@contextmanager
def simulate_config(path: str | Path, *, free_ports: bool = True, host: str = "127.0.0.1",
                    config_out: str | Path | None = None, model: StepFunction | None = None,
                    tick_ms: int | None = None, ticker: bool = True) -> Iterator[SimulatedPlant]:
    """Serve every device of the config at ``path``, as ``exchange simulate --from-config`` does.

    The ``with`` block gets a running :class:`simulators.engine.SimulatedPlant` ``sim``:
    ``sim.config_path`` is the config pointing at its servers (written to ``config_out``, else to a
    temporary folder removed afterwards), ``sim.config_document()`` the same as a dict for
    ``running_engine``; ``sim.read(path)`` / ``sim.write(path, value)`` by tag path;
    ``sim.advance(seconds)`` moves simulated time at once; faults: ``sim.stop_device(name)`` /
    ``start_device`` / ``restart_device`` / ``drop_connections``, ``sim.freeze(path, value)`` /
    ``unfreeze``, ``sim.set_bad(path)`` / ``set_good``; ``sim.reset()`` undoes them all and starts
    over. Free ports by default (``free_ports=False``: the configured ones), so tests run side by side.
    ``model`` replaces ``[simulation] model``; ``ticker=False`` moves nothing until ``advance``.
    Errors (a device or tag that cannot be served, a port in use) name it, before anything listens.
    """
    from simulators.engine import SimulatedPlant

    sim = SimulatedPlant.from_file(path, host=host, free_ports=free_ports, model=model, tick_ms=tick_ms)
    folder = None if config_out is not None else Path(tempfile.mkdtemp(prefix="exchange-sim-"))
    try:
        sim.start(ticker=ticker)
        target = Path(config_out) if config_out is not None else folder / Path(path).name  # type: ignore[operator]
        target.parent.mkdir(parents=True, exist_ok=True)
        sim.write_config(target)
        yield sim
    finally:
        sim.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def wait_until(predicate: Callable[[], Any], timeout_s: float = 5.0, interval_s: float = 0.02,
               message: str | Callable[[], str] = "") -> Any:
    """Call ``predicate`` until it returns something truthy, and return that; AssertionError at the deadline.

    Exceptions raised by ``predicate`` propagate (a broken check should fail loudly, not time out).
    ``message`` (text, or a callable giving it, for the last seen value) is put in the AssertionError.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"condition not met within {timeout_s} s" + (f": {text}" if text else ""))
        time.sleep(interval_s)


class PlantFaults:
    """Fault injection on a running plant; :meth:`undo` (run at fixture teardown) clears all of it.

    ``protocol`` is ``"modbus"``, ``"opcua"`` or ``"enip"``; ``path`` a plant point such as
    ``"Line1/Tank/Level"`` (a ``[provider]`` prefix is accepted).
    """

    def __init__(self, servers: PlantServers) -> None:
        self._servers = servers
        self._stopped: set[str] = set()

    def stop(self, protocol: str) -> None:
        """Stop ``protocol``'s server: clients get connection refused until :meth:`start`."""
        self._servers.stop_server(protocol)
        self._stopped.add(protocol)

    def start(self, protocol: str) -> None:
        """Start a stopped server again on its port, with the plant's current values."""
        self._servers.start_server(protocol)
        self._stopped.discard(protocol)

    def restart(self, protocol: str) -> None:
        """Stop and start the server on the same port: every client connection drops."""
        self._servers.restart_server(protocol)

    def drop_connections(self, protocol: str) -> None:
        """Close every client connection to ``protocol``'s server; the server stays up."""
        self._servers.drop_connections(protocol)

    def freeze(self, path: str, value: Any = None) -> None:
        """The ticker stops updating ``path`` (optionally set to ``value`` first): a stuck sensor or command."""
        self._servers.freeze(path, value)

    def unfreeze(self, path: str | None = None) -> None:
        self._servers.unfreeze(path)

    def mixer_fault(self, on: bool = True) -> None:
        """Trip the mixer: Running drops, Fault rises, until cleared with ``mixer_fault(False)``."""
        self._servers.set_mixer_fault(on)

    def undo(self) -> None:
        """Unfreeze every point, clear the mixer fault, start every server this object stopped."""
        self._servers.unfreeze()
        self._servers.set_mixer_fault(False)
        for protocol in sorted(self._stopped):
            self._servers.start_server(protocol)
        self._stopped.clear()
