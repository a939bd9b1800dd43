"""An in-process runtime with a dispatcher, on each store backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.operator.runtime import Runtime
from exchange.workflows.engine.instance import set_runtime


def make_runtime(store_url: str, tmp_path: Path, **engine: Any) -> Runtime:
    settings = {"workers": 8, "progress_interval_ms": 0, "node_id": "test-node"}
    settings.update(engine)
    config = config_from_dict(
        {"store": {"url": store_url}, "apps": {"paths": []}, "engine": settings}, base_dir=tmp_path
    )
    return Runtime(config)


class Engine:
    """A runtime plus its dispatcher; ``restart()`` stops it the way a shutdown does and starts anew."""

    def __init__(self, store_url: str, tmp_path: Path, **engine: Any) -> None:
        self.store_url = store_url
        self.tmp_path = tmp_path
        self.engine_settings = engine
        self.runtime = make_runtime(store_url, tmp_path, **engine)
        self.dispatcher = Dispatcher(self.runtime)
        set_runtime(self.runtime)
        self.recovered = self.dispatcher.start()

    def restart(self) -> list[str]:
        self.dispatcher.stop()
        self.runtime.close()
        self.runtime = make_runtime(self.store_url, self.tmp_path, **self.engine_settings)
        set_runtime(self.runtime)
        self.dispatcher = Dispatcher(self.runtime)
        self.recovered = self.dispatcher.start()
        return self.recovered

    def close(self) -> None:
        self.dispatcher.stop()
        self.runtime.close()
        set_runtime(None)


@pytest.fixture
def engine(store_url: str, tmp_path: Path) -> Iterator[Engine]:
    """A running engine, once on SQLite and once on PostgreSQL."""
    eng = Engine(store_url, tmp_path)
    yield eng
    eng.close()


@pytest.fixture
def sqlite_engine(sqlite_url: str, tmp_path: Path) -> Iterator[Engine]:
    eng = Engine(sqlite_url, tmp_path)
    yield eng
    eng.close()
