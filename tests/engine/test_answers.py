"""The one "replay the recorded answer or record a new one" helper
(:func:`exchange._engine.execution.answers.replay_or_record`), in a real engine on SQLite and
PostgreSQL; the rules that the in-run operations use it rather than placing calls themselves, and
that the facade leaves the store to them.

Each producer appends a line to a file, so the file counts how often it really ran; a retry of the
failed run replays its history.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

from exchange._engine.execution import answers
from exchange._engine.execution.context import current_run
from exchange.errors import FatalError
from exchange.workflows.bootstrap import getWorkflows, workflow
from tests.engine.conftest import Engine
from tests.harness import read_lines
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _produce(path: str, answer: Any) -> Any:
    with open(path, "a", encoding="utf-8") as f:
        f.write("produced\n")
    return answer


def _fail_until(flag: str) -> None:
    if not os.path.exists(flag):
        raise FatalError("not yet")


@workflow(name="answers.once")
def once(path: str, flag: str) -> Any:
    ctx = current_run()
    assert ctx is not None
    got = answers.replay_or_record(ctx, "answers.reading", lambda: _produce(path, {"bar": 2.5, "at": [1, 2]}))
    _fail_until(flag)
    return got


@workflow(name="answers.quiet")
def quiet(path: str, flag: str) -> list[Any]:
    ctx = current_run()
    assert ctx is not None
    nothing = answers.replay_or_record(ctx, "answers.poll", lambda: _produce(path, answers.QUIET), quiet_answer=None)
    got = answers.replay_or_record(ctx, "answers.poll", lambda: _produce(path, "a message"), quiet_answer=None)
    _fail_until(flag)
    return [nothing, got]


@workflow(name="answers.diverges")
def diverges(path: str, flag: str) -> Any:
    ctx = current_run()
    assert ctx is not None
    name = "answers.changed" if os.path.exists(flag) else "answers.original"  # the code "changed" meanwhile
    got = answers.replay_or_record(ctx, name, lambda: _produce(path, 1))
    _fail_until(flag)
    return got


def _files(tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path / "produced.txt"), str(tmp_path / "flag")


def _produced(path: str) -> int:
    return len(read_lines(Path(path))) if os.path.exists(path) else 0


def _finished(run_id: str) -> dict[str, Any]:
    view = getWorkflows().waitFor(run_id, 30)
    assert view["status"] in ("SUCCESS", "ERROR"), view
    return dict(view)


def _rerun(run_id: str, flag: str) -> dict[str, Any]:
    Path(flag).touch()
    getWorkflows().retry(run_id)
    return _finished(run_id)


def test_a_fresh_position_produces_once_and_a_replay_answers_the_record(engine: Engine, tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    run_id = getWorkflows().start("answers.once", {"path": path, "flag": flag})
    first = _finished(run_id)
    assert first["status"] == "ERROR" and _produced(path) == 1
    assert [(s["seq"], s["name"], s["status"]) for s in first["steps"]] == [(1, "answers.reading", "SUCCESS")]

    done = _rerun(run_id, flag)
    assert done["status"] == "SUCCESS", done["error"]
    assert done["result"] == {"bar": 2.5, "at": [1, 2]}  # the recorded answer, decoded
    assert _produced(path) == 1  # the replay did not call the producer
    assert [s["name"] for s in done["steps"]] == ["answers.reading"]  # nor recorded anything again


def test_a_quiet_answer_leaves_no_row_and_replays_without_the_producer(engine: Engine, tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    run_id = getWorkflows().start("answers.quiet", {"path": path, "flag": flag})
    first = _finished(run_id)
    assert first["status"] == "ERROR" and _produced(path) == 2
    # the quiet poll has no row: the recorded one holds it in its count of quiet operations before it
    assert [(s["seq"], s["name"]) for s in first["steps"]] == [(1, "answers.poll")]

    done = _rerun(run_id, flag)
    assert done["status"] == "SUCCESS", done["error"]
    assert done["result"] == [None, "a message"] and _produced(path) == 2


def test_a_divergent_record_raises_the_non_determinism_error(engine: Engine, tmp_path: Path) -> None:
    path, flag = _files(tmp_path)
    rt = getWorkflows()
    run_id = rt.start("answers.diverges", {"path": path, "flag": flag})
    assert _finished(run_id)["status"] == "ERROR" and _produced(path) == 1

    Path(flag).touch()
    rt.retry(run_id)  # the divergence holds the run on its code (execution/code_hold.py)
    held = wait_until(lambda: (v := rt.getRun(run_id))["state"] == "HELD" and v["error"] and v, 30,
                      message="the retried run held on its code")
    assert held["error"] == {"type": "NonDeterminismError", "message": (
        "history diverges at step 1: recorded answers.original, the code now calls answers.changed; fix the "
        "code (exchange check-replay) and RESUME")}
    assert _produced(path) == 1  # refused before the producer ran
    rt.cancel(run_id)
    assert rt.waitFor(run_id, 30)["status"] == "CANCELLED"


# ----- the shape: in-run operations do not place calls in the history themselves ------------------
# Only these place themselves (see the answers module): a sleep has no answer, and a patch's missing
# marker is an answer no record holds.
PLACES_ITSELF = {("operations.py", "sleep_in_run"), ("versioning.py", "patched")}


def _calls_to_replay_positions(tree: ast.AST) -> bool:
    """Whether ``tree`` calls replay's ``place`` or ``advance`` (by name, or as ``replay.``)."""
    return any(isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id in ("place", "advance"))
        or (isinstance(node.func, ast.Attribute) and node.func.attr in ("place", "advance")
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "replay"))
        for node in ast.walk(tree))


def test_in_run_operations_replay_or_record_through_the_one_helper() -> None:
    inrun = ROOT / "exchange" / "_engine" / "inrun"
    placing = {
        (path.name, fn.name)
        for path in sorted(inrun.glob("*.py"))
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(fn, ast.FunctionDef) and _calls_to_replay_positions(fn)
    }
    assert placing == PLACES_ITSELF


def test_the_facade_leaves_the_store_to_the_in_run_operations() -> None:
    facade = ast.parse((ROOT / "exchange" / "_engine" / "inrun" / "facade.py").read_text(encoding="utf-8"))
    assert [node.lineno for node in ast.walk(facade) if isinstance(node, ast.Attribute) and node.attr == "store"] == []
