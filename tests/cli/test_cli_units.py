"""``exchange units``: every configured unit with its class, its holder and since when, and the runs
waiting for it in order (a held one last, marked), as text and as JSON; none configured says so."""

from __future__ import annotations

from pathlib import Path

from exchange._store.records import Fence
from exchange._store.runs.runs import Holder, NewRun
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv

UNITS = '\n[units.R1]\nclass = "reactor"\n\n[units.TK2]\nclass = "tank"\n'


def test_units_shows_holders_and_waiting_runs(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write(UNITS)
    runtime = env.runtime()
    try:
        store = runtime.store
        fences = []
        for name in ("a", "b", "c"):
            run_id, _ = store.create_run(NewRun(workflow="wf", params_json="{}", code_version="v1", created_by="t"),
                                         holder=Holder(owner=name, node=name, lease_seconds=30.0))
            fences.append(Fence(run_id, name, 1))
        store.units.request(fences[0], 1, ["R1"])
        store.units.request(fences[1], 1, ["R1", "TK2"])
        held = store.units.request(fences[2], 1, ["R1"])
        assert store.units.hold(fences[2], held.id, state="HELD")
    finally:
        runtime.close()
    listed = env.cli("units", "--json")
    assert listed.returncode == 0, listed.stderr
    (r1, tk2) = listed.json()
    assert (r1["unit"], r1["class"], r1["holder"], r1["waiting"], r1["held"]) == (
        "R1", "reactor", fences[0].run_id, [fences[1].run_id, fences[2].run_id], [fences[2].run_id])
    assert r1["since"] is not None
    assert tk2 == {"unit": "TK2", "class": "tank", "holder": None, "since": None, "waiting": [fences[1].run_id],
                   "held": []}
    lines = env.cli("units").stdout.splitlines()
    assert lines[0].split() == ["UNIT", "CLASS", "HOLDER", "SINCE", "WAITING"]
    assert lines[1].split()[:3] == ["R1", "reactor", fences[0].run_id]
    assert lines[1].endswith(f"{fences[1].run_id}, {fences[2].run_id} (held)")
    assert lines[2].split() == ["TK2", "tank", "-", "-", fences[1].run_id]


def test_no_units_says_so(tmp_path: Path, exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)
    assert env.cli("units", "--json").json() == []
    listed = env.cli("units")
    assert listed.returncode == 0 and "no units configured" in listed.stdout + listed.stderr
