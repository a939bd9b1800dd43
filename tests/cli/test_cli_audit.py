"""``exchange audit verify`` as QA runs it: a run executed by ``exchange run`` checks ``ok`` (exit 0);
once a step's output is changed in the SQLite file with raw SQL, the run is ``TAMPERED``, naming the
step (exit 1, the same in ``--json``), and the other run stays ``ok``. (Every kind of edit, on both
stores: tests/store/test_audit_chain.py.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv

APP = '''
from exchange.workflows.bootstrap import step, workflow


@step(name="audit.weigh")
def weigh(kg):
    return {"kg": kg}


@workflow(name="audit.batch")
def batch(kg: int = 5):
    weigh(kg)
    return "done"
'''


def test_audit_verify_exits_1_naming_the_step_changed_outside_exchange(tmp_path: Path,
                                                                       exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    env.write_app("audit_app", APP)
    runs = [env.cli("run", "audit.batch", "-p", f"kg={kg}", "--json").check().json()["id"] for kg in (5, 6)]

    intact = env.cli("audit", "verify").check()
    assert sorted(line.split()[1] for line in intact.stdout.splitlines()) == sorted(runs)
    assert all(line.startswith("ok ") for line in intact.stdout.splitlines())

    path = env.sqlite_path
    assert path is not None
    with sqlite3.connect(path) as conn:  # an edit made outside Exchange
        conn.execute("UPDATE exchange_steps SET output = ? WHERE run_id = ?", ('{"kg": 50}', runs[0]))
    tampered = env.cli("audit", "verify")
    assert tampered.returncode == 1, tampered
    assert f"TAMPERED {runs[0]}: step 1 ('audit.weigh', SUCCESS) was changed" in tampered.stdout
    as_json = env.cli("audit", "verify", runs[0][:8], runs[1], "--json")
    assert as_json.returncode == 1
    states = {check["run"]: (check["state"], check["problem"] is None) for check in json.loads(as_json.stdout)}
    assert states == {runs[0]: ("tampered", False), runs[1]: ("ok", True)}
