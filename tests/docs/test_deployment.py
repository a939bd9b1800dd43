"""docs/deployment.md: the monitoring script it shows prints what it says, from a real store."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from exchange.workflows.testing import running_engine
from tests.docs.markdown import page, shown_files

APP = '''
from exchange.workflows.bootstrap import workflow

@workflow(name="docs.fails")
def fails():
    raise ValueError("the recipe is empty")

@workflow(name="docs.works")
def works():
    return 1
'''


def test_the_monitoring_script_counts_runs(tmp_path: Path) -> None:
    script = shown_files(page("deployment.md"))["monitor.py"]
    (tmp_path / "monitor.py").write_text(script, encoding="utf-8")
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "docs_app.py").write_text(APP, encoding="utf-8")
    store = f"sqlite:///{tmp_path}/exchange.db"
    (tmp_path / "exchange.toml").write_text(f'[store]\nurl = "{store}"\n[apps]\npaths = ["apps"]\n')
    with running_engine({"store": {"url": store}, "apps": {"paths": [str(tmp_path / "apps")]}}) as rt:
        for name in ("docs.fails", "docs.fails", "docs.works"):
            assert rt.waitFor(rt.start(name), 30)["status"] in ("ERROR", "SUCCESS")

    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    env["EXCHANGE_CONFIG"] = str(tmp_path / "exchange.toml")
    done = subprocess.run([sys.executable, "monitor.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    samples = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines() if not line.startswith("#"))
    assert samples == {
        'exchange_runs{status="enqueued"}': "0",
        'exchange_runs{status="running"}': "0",
        "exchange_runs_failed_last_day": "2",
    }
    assert all(re.fullmatch(r"# TYPE \w+ gauge", line) for line in done.stdout.splitlines() if line.startswith("#"))
