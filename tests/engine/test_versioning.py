"""Replay-safe time and upgrades under runs in flight, with real gateway processes.

``rt.now()`` answers the recorded time after a kill -9. ``rt.patched`` lets an app change while runs
are waiting: on SQLite and on PostgreSQL, runs recorded by the old code finish on the old path, runs
started on the new code take the new one, each side effect happens once, and nothing raises
NonDeterminismError."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, read_lines, wait_until

CLOCK_APP = """
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from testapps.sidefx import append_line


@step(name="ver.note")
def note(path, text):
    append_line(path, text)
    return text


@workflow(name="ver.clock")
def clock(path):
    rt = getWorkflows()
    first = rt.now()
    note(path, first.isoformat())
    rt.recv("go", timeoutSeconds=120)
    again = rt.now()
    return {"first": first.isoformat(), "again": again.isoformat(), "ordered": again >= first}
"""

V1 = """
from exchange.workflows.bootstrap import step, workflow
from exchange.workflows.engine.instance import getWorkflows
from testapps.sidefx import append_line


@step(name="ver.fill")
def fill(path, tag):
    append_line(path, tag + " fill")


@step(name="ver.mix_v1")
def mix_v1(path, tag):
    append_line(path, tag + " mix-v1")


@step(name="ver.drain")
def drain(path, tag):
    append_line(path, tag + " drain")


@workflow(name="ver.batch")
def batch(path, tag):
    rt = getWorkflows()
    fill(path, tag)
    mix_v1(path, tag)
    rt.recv("go", timeoutSeconds=120)
    drain(path, tag)
    return "v1 body"
"""

# The new code: a different mixing step behind a patch, and the patch asked twice (one answer).
V2 = V1.replace('''@workflow(name="ver.batch")''', '''@step(name="ver.mix_v2")
def mix_v2(path, tag):
    append_line(path, tag + " mix-v2")


@workflow(name="ver.batch")''').replace('''    mix_v1(path, tag)
    rt.recv("go", timeoutSeconds=120)''', '''    if rt.patched("mix-v2"):
        mix_v2(path, tag)
    else:
        mix_v1(path, tag)
    rt.recv("go", timeoutSeconds=120)
    assert rt.patched("mix-v2") in (True, False)''').replace('"v1 body"', '"v2 body"')


def _lines_of(side: Path, tag: str) -> list[str]:
    return [line[1] for line in read_lines(side) if line[0] == tag]


def test_now_answers_the_recorded_time_after_a_kill_9(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    env.write_app("clock_app", CLOCK_APP)
    side = tmp_path / "side.txt"
    with env.gateway() as gateway:
        gateway.start()
        (run_id,) = env.start_runs("ver.clock", [{"path": str(side)}])
        # Killed once the note is recorded (a kill between its line and its record would run the
        # step again, as it should: that is not what this test is about).
        wait_until(lambda: any(s["name"] == "ver.note" and s["status"] == "SUCCESS" for s in env.show(run_id)["steps"]),
                   20, message="the first note recorded")
        gateway.kill9()
        gateway.start()
        env.runtime().send(run_id, "go", 1)
        view = wait_until(lambda: (v := env.show(run_id))["status"] == "SUCCESS" and v, 30, message="SUCCESS")
    assert view["result"]["first"] == read_lines(side)[0][0]  # the replay answered the recorded time
    assert view["result"]["ordered"] is True and len(read_lines(side)) == 1
    assert [s["name"] for s in view["steps"]].count("exchange.now") == 2


def _upgrade_under_runs(env: ExchangeEnv, side: Path) -> None:
    env.write_app("sidefx", SIDE_EFFECT_MODULE)
    app = env.write_app("batch_app", V1)
    with env.gateway() as gateway:
        gateway.start()
        old = env.start_runs("ver.batch", [{"path": str(side), "tag": "old1"}, {"path": str(side), "tag": "old2"}])
        wait_until(lambda: all(_lines_of(side, t) == ["fill", "mix-v1"] for t in ("old1", "old2")), 30,
                   message="the old runs to wait for go")
        old_version = env.show(old[0])["code_version"]
        gateway.stop()  # the plant's upgrade: stop, install the new code, start
        app.write_text(V2.lstrip(), encoding="utf-8")
        shutil.rmtree(app.parent / "__pycache__", ignore_errors=True)
        gateway.start()
        (new,) = env.start_runs("ver.batch", [{"path": str(side), "tag": "new"}])
        wait_until(lambda: _lines_of(side, "new") == ["fill", "mix-v2"], 30, message="the new run to mix")
        runtime = env.runtime()
        for run_id in [*old, new]:
            runtime.send(run_id, "go", 1)
        views = {run_id: wait_until(lambda run_id=run_id: (v := env.show(run_id))["status"] in
                                    ("SUCCESS", "ERROR") and v, 30, message="the runs to finish")
                 for run_id in [*old, new]}
    for view in views.values():
        assert view["status"] == "SUCCESS", view["error"]
        assert view["result"] == "v2 body"
    assert _lines_of(side, "old1") == _lines_of(side, "old2") == ["fill", "mix-v1", "drain"]
    assert _lines_of(side, "new") == ["fill", "mix-v2", "drain"]
    new_steps = [s["name"] for s in views[new]["steps"]]
    assert new_steps.count("exchange.patched:mix-v2") == 1  # asked twice, recorded once
    assert all("exchange.patched:mix-v2" not in [s["name"] for s in views[r]["steps"]] for r in old)
    assert views[new]["code_version"] != old_version
    listed = env.cli("runs", "--code-version", old_version, "--json").check().json()
    assert sorted(r["id"] for r in listed) == sorted(old)


def test_an_upgrade_with_runs_in_flight_on_sqlite(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    _upgrade_under_runs(ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote), tmp_path / "side.txt")


def test_an_upgrade_with_runs_in_flight_on_postgresql(tmp_path: Path, pg_url: str, exchange_zygote: ForkServer) -> None:
    _upgrade_under_runs(ExchangeEnv.create(tmp_path / "plant", store_url=pg_url, zygote=exchange_zygote),
                        tmp_path / "side.txt")
