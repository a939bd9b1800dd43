"""The one parameter check through the Python entries, in process on a real SQLite store:
``getWorkflows().start``, ``rt.startChild`` inside a run, a template saved and a template started
(one saved before the workflow's parameters changed, written to the store directly as such an old
version would be). Every case of tests/paramcases.py is refused with InvalidParams naming the
parameter, the expected type and the value, and no run (or template version) is stored."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._engine.gateway.dispatcher import Dispatcher
from exchange._engine.operator.runtime import Runtime
from exchange._engine.operator.templates import Templates
from exchange._store import codec
from exchange.errors import InvalidParams
from exchange.workflows import apps
from exchange.workflows.engine.instance import getWorkflows, set_runtime
from tests.paramcases import ACCEPTED, APP, PARENT, REFUSED, VALVE, Case, refused_cases


@dataclass
class Plant:
    runtime: Runtime
    db: Path

    def runs(self, workflow: str | None = None) -> int:
        """Rows of the store's runs table (of ``workflow``), read with sqlite3, not the runtime."""
        with closing(sqlite3.connect(self.db)) as conn:
            if workflow is None:
                return int(conn.execute("SELECT count(*) FROM exchange_runs").fetchone()[0])
            return int(conn.execute("SELECT count(*) FROM exchange_runs WHERE workflow = ?", (workflow,)).fetchone()[0])


@pytest.fixture(scope="module")
def plant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plant]:
    root = tmp_path_factory.mktemp("params")
    app_dir = root / "paramcheckapps"  # a package name no other in-process test loads
    app_dir.mkdir()
    (app_dir / "params_app.py").write_text(APP, encoding="utf-8")
    db = root / "var" / "exchange.db"
    config = config_from_dict({"store": {"url": f"sqlite:///{db}"}, "apps": {"paths": [str(app_dir)]},
                               "engine": {"workers": 8, "progress_interval_ms": 0, "node_id": "params-node"}},
                              base_dir=root)
    runtime = Runtime(config)
    apps.load(config)
    dispatcher = Dispatcher(runtime)
    set_runtime(runtime)
    dispatcher.start()
    yield Plant(runtime, db)
    dispatcher.stop()
    runtime.close()
    set_runtime(None)


@pytest.mark.parametrize("case", refused_cases())
def test_python_start_refuses_and_stores_nothing(plant: Plant, case: Case) -> None:
    before = plant.runs()
    with pytest.raises(InvalidParams) as refused:
        getWorkflows().start(VALVE, case.params)
    assert case.named in str(refused.value) and str(refused.value).startswith(f"workflow '{VALVE}': ")
    assert plant.runs() == before


@pytest.mark.parametrize(("params", "x"), [pytest.param(params, x, id=name) for name, params, _, x in ACCEPTED])
def test_python_start_takes_what_fits_and_the_run_gets_it_as_sent(plant: Plant, params: dict[str, Any],
                                                                 x: Any) -> None:
    run = getWorkflows().waitFor(getWorkflows().start(VALVE, params), 20)
    assert run["status"] == "SUCCESS", run["error"]
    assert run["params"] == params
    assert run["result"]["x"] == x and run["result"]["x_type"] == type(x).__name__  # 10 stays an int


def test_start_child_fails_the_parent_and_creates_no_child(plant: Plant) -> None:
    parents = {case.id: getWorkflows().start(PARENT, {"child": case.params}) for case in REFUSED}
    for case in REFUSED:
        run = getWorkflows().waitFor(parents[case.id], 20)
        assert run["status"] == "ERROR", (case.id, run["status"])
        assert run["error"]["type"] == "InvalidParams" and case.named in run["error"]["message"], case.id
    with closing(sqlite3.connect(plant.db)) as conn:
        children = conn.execute("SELECT count(*) FROM exchange_runs WHERE parent_run_id IS NOT NULL").fetchone()[0]
    assert children == 0


@pytest.mark.parametrize("case", refused_cases())
def test_a_template_that_does_not_fit_is_not_saved(plant: Plant, case: Case) -> None:
    name = f"recipe-{uuid.uuid4().hex[:8]}"
    with pytest.raises(InvalidParams) as refused:
        Templates(plant.runtime).save(name, VALVE, case.params, actor="engineer")
    assert case.named in str(refused.value)
    assert plant.runtime.store.templates.versions(name) == []


@pytest.mark.parametrize("case", refused_cases())
def test_an_old_template_that_no_longer_fits_is_not_started(plant: Plant, case: Case) -> None:
    name = f"old-{uuid.uuid4().hex[:8]}"
    plant.runtime.store.templates.add_version(name, VALVE, codec.dumps(case.params), note=None, actor="engineer",
                                              activate=True)  # as saved before the workflow changed
    before = plant.runs()
    with pytest.raises(InvalidParams) as refused:
        Templates(plant.runtime).start(name, actor="operator")
    assert str(refused.value).startswith(f"template '{name}' v1 does not fit its workflow now: ")
    assert case.named in str(refused.value)
    assert plant.runs() == before
