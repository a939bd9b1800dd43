"""The session guard of tests/thread_leaks.py: a leaked thread fails the run, it does not hang it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_pytest(folder: Path, test_source: str) -> subprocess.CompletedProcess[str]:
    (folder / "conftest.py").write_text('pytest_plugins = ["tests.thread_leaks"]\n', encoding="utf-8")
    (folder / "test_it.py").write_text(textwrap.dedent(test_source), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder / "test_it.py")],
                          cwd=folder, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                               "EXCHANGE_TEST_THREAD_GRACE_SECONDS": "2"},
                          capture_output=True, text=True, timeout=60)


def test_a_thread_left_running_fails_the_session_and_is_named(tmp_path: Path) -> None:
    finished = run_pytest(tmp_path, """
        import threading

        def test_leaks():
            threading.Thread(target=threading.Event().wait, name="forgotten-loop").start()
        """)
    assert finished.returncode == 1, finished.stdout + finished.stderr
    assert "1 passed" in finished.stdout
    assert "threads left running" in finished.stdout
    assert "forgotten-loop" in finished.stdout


def test_threads_that_end_in_the_grace_period_are_not_leaks(tmp_path: Path) -> None:
    finished = run_pytest(tmp_path, """
        import threading, time

        def test_ends_soon():
            threading.Thread(target=time.sleep, args=(0.5,), name="ending").start()
        """)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "threads left running" not in finished.stdout
