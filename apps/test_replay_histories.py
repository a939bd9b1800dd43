"""Histories of real runs kept as regression fixtures, the way a plant keeps them: a run of the batch loop
held by its operator is exported (``exchange export-run RUN > apps/histories/...json`` does the same)
and replayed against the workflow code as it is now. A change to ``demo.batch_loop`` that would break
a batch held in the plant fails here, naming the run, the step and what the code does instead.

To refresh the kept history after a deliberate, patched change: run a batch, HOLD it after its second
phase, and ``exchange export-run RUN > apps/histories/batch_loop_held.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from exchange.workflows.testing import replay_history, running_engine

APPS = Path(__file__).resolve().parent
KEPT = APPS / "histories" / "batch_loop_held.json"


@pytest.fixture
def rt(tmp_path: Path):
    config = {"store": {"url": f"sqlite:///{tmp_path}/exchange.db"}, "apps": {"paths": [str(APPS)]},
              "engine": {"progress_interval_ms": 0}}
    with running_engine(config, base_dir=tmp_path) as workflows:
        yield workflows


def held_after_two_phases(rt) -> str:
    """A batch held by its operator after its second phase (recorded: two phases, the HOLD)."""
    run_id = rt.start("demo.batch_loop", {"batch_id": "B-17", "phases": 4, "phase_ms": 50})
    deadline = time.monotonic() + 20
    while [s["name"] for s in rt.getRun(run_id)["steps"]].count("batch.phase") < 2:
        assert time.monotonic() < deadline, "the batch never finished two phases"
        time.sleep(0.01)
    rt.sendCommand(run_id, "HOLD", "sample the tank", actor="op")
    while rt.getRun(run_id)["state"] != "HELD":
        assert time.monotonic() < deadline, "the batch never held"
        time.sleep(0.01)
    return run_id


def test_a_held_batch_exported_now_replays_against_the_code(rt, tmp_path: Path):
    run_id = held_after_two_phases(rt)
    path = tmp_path / "held.json"
    path.write_text(json.dumps(rt.runtime.export_run(run_id)), encoding="utf-8")
    outcome = replay_history(path)
    assert outcome["status"] == "ok", outcome
    assert outcome["next_call"] == "exchange.recvCommand"  # where it waits for RESUME now
    rt.sendCommand(run_id, "STOP", "end of test")
    assert rt.waitFor(run_id, 20)["status"] == "SUCCESS"


def test_the_kept_history_of_a_held_batch_still_replays():
    outcome = replay_history(KEPT, apps_paths=[APPS])
    assert outcome["status"] == "ok", outcome
    assert outcome["steps_replayed"] >= 3
