"""Testing workflows against a real runtime, the way a gateway runs them.

    from exchange.workflows.testing import running_engine

    def test_my_batch(tmp_path):
        with running_engine({"store": {"url": f"sqlite:///{tmp_path}/exchange.db"},
                             "apps": {"paths": ["apps"]}}) as rt:
            view = rt.waitFor(rt.start("my.batch", {"litres": 20}), 60)
            assert view["status"] == "SUCCESS"

The config is a dict shaped like exchange.toml (with the simulated plant's devices and tags from the
``sim_plant`` fixture, say). The apps are loaded and the config's devices, tags and databases are
checked as a gateway checks them at start (:func:`exchange.workflows._services.preflight`: a mistake
raises here, naming it, not in the middle of a run); then a dispatcher executes runs on worker
threads, and everything is stopped and closed when the block ends.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from exchange._config import config_from_dict
from exchange._engine import Dispatcher, Runtime
from exchange.workflows import apps
from exchange.workflows._services import preflight
from exchange.workflows.engine.instance import Workflows, getWorkflows, set_runtime

__all__ = ["running_engine"]


@contextmanager
def running_engine(raw_config: Mapping[str, Any], base_dir: str | Path = ".") -> Iterator[Workflows]:
    """A runtime built from ``raw_config`` with its apps loaded and a dispatcher running."""
    config = config_from_dict(raw_config, source="<test config>", base_dir=base_dir)
    runtime = Runtime(config)
    previous = set_runtime(runtime)
    try:
        apps.load(config)
        preflight(runtime)
        dispatcher = Dispatcher(runtime)
        dispatcher.start()
        try:
            yield getWorkflows()
        finally:
            dispatcher.stop()
    finally:
        set_runtime(previous)
        runtime.close()
