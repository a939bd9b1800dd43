"""The process values of the batch record (``[record]`` tags) in real runs against a Modbus server:
sampled while a run executes, kept on change and at the keep-alive, a failed read kept as a gap,
nothing after the run's end, deleted with the run by retention; drawn as one SVG trend per tag in
the HTML record (opened in Chromium for a screenshot); the config's mistakes named."""

from __future__ import annotations

import itertools
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from exchange._config import RetentionConfig, config_from_dict
from exchange._engine import Retention
from exchange._plant.record_values import ValueSampler, start_sampler
from exchange._record import render_document
from exchange.errors import ConfigError
from exchange.workflows._services import preflight
from exchange.workflows.bootstrap import getWorkflows, workflow
from simulators.servers.modbus import ModbusSimServer
from tests.conftest import free_port
from tests.drivers.dut_modbus import modbus_settings
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv
from tests.steps.conftest import StepEngine
from tests.steps.test_tags_steps import TAGS, plc  # noqa: F401 (the Modbus server fixture)
from tests.waiting import wait_until

LEVEL, MODE, DEAD = "[plant]Tank/Level", "[plant]Tank/Mode", "[plant]Dead/Level"
RECORD = {"tags": [LEVEL, DEAD], "interval_ms": 100, "keep_alive_ms": 400, "values.mixing": {"tags": [MODE]}}


@workflow(name="values.mixing")
def mixing() -> str:
    getWorkflows().recv("done", timeoutSeconds=60)
    return "mixed"


@workflow(name="values.other")
def other() -> str:
    getWorkflows().recv("done", timeoutSeconds=60)
    return "done"


@pytest.fixture
def engine(make_engine: Callable[..., StepEngine], plc: ModbusSimServer) -> StepEngine:  # noqa: F811
    dead = modbus_settings(free_port(), timeout_ms=200)  # nothing listens there: every read fails
    return make_engine(devices={"plc": modbus_settings(plc.port), "dead": dead},
                       tags={**TAGS, DEAD: {"device": "dead", "address": "HRF1"}}, record=RECORD)


def seconds(at: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(at).timestamp()


def changes(points: list[list[Any]]) -> list[Any]:
    """The values of ``points`` with the keep-alive repeats left out."""
    return [value for value, _ in itertools.groupby(value for _at, value in points)]


def test_the_record_keeps_the_values_of_the_run_s_tags_while_it_runs(
        engine: StepEngine, plc: ModbusSimServer, tmp_path: Path) -> None:  # noqa: F811
    runtime = engine.runtime
    sampler = start_sampler(runtime)
    assert isinstance(sampler, ValueSampler)
    try:
        run_id = runtime.start("values.mixing", {})
        other_id = runtime.start("values.other", {})

        def kept(rid: str, tag: str) -> list[Any]:
            return changes(runtime.record(rid)["values"]["tags"].get(tag, []))

        wait_until(lambda: kept(run_id, LEVEL) == [40.0] and kept(run_id, MODE) == [0], 10,
                   message="the first values")
        for level in (42.5, 44.0, 45.5):  # the tank fills
            plc.set("HRF1", level)
            wait_until(lambda level=level: kept(run_id, LEVEL)[-1] == level, 10, message="the level's change")
        flat_from = sampler.ticks  # the level stays at 45.5 from here to the run's end
        plc.set("HR5", 3)
        wait_until(lambda: kept(run_id, MODE) == [0, 3], 10, message="the mode's change")
        ticks = sampler.ticks
        wait_until(lambda: sampler.ticks >= ticks + 10, 10, message="a second of unchanged values")
        runtime.send(run_id, "done", True)
        assert runtime.wait_for(run_id, 10)["status"] == "SUCCESS"
        after_end = sampler.ticks
        flat_ticks = after_end - flat_from
        plc.set("HRF1", 50.0)  # read for the other run, never kept for the one that ended
        wait_until(lambda: kept(other_id, LEVEL)[-1:] == [50.0] and sampler.ticks >= after_end + 3, 10,
                   message="the other run's samples after the first ended")
        record = runtime.record(run_id)
    finally:
        sampler.stop()

    values = record["values"]
    assert values["interval_ms"] == 100
    assert set(values["tags"]) == {LEVEL, MODE, DEAD}  # the global tags, and the workflow's own
    start, end = seconds(record["run"]["started_at"]), seconds(record["run"]["finished_at"])
    for tag, points in values["tags"].items():
        times = [seconds(at) for at, _value in points]
        assert times == sorted(times), tag
        assert all(start <= at <= end for at in times), (tag, record["run"]["started_at"], points)
    level = values["tags"][LEVEL]
    assert changes(level) == [40.0, 42.5, 44.0, 45.5]
    # On change and every keep_alive_ms: the flat second (10 or more reads) kept a row per 4 reads
    # (keep_alive_ms / interval_ms), not one per read.
    flat = [seconds(at) for at, value in level if value == 45.5]
    assert flat_ticks >= 10 and 2 <= len(flat) <= flat_ticks // 4 + 2, (flat_ticks, level)
    assert all(b - a >= 0.39 for a, b in itertools.pairwise(flat)), level
    # The dead device: a gap (null), its quality said, kept again at the keep-alive; the run succeeded.
    assert {value for _at, value in values["tags"][DEAD]} == {None}
    assert values["gaps"][DEAD][0][1].startswith("Bad_NotConnected")
    assert 2 <= len(values["gaps"][DEAD]) <= len(values["tags"][DEAD])
    other_values = runtime.record(other_id)["values"]["tags"]
    assert set(other_values) == {LEVEL, DEAD} and changes(other_values[LEVEL]) == [40.0, 42.5, 44.0, 45.5, 50.0]

    # The HTML record draws one trend per numeric tag, and the gaps.
    document = render_document(record)
    assert document.count('<svg class="trend"') == 3 and document.count('class="trend-gap"') >= 1
    assert "from 40 to 45.5" in document and "trend-line" in document
    (tmp_path / "record.html").write_text(document, encoding="utf-8")
    screenshot_record(tmp_path / "record.html")

    runtime.send(other_id, "done", True)
    assert runtime.wait_for(other_id, 10)["status"] == "SUCCESS"
    report = Retention(runtime, RetentionConfig(max_finished_runs=1)).apply()
    assert report.by_count == 1  # the run that finished first, with its values
    assert runtime.store.record_values.of_run(run_id) == []
    assert runtime.store.record_values.of_run(other_id)


def screenshot_record(path: Path) -> None:
    """The record opened in headless Chromium, as the console's tests do: every trend is drawn (a
    box of its size), and a screenshot (docs/screenshots/record-values.png with
    EXCHANGE_UPDATE_SCREENSHOTS=1)."""
    from playwright.sync_api import sync_playwright

    from tests.console.conftest import CHROMIUM, screenshot

    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.skip("no chromium")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(path.as_uri())
            boxes = [page.locator("svg.trend").nth(i).bounding_box() for i in range(3)]
            assert all(box is not None and box["width"] > 300 and box["height"] > 50 for box in boxes), boxes
            page.locator("#record-values").scroll_into_view_if_needed()
            page.evaluate("document.getElementById('record-values').scrollIntoView()")
            screenshot(page, "record-values")
        finally:
            browser.close()


BASE = {"devices": {"plc": {"driver": "modbus", "host": "127.0.0.1"}},
        "tags": {LEVEL: {"device": "plc", "address": "HRF1"}}}


@pytest.mark.parametrize(("record", "message"), [
    ({"tags": [LEVEL], "interval_ms": 50}, "record.interval_ms must be an integer from 100 to 3600000 "
                                           "(milliseconds), got an integer 50"),
    ({"tags": [LEVEL], "interval_ms": "500"}, "record.interval_ms must be an integer from 100 to 3600000 "
                                              "(milliseconds), got a string '500'"),
    ({"tags": [LEVEL], "interval_ms": 500.0}, "got a float 500.0"),
    ({"tags": [LEVEL], "interval_ms": 1000, "keep_alive_ms": 500}, "record.keep_alive_ms must be an integer "
                                                                    "from 1000 to 86400000"),
    ({"tags": ["[plant]Tank/Levle"]}, "record.tags: tag '[plant]Tank/Levle' is not configured"),
    ({"tags": LEVEL}, "record.tags must be a list of tag paths, got a string"),
    ({"tags": [LEVEL, LEVEL]}, "record.tags: tag '[plant]Tank/Level' is listed twice"),
    ({"tgas": [LEVEL]}, "unknown key 'tgas' (did you mean 'tags'?)"),
    ({"fill": {"tags": ["[plant]Nope"]}}, "record.fill.tags: tag '[plant]Nope' is not configured"),
    ({"fill": {"tag": [LEVEL]}}, "record.fill: unknown key 'tag' (did you mean 'tags'?)"),
])
def test_record_config_mistakes_are_named(record: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict({**BASE, "record": record}, source="exchange.toml")
    assert message in str(refused.value)


def test_a_record_table_of_a_workflow_the_apps_do_not_have_stops_the_start(
        make_engine: Callable[..., StepEngine]) -> None:
    engine = make_engine(**BASE, record={"values.mixng": {"tags": [LEVEL]}})
    with pytest.raises(ConfigError) as refused:
        preflight(engine.runtime)
    assert "record.\"values.mixng\" names no workflow of the apps" in str(refused.value)
    assert "values.mixing" in str(refused.value)


RUN_APP = '''
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps.sleep import sleep_ms


@workflow(name="vals.soak")
def soak():
    sleep_ms(700)
    return "soaked"
'''


def test_exchange_run_samples_the_record_tags_and_exchange_record_shows_them(
        tmp_path: Path, plc: ModbusSimServer, exchange_zygote: ForkServer) -> None:  # noqa: F811
    """The commands as a plant engineer runs them: ``exchange run`` samples its run's tags,
    ``exchange record --json`` gives them back; a mistake in ``[record]`` stops ``exchange run``."""
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    env.write_app("vals", RUN_APP)
    base = env.config_path.read_text(encoding="utf-8")
    plant = (f'\n[devices.plc]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = {plc.port}\n'
             f'\n[tags."{LEVEL}"]\ndevice = "plc"\naddress = "HRF1"\n')
    env.config_path.write_text(base + plant + f'\n[record]\ntags = ["{LEVEL}"]\ninterval_ms = 100\n',
                               encoding="utf-8")
    done = env.cli("run", "vals.soak", "--json").check()
    run_id = done.json()["id"]
    values = env.cli("record", run_id, "--json").check().json()["values"]
    assert values["interval_ms"] == 100 and changes(values["tags"][LEVEL]) == [40.0]
    env.config_path.write_text(base + plant + '\n[record]\ntags = ["[plant]Tank/Levle"]\n', encoding="utf-8")
    refused = env.cli("run", "vals.soak")
    assert refused.returncode != 0 and "record.tags: tag '[plant]Tank/Levle' is not configured" in refused.stderr


def test_the_trends_of_booleans_texts_long_runs_and_gaps() -> None:
    """The renderer alone: a Boolean is drawn 0/1 and labelled false/true; a text is listed; a tag
    with more values than a chart's pixels is drawn from each column's first, lowest, highest and
    last (its extremes kept); a gap at the end is a grey band to the run's end."""
    from exchange._record.trend import POINTS_MAX, trends
    from exchange._timefmt import iso_utc

    start = 1_800_000_000.0
    many = [[iso_utc(start + i * 0.1), float(i % 7)] for i in range(POINTS_MAX * 3)]
    many[1234][1] = 99.0  # one spike among thousands
    values = {"tags": {
        "[p]Valve": [[iso_utc(start + 1), False], [iso_utc(start + 2), True]],
        "[p]Recipe": [[iso_utc(start + 1), "B-12"], [iso_utc(start + 5), "B-13"]],
        "[p]Level": many,
        "[p]Flow": [[iso_utc(start + 1), 3], [iso_utc(start + 2), None]],
    }, "gaps": {"[p]Flow": [[iso_utc(start + 2), "Bad_NotConnected"]]}}
    found = {t.tag: t for t in trends(values, iso_utc(start), iso_utc(start + POINTS_MAX * 0.3 + 1))}
    valve, recipe, level, flow = (found[tag] for tag in ("[p]Valve", "[p]Recipe", "[p]Level", "[p]Flow"))
    assert valve.svg is not None and (valve.low, valve.high) == ("false", "true")
    assert recipe.svg is None and recipe.changes == values["tags"]["[p]Recipe"]
    assert level.svg is not None and (level.low, level.high) == ("0", "99") and level.count == POINTS_MAX * 3
    assert str(level.svg).count("V") < POINTS_MAX * 2 and "trend-dot" not in str(level.svg)
    heights = [float(y) for y in re.findall(r"V([\d.]+)", str(level.svg))]
    assert min(heights) < 20 < max(heights)  # the spike reaches the top; the rest stays near the bottom
    assert 'class="trend-gap"' in str(flow.svg) and flow.gaps == [[iso_utc(start + 2), "Bad_NotConnected"]]
    assert 'style=' not in "".join(str(t.svg) for t in found.values())  # the console's CSP refuses inline styles
