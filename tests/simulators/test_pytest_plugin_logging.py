"""A plant engineer's failing test is read without the protocol libraries' DEBUG lines (issue 40,
item 9): Exchange's pytest plugin keeps pymodbus, asyncua, pycomm3 and cpppo at WARNING unless the
project asks otherwise (``exchange_protocol_log_level``, ``$EXCHANGE_PROTOCOL_LOG_LEVEL``).

Each test runs a user's session with pytester in a child process, with pytest's ``log_level = DEBUG``
(how a project sees its own debug lines) and a test that fails after pymodbus logged a frame through
its own logger, as its client does for every frame received.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USERS_TEST = '''
import logging

from pymodbus.logging import Log

log = logging.getLogger("apps.fill_silo")


def test_the_silo_fills():
    log.debug("opening the inlet of silo 3")
    Log.debug(">>>>> recv: {}", b"\\x07\\x03\\x02\\x00\\x2a", ":hex")  # what pymodbus logs for a reply
    logging.getLogger("asyncua.client.ua_client").debug("publish request sent")
    assert 40 == 42, "the level did not reach 42"
'''
PYMODBUS_LINE = ">>>>> recv: 0x7 0x3 0x2 0x0 0x2a"


def users_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ini: str = "",
                  env_level: str | None = None) -> pytest.RunResult:
    pytester.makeini(f"[pytest]\nlog_level = DEBUG\n{ini}")
    pytester.makepyfile(test_silo=USERS_TEST)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    if env_level is None:
        monkeypatch.delenv("EXCHANGE_PROTOCOL_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("EXCHANGE_PROTOCOL_LOG_LEVEL", env_level)
    plugin: list[str] = []
    if not any(ep.name == "exchange_plant" for ep in entry_points(group="pytest11")):
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # not installed: load it by name
        plugin = ["-p", "simulators.pytest_plugin"]
    return pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider", "-p", "no:randomly", timeout=120)


def test_a_failing_test_shows_its_own_debug_lines_and_no_protocol_chatter(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = users_session(pytester, monkeypatch)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "Captured log call" in out and "opening the inlet of silo 3" in out  # the test's own DEBUG
    assert "the level did not reach 42" in out
    assert PYMODBUS_LINE not in out and "pymodbus.logging:" not in out
    assert "asyncua.client.ua_client:" not in out  # (the text itself is in the traceback's source)


def test_the_protocol_lines_come_back_when_asked(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = users_session(pytester, monkeypatch, ini="exchange_protocol_log_level = INFO", env_level="debug")
    result.assert_outcomes(failed=1)
    assert PYMODBUS_LINE in result.stdout.str()  # the environment wins over the ini option
    assert "asyncua.client.ua_client:" in result.stdout.str()


def test_a_bad_level_is_refused_naming_the_option(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    result = users_session(pytester, monkeypatch, ini="exchange_protocol_log_level = chatty")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "exchange_protocol_log_level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, NOTSET, " \
           "got 'chatty'" in result.stderr.str()
