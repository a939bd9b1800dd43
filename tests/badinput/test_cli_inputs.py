"""The ``exchange`` command with bad input, as a user runs it (real processes, a real SQLite store):
never a traceback, a message naming the thing, nothing stored; and whatever it prints from the store
in text form cannot drive the terminal (escape sequences are shown, not sent).

The processes are forked from the session's ``exchange_zygote`` (see ``tests/forkserver.py``: their
arguments reach them as bytes, their streams and exit are a fresh interpreter's), except one test that
starts ``python -m exchange._cli.main`` as a shell would."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.forkserver import ForkServer

APP = '''
from exchange.workflows.bootstrap import workflow, getWorkflows

@workflow(name="badinput.cli.echo")
def echo(text="", n=1):
    getWorkflows().progress(text)
    return {"text": text, "n": n}

@workflow(name="badinput.cli.fails")
def fails(text=""):
    raise ValueError(text)
'''

# an ANSI colour, a C1 CSI (clear screen), a right-to-left override and a BEL
NASTY = "\x1b[31mred\x9b2J\u202eevil\x07"
NASTY_SHOWN = ("\\x1b[31mred", "\\x9b2J", "\\u202eevil", "\\x07")
RAW = ("\x1b", "\x9b", "\u202e", "\x07")


@dataclass
class Project:
    root: Path
    zygote: ForkServer
    finished: str  # SUCCESS, with NASTY in its params, progress and result
    failed: str  # ERROR, with NASTY in its error message
    waiting: str  # ENQUEUED (no gateway), with NASTY as the reason of a HOLD

    @property
    def db(self) -> Path:
        return self.root / "var" / "exchange.db"

    def exchange(self, *args: str) -> subprocess.CompletedProcess[str]:
        return exchange(self.root, *args, zygote=self.zygote)


def exchange(root: Path, *args: str, zygote: ForkServer | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``exchange ARGS`` in ``root``; arguments with lone surrogates reach it as the raw bytes
    they stand for (os.fsencode), as a shell would pass undecodable bytes. The process is forked from
    ``zygote`` if given, else started with ``python -m exchange._cli.main``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXCHANGE_")}
    if zygote is not None:
        return zygote.run(args, cwd=root, env=env, encoding="utf-8", errors="strict", timeout=60)
    return subprocess.run(
        [sys.executable, "-m", "exchange._cli.main", *args],
        cwd=root, env=env, capture_output=True, encoding="utf-8", errors="strict", timeout=60,
    )


def snapshot(db: Path) -> dict[str, list[str]]:
    with closing(sqlite3.connect(db)) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{t}"'))) for t in tables if "node" not in t}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[Project]:
    root = tmp_path_factory.mktemp("cli")
    (root / "apps").mkdir()
    (root / "apps" / "badinput_cli_app.py").write_text(APP)
    (root / "exchange.toml").write_text('[store]\nurl = "sqlite:///var/exchange.db"\n')
    done = exchange(root, "run", "badinput.cli.echo", "-p", f"text={NASTY}", "--json", zygote=exchange_zygote)
    assert done.returncode == 0, done.stderr
    finished = json.loads(done.stdout)["id"]
    failed_run = exchange(root, "run", "badinput.cli.fails", "-p", f"text={NASTY}", "--json", zygote=exchange_zygote)
    assert failed_run.returncode == 1
    failed = json.loads(failed_run.stdout)["id"]
    started = exchange(root, "start", "badinput.cli.echo", zygote=exchange_zygote)
    assert started.returncode == 0, started.stderr
    waiting = started.stdout.strip()
    sent = exchange(root, "send", waiting, "HOLD", "--reason", NASTY, zygote=exchange_zygote)
    assert sent.returncode == 0, sent.stderr
    yield Project(root, exchange_zygote, finished, failed, waiting)


CASES: list[Any] = [
    pytest.param(("start", "badinput.cli.echo", "-p", "n=1e999"), 1, ["parameter 'n'", "inf"], id="param-1e999"),
    pytest.param(("start", "badinput.cli.echo", "-p", "n=NaN"), 1, ["parameter 'n'", "nan"], id="param-nan"),
    pytest.param(("start", "badinput.cli.echo", "-p", "text=\udcff\udcfe"), 1, ["parameter 'text'", "undecodable"],
                 id="param-value-bad-utf8"),
    pytest.param(("start", "badinput.cli.echo", "-p", "\udcff=1"), 1, ["\\udcff"], id="param-key-bad-utf8"),
    pytest.param(("start", "badinput.cli.echo", "-p", "n=" + "[" * 100_000), 2, ["-p", "'n'", "nests too deeply"],
                 id="param-nested-100000"),
    pytest.param(("start", "\udcff"), 1, ["name", "undecodable"], id="workflow-name-bad-utf8"),
    pytest.param(("start", "badinput.cli.echo", "--timeout-seconds", "nan"), 1, ["timeoutSeconds", "nan"],
                 id="start-timeout-nan"),
    pytest.param(("start", "badinput.cli.echo", "--timeout-seconds", "-1"), 1, ["timeoutSeconds"],
                 id="start-timeout-negative"),
    pytest.param(("start", "badinput.cli.echo", "--priority", "99999999999999999999999"), 1, ["priority"],
                 id="start-priority-overflow"),
    pytest.param(("run", "badinput.cli.echo", "-p", "n=1e999"), 1, ["parameter 'n'"], id="run-param-1e999"),
    pytest.param(("run", "badinput.cli.echo", "--timeout-seconds", "inf"), 1, ["timeoutSeconds"],
                 id="run-timeout-inf"),
    pytest.param(("gateway", "--workers", "-1"), 2, ["--workers"], id="gateway-workers-negative"),
    pytest.param(("runs", "--limit", "-1"), 2, ["--limit"], id="runs-limit-negative"),
    pytest.param(("runs", "--limit", "99999999999"), 1, ["limit", "99999999999"], id="runs-limit-huge"),
    pytest.param(("runs", "--workflow", "\udcff"), 1, ["workflow", "undecodable"], id="runs-workflow-bad-utf8"),
    pytest.param(("show", "ab\udcffcd"), 1, ["run_id", "\\udcff"], id="show-id-bad-utf8"),
    pytest.param(("show", "abc"), 1, ["unknown run 'abc'", "36 characters", "at least 4"], id="show-short-id"),
    pytest.param(("show", "zzzz-not-hex"), 1, ["unknown run 'zzzz-not-hex'", "no run id starts with it"],
                 id="show-unknown-prefix"),
    pytest.param(("show", "00000000-0000-0000-0000-000000000000"), 1,
                 ["unknown run '00000000-0000-0000-0000-000000000000'"], id="show-unknown-id"),
    pytest.param(("send", "\udcff", "HOLD"), 1, ["run_id"], id="send-id-bad-utf8"),
    pytest.param(("send", "{waiting}", "HOLD", "--reason", "r" * 5000), 1, ["reason", "5000", "1000"],
                 id="send-reason-too-long"),
    pytest.param(("send", "{waiting}", "HOLD", "--reason", "\udcff"), 1, ["reason", "undecodable"],
                 id="send-reason-bad-utf8"),
    pytest.param(("send", "{finished}", "HOLD"), 1, ["run {finished} is SUCCESS: already finished, nothing sent"],
                 id="send-to-finished"),
    pytest.param(("cancel", "{finished}"), 1, ["run {finished} already finished (SUCCESS); nothing cancelled"],
                 id="cancel-finished"),
    pytest.param(("cancel", "{failed}", "--json"), 1, ["run {failed} already finished (ERROR); nothing cancelled"],
                 id="cancel-failed-json"),
    pytest.param(("cancel", "{waiting}", "--reason", "r" * 1001), 1, ["reason", "1001"], id="cancel-reason-too-long"),
    pytest.param(("maintenance", "cancel", "--queue", "defualt"), 1,
                 ["maintenance cancel: no run is or was in queue 'defualt' (did you mean 'default'? queues: default); "
                  "nothing was changed"], id="maintenance-cancel-unknown-queue"),
    pytest.param(("maintenance", "cancel", "--queue", "line2", "--json"), 1, ["queue 'line2'"],
                 id="maintenance-cancel-unknown-queue-json"),
]


@pytest.mark.parametrize(("args", "code", "fragments"), CASES)
def test_bad_input_exits_non_zero_naming_it_with_no_traceback_and_nothing_stored(
    project: Project, args: tuple[str, ...], code: int, fragments: list[str]
) -> None:
    ids = {"finished": project.finished, "failed": project.failed, "waiting": project.waiting,
           "finished8": project.finished[:8]}
    args = tuple(a.format(**ids) if "{" in a and "[" not in a else a for a in args)
    before = snapshot(project.db)
    done = project.exchange(*args)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stdout == ""
    if code == 1:
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line
    for fragment in fragments:
        assert fragment.format(**ids) in done.stderr, done.stderr
    assert snapshot(project.db) == before


def _assert_neutralised(text: str) -> None:
    for raw in RAW:
        assert raw not in text, repr(text)


def test_show_neutralises_params_progress_and_result(project: Project) -> None:
    done = project.exchange("show", project.finished)
    assert done.returncode == 0, done.stderr
    _assert_neutralised(done.stdout)
    progress = next(line for line in done.stdout.splitlines() if line.startswith("progress"))
    assert progress == "progress  " + "".join(NASTY_SHOWN)
    params = next(line for line in done.stdout.splitlines() if line.startswith("params"))
    assert "\\x9b2J" in params and "\\u202eevil" in params  # what JSON text leaves raw is escaped too


def test_show_json_stays_exact(project: Project) -> None:
    done = project.exchange("show", project.finished, "--json")
    view = json.loads(done.stdout)
    assert view["progress"]["message"] == NASTY and view["params"] == {"text": NASTY}
    assert view["result"] == {"text": NASTY, "n": 1}


def test_show_neutralises_an_error_and_a_reason(project: Project) -> None:
    failed = project.exchange("show", project.failed)
    _assert_neutralised(failed.stdout)
    error = next(line for line in failed.stdout.splitlines() if line.startswith("error"))
    assert error == "error     ValueError: " + "".join(NASTY_SHOWN)
    waiting = project.exchange("show", project.waiting)
    _assert_neutralised(waiting.stdout)
    assert "(" + "".join(NASTY_SHOWN) + ")" in waiting.stdout  # the HOLD's reason, in the events


def test_runs_neutralises_progress(project: Project) -> None:
    done = project.exchange("runs")
    assert done.returncode == 0, done.stderr
    _assert_neutralised(done.stdout)
    assert "\\x1b[31mred" in done.stdout


def test_run_that_fails_prints_its_error_neutralised(project: Project) -> None:
    done = project.exchange("run", "badinput.cli.fails", "-p", f"text={NASTY}")
    assert done.returncode == 1
    _assert_neutralised(done.stderr)
    assert done.stderr.strip().splitlines()[-1].endswith("ValueError: " + "".join(NASTY_SHOWN))


def test_a_64_bit_overflowing_integer_parameter_is_kept_exactly(project: Project) -> None:
    # `python -m exchange._cli.main` processes, as a shell starts them (the others are forked)
    done = exchange(project.root, "start", "badinput.cli.echo", "-p", "n=99999999999999999999999999", "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["id"]
    shown = json.loads(exchange(project.root, "show", run_id, "--json").stdout)
    assert shown["params"] == {"n": 99_999_999_999_999_999_999_999_999}
    cancelled = exchange(project.root, "cancel", run_id)
    assert cancelled.returncode == 0 and "status CANCELLED" in cancelled.stdout


def test_attention_cuts_a_long_detail_at_a_word(project: Project) -> None:
    text = ("the dosing pump P-7 did not reach its setpoint within the allowed window while the inlet valve "
            "V-12 stayed closed")
    failed = project.exchange("run", "badinput.cli.fails", "-p", f"text={text}", "--json")
    assert failed.returncode == 1
    run_id = json.loads(failed.stdout)["id"]
    listed = project.exchange("runs", "--attention")
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if run_id[:8] in line)
    detail = f"ValueError: {text}"
    shown = line[line.index("ValueError: "):]
    assert shown.endswith("…") and len(shown) <= 100, shown
    kept = shown[:-1]
    assert detail.startswith(kept) and detail[len(kept)] == " ", shown  # cut between two words
    assert len(kept) > 80  # and not far before the limit
