"""Testing workflows against a real runtime, the way a gateway runs them.

    from exchange.workflows.testing import running_engine

    def test_my_batch(tmp_path):
        with running_engine({"store": {"url": f"sqlite:///{tmp_path}/exchange.db"},
                             "apps": {"paths": ["apps"]}}) as rt:
            view = rt.waitFor(rt.start("my.batch", {"litres": 20}), 60)
            assert view["status"] == "SUCCESS"

``replay_history(path)`` replays a run's history exported with ``exchange export-run RUN > path``
against the workflow code imported now, executing nothing, and raises :class:`HistoryDiverges` (an
AssertionError: pytest shows it as a failed assertion) naming the run, the sequence number, what the
history recorded there and what the code does now. Keep histories of real runs in the repo: a change
that would break the runs in flight fails the plant's own tests::

    from exchange.workflows.testing import replay_history
    import apps.batch  # registers the workflow (or pass apps=["apps"])

    def test_the_batch_still_replays_last_weeks_run():
        replay_history("tests/histories/batch-2026-03-01.json")

The config is a dict shaped like exchange.toml (with the simulated plant's devices and tags from the
``sim_plant`` fixture, say). The apps are loaded and the config's devices, tags and databases are
checked as a gateway checks them at start (:func:`exchange.workflows._services.preflight`: a mistake
raises here, naming it, not in the middle of a run); then a dispatcher executes runs on worker
threads, and everything is stopped and closed when the block ends.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from exchange._config import config_from_dict
from exchange._engine import Dispatcher, Runtime
from exchange._plant.record_values import start_sampler
from exchange.workflows import apps
from exchange.workflows._services import preflight
from exchange.workflows.engine.instance import Workflows, getWorkflows, set_runtime

__all__ = ["HistoryDiverges", "replay_history", "running_engine"]


class HistoryDiverges(AssertionError):
    """``replay_history``: the workflow code of now does not replay the recorded history. ``outcome``
    is the check's result as ``exchange check-replay --json`` prints it (``divergence``: where, the
    recorded step, what the code does now)."""

    def __init__(self, message: str, outcome: dict[str, Any]) -> None:
        super().__init__(message)
        self.outcome = outcome


def replay_history(path: str | Path, *, apps_paths: Sequence[str | Path] | None = None) -> dict[str, Any]:
    """Replay the history in ``path`` (written by ``exchange export-run``) against its workflow as
    registered now, executing no step, wait or write; returns the outcome (``status`` "ok",
    ``ends_at``, ``next_call``, ...: the fields of ``check-replay --json``).

    The workflow must be registered: its module imported, or its folder given in ``apps_paths``
    (loaded as a gateway loads ``[apps] paths``). Raises :class:`HistoryDiverges` when the code
    diverges (the message names the run, the sequence number, the recorded step and what the code
    does now), InvalidArgument when the file is not an exported history, OSError when it cannot be
    read. What the workflow reads of other runs comes from an empty store made for the call."""
    where = str(path)
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="exchange-replay-") as folder:
        config = config_from_dict({"store": {"url": f"sqlite:///{Path(folder) / 'replay.db'}"},
                                   "apps": {"paths": [str(p) for p in apps_paths or ()]}},
                                  source="<replay_history>", base_dir=folder)
        if apps_paths:
            apps.load(config)
        runtime = Runtime(config)
        previous = set_runtime(runtime)  # what the workflow reads of other runs: this empty store
        try:
            outcome = runtime.check_exported(document, where)
        finally:
            set_runtime(previous)
            runtime.close()
    result = outcome.as_dict()
    if outcome.ok:
        return result
    found = outcome.divergence
    if found is None:
        raise HistoryDiverges(f"{where}: run {outcome.run_id} could not be replayed: {outcome.error}", result)
    recorded = "nothing" if found.recorded is None else (
        f"{found.recorded['name']} ({found.recorded['status']}"
        + (f", output {found.recorded['output']}" if found.recorded.get("output") else "") + ")")
    at = f"at sequence {found.seq}" if found.seq is not None else "at its start"
    raise HistoryDiverges(
        f"{where}: run {outcome.run_id} of {outcome.workflow} diverges {at} [{found.kind}]: "
        f"recorded {recorded}; now {found.now}\n{found.message}", result)


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
        sampler = start_sampler(runtime)  # the [record] tags, as a gateway samples them
        try:
            yield getWorkflows()
        finally:
            if sampler is not None:
                sampler.stop()
            dispatcher.stop()
    finally:
        set_runtime(previous)
        runtime.close()
