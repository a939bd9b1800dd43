"""Shared by the step-library tests: an in-process engine built from any config sections.

``make_engine(databases={...}, http={...}, devices=..., tags=...)`` gives a running runtime plus
dispatcher on a SQLite store in the test's tmp folder; the extra keyword arguments become config
sections as in exchange.toml (``engine={...}`` is merged over the test defaults). It is installed as
the process runtime, so steps called outside a run use it too. Also re-exports the scripted HTTP
server and controllable PostgreSQL fixtures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.operator.runtime import Runtime
from exchange.workflows.engine.instance import set_runtime
from tests.integrations.fixtures import (  # noqa: F401
    controlled_postgres,
    http_server,
    running_postgres,
    scripted_http_server,
)

ENGINE_SETTINGS = {"workers": 4, "progress_interval_ms": 0, "node_id": "steps-test", "dispatch_poll_ms": 20}


class StepEngine:
    """A runtime and its dispatcher; ``restart()`` stops them like a shutdown and starts anew."""

    def __init__(self, tmp_path: Path, sections: dict[str, Any]) -> None:
        engine = {**ENGINE_SETTINGS, **sections.pop("engine", {})}
        self.raw = {
            "store": {"url": f"sqlite:///{tmp_path / 'var' / 'exchange.db'}"},
            "apps": {"paths": []},
            "engine": engine,
            **sections,
        }
        self.tmp_path = tmp_path
        self._open()

    def _open(self) -> None:
        self.config = config_from_dict(self.raw, base_dir=self.tmp_path)
        self.runtime = Runtime(self.config)
        set_runtime(self.runtime)
        self.dispatcher = Dispatcher(self.runtime)
        self.recovered = self.dispatcher.start()

    def run(self, workflow: str, params: dict[str, Any] | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
        """Start a run and wait for it to finish; returns the run dict (``show --json``)."""
        run_id = self.runtime.start(workflow, params or {})
        view = self.runtime.wait_for(run_id, timeout_s)
        assert view["status"] in ("SUCCESS", "ERROR", "CANCELLED"), f"run did not finish in {timeout_s}s: {view}"
        return view

    def restart(self) -> list[str]:
        self._close()
        self._open()
        return self.recovered

    def _close(self) -> None:
        self.dispatcher.stop()
        self.runtime.close()

    def close(self) -> None:
        self._close()
        set_runtime(None)


@pytest.fixture
def make_engine(tmp_path: Path) -> Iterator[Callable[..., StepEngine]]:
    engines: list[StepEngine] = []

    def make(**sections: Any) -> StepEngine:
        engine = StepEngine(tmp_path, sections)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()
