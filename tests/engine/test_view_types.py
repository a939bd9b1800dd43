"""The TypedDicts of the run view and of a tag reading describe the dicts really handed out: every
required key present, no key they do not name (a key added to a view without its type, or the
other way round, fails here)."""

from __future__ import annotations

from typing import Any

from exchange._engine.model.view_types import EventView, HeldOnView, PromptView, RunView, StepView
from exchange._values import QualifiedValue
from exchange._values.model import Quality, TagReading
from exchange.workflows.bootstrap import getWorkflows, step, workflow
from tests.engine.conftest import Engine


@step(name="view_types.double")
def double(n: int) -> int:
    return 2 * n


@workflow(name="view_types.flow")
def flow(n: int = 2) -> int:
    getWorkflows().progress("doubling", {"n": n})
    return double(n)


def keys_fit(value: dict[str, Any], typed: Any) -> None:
    required, optional = set(typed.__required_keys__), set(typed.__optional_keys__)
    assert required <= set(value), f"{typed.__name__}: missing {sorted(required - set(value))}"
    assert set(value) <= required | optional, f"{typed.__name__}: untyped {sorted(set(value) - required - optional)}"


def test_the_run_view_its_steps_and_events_have_the_keys_their_types_name(sqlite_engine: Engine) -> None:
    runtime = sqlite_engine.runtime
    run_id = runtime.start("view_types.flow", {"n": 3})
    view = runtime.wait_for(run_id, 20)
    assert view["status"] == "SUCCESS" and view["result"] == 6
    keys_fit(dict(view), RunView)
    assert {"children", "prompt", "held_on", "steps", "events"} <= set(view)
    (only_step,) = view.get("steps", [])
    keys_fit(dict(only_step), StepView)
    assert view.get("events")
    for event in view.get("events", []):
        keys_fit(dict(event), EventView)
    shortened = runtime.get_run(run_id, last_steps=0, last_events=1)
    keys_fit(dict(shortened), RunView)
    assert {"steps_total", "events_total", "events_in_doubt"} <= set(shortened)
    (summary,) = [v for v in runtime.list_runs(workflow="view_types.flow") if v["id"] == run_id]
    keys_fit(dict(summary), RunView)
    assert not {"steps", "events", "children"} & set(summary)


def test_the_nested_types_cover_what_they_name() -> None:
    for typed in (PromptView, HeldOnView):  # built by views.prompt_view / hold.held_view
        assert typed.__required_keys__ and not typed.__optional_keys__


def test_a_tag_reading_has_the_keys_its_type_names() -> None:
    keys_fit(dict(QualifiedValue.good(1.5, 0.0).to_dict()), TagReading)
    bad = QualifiedValue.bad(Quality.BAD_NOT_CONNECTED, 0.0, "device 'plc' is down").to_dict()
    keys_fit(dict(bad), TagReading)
    assert bad.get("error") == "device 'plc' is down" and bad["value"] is None
