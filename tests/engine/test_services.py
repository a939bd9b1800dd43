"""The step library's services: typed, built once per runtime, closed with it; and ``running_engine``
makes the start-up checks a gateway makes, so a test meets a config mistake where a gateway would."""

from __future__ import annotations

from pathlib import Path

import pytest

from exchange._config import config_from_dict
from exchange._engine.operator.runtime import Runtime
from exchange.errors import ConfigError, DatabaseError
from exchange.workflows import _services as services
from exchange.workflows.testing import running_engine

APP = '''
from exchange.workflows.bootstrap import workflow

@workflow(name="services.noop")
def noop():
    return "ok"
'''


def _config(tmp_path: Path, **extra: object) -> dict[str, object]:
    apps = tmp_path / "apps"
    apps.mkdir(exist_ok=True)
    (apps / "noop_app.py").write_text(APP)
    return {"store": {"url": f"sqlite:///{tmp_path}/exchange.db"}, "apps": {"paths": [str(apps)]}, **extra}


def test_running_engine_refuses_a_bad_device_setting_at_start_and_starts_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path, devices={"plc": {"driver": "modbus", "host": "127.0.0.1", "port": 5020,
                                                "timeout_ms": 0}})
    with pytest.raises(ConfigError) as caught, running_engine(config, base_dir=tmp_path):
        pytest.fail("the block must not be entered with a bad device setting")
    assert "plc" in str(caught.value) and "timeout_ms" in str(caught.value)


def test_running_engine_refuses_a_bad_database_url_at_start(tmp_path: Path) -> None:
    config = _config(tmp_path, databases={"mes": {"url": "nosuchdialect://x/y"}})
    with pytest.raises(DatabaseError) as caught, running_engine(config, base_dir=tmp_path):
        pytest.fail("the block must not be entered with a bad database URL")
    assert "database 'mes': cannot use URL nosuchdialect://x/y" in str(caught.value)


def test_running_engine_with_a_good_config_runs(tmp_path: Path) -> None:
    with running_engine(_config(tmp_path), base_dir=tmp_path) as rt:
        assert rt.waitFor(rt.start("services.noop"), 30)["result"] == "ok"


def test_a_service_is_built_once_per_runtime_and_closed_with_it(tmp_path: Path) -> None:
    config = config_from_dict(_config(tmp_path, http={"default_timeout_ms": 1000}), source="<test>", base_dir=tmp_path)
    first = Runtime(config)
    try:
        client = first.services.get(services.HTTP)
        assert first.services.get(services.HTTP) is client
        connections = first.services.get(services.DATABASES)
        assert connections.names() == []
    finally:
        first.close()
    second = Runtime(config)
    try:
        assert second.services.get(services.HTTP) is not client  # closed with its runtime, not reused
    finally:
        second.close()
