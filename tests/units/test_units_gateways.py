"""One holder per unit across gateways: three gateways on one PostgreSQL (two on one SQLite file,
as a gateway and its standby or a second one on the same server) run twelve runs that each
take reactor R1 (and some R1 with TK2, in either order) for a moment. Each holder logs, with fsync,
when its hold began and ended, from inside the ``with``: no two intervals on a unit overlap, and every
run ends SUCCESS (two runs taking two units in opposite orders never deadlock)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.conftest import PostgresServer
from tests.forkserver import ForkServer
from tests.harness import SIDE_EFFECT_MODULE, ExchangeEnv, read_lines, wait_until

APP = """
import time

from exchange.workflows.bootstrap import workflow
from exchange.workflows.engine.instance import getWorkflows
from exchange.workflows.steps import units
from testapps.sidefx import append_line


@workflow(name="units_gw.take")
def take(path, names):
    rt = getWorkflows()
    with units.acquire(*names):
        began = time.time()
        time.sleep(0.03)
        append_line(path, "%s %r %r" % (",".join(names), began, time.time()))
    return names
"""
UNITS = '\n[units.R1]\nclass = "reactor"\n\n[units.TK2]\nclass = "tank"\n'


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_gateways_never_give_a_unit_two_holders(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest, exchange_zygote: ForkServer) -> None:
    if backend == "postgresql":
        postgres: PostgresServer = request.getfixturevalue("postgres")
        store_url, nodes = postgres.url(postgres.create_database("units_gateways")), ("g0", "g1", "g2")
    else:
        store_url, nodes = f"sqlite:///{tmp_path / 'exchange.db'}", ("g0", "g1")
    envs = []
    for node in nodes:
        env = ExchangeEnv.create(tmp_path / node, store_url=store_url, zygote=exchange_zygote,
                                 engine={"node_id": node})
        env.write_app("sidefx", SIDE_EFFECT_MODULE)
        env.write_app("units_gw", APP)
        with env.config_path.open("a", encoding="utf-8") as config:
            config.write(UNITS)
        envs.append(env)
    log = tmp_path / "holds.txt"
    shapes = itertools.cycle([["R1"], ["R1", "TK2"], ["TK2", "R1"], ["TK2"]])
    gateways = [env.gateway(name=env.root.name) for env in envs]
    runtime = envs[0].runtime()
    try:
        for gateway in gateways:
            gateway.start()
        run_ids = envs[0].start_runs("units_gw.take", [{"path": str(log), "names": next(shapes)} for _ in range(12)])
        views = [wait_until(lambda run_id=run_id: (v := runtime.get_run(run_id))["status"] in ("SUCCESS", "ERROR")
                            and v, 60, message="every run to finish") for run_id in run_ids]
    finally:
        runtime.close()
        for gateway in gateways:
            gateway.__exit__()
    assert [v["status"] for v in views] == ["SUCCESS"] * 12, [v["error"] for v in views if v["error"]]
    intervals: dict[str, list[tuple[float, float]]] = {"R1": [], "TK2": []}
    for names, began, ended in read_lines(log):
        for unit in names.split(","):
            intervals[unit].append((float(began), float(ended)))
    for unit, spans in intervals.items():
        spans.sort()
        overlaps = [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
        assert not overlaps, f"{unit} had two holders at once: {overlaps}"
    assert len(intervals["R1"]) == 9 and len(intervals["TK2"]) == 9
