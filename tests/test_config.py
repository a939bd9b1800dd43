"""Loading and validating the one config."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exchange._config import ENGINE_RANGES, EngineConfig, config_from_dict, load_config
from exchange.errors import ConfigError


def test_defaults_resolve_paths_against_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(env={})
    assert config.store_url == f"sqlite:///{tmp_path / 'var' / 'exchange.db'}"
    assert config.app_paths == (str(tmp_path / "apps"),)


def test_file_env_overrides_and_variables(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "exchange.toml"
    path.parent.mkdir()
    path.write_text(
        '[store]\nurl = "sqlite:///data/x.db"\n'
        '[devices.tankplc]\ndriver = "modbus"\nhost = "127.0.0.1"\nport = 5020\n'
        '[tags."[plant]Line1/Tank/Level"]\ndevice = "tankplc"\naddress = "HRF1"\naccess = "ro"\nmin = 0\nmax = 100\n'
        '[databases.mes]\nurl = "postgresql+psycopg://mes:${MES_PASSWORD}@db/mes"\n'
    )
    config = load_config(path, env={"MES_PASSWORD": "s3cret", "EXCHANGE_APPS": "/a:/b"})
    assert config.store_url == f"sqlite:///{path.parent / 'data' / 'x.db'}"
    assert config.app_paths == ("/a", "/b")
    assert config.databases["mes"].url == "postgresql+psycopg://mes:s3cret@db/mes"
    tag = config.tags["[plant]Line1/Tank/Level"]
    assert (tag.device, tag.address, tag.access, tag.min_value, tag.max_value) == ("tankplc", "HRF1", "ro", 0.0, 100.0)
    assert config.devices["tankplc"].settings["port"] == 5020
    overridden = load_config(path, env={"MES_PASSWORD": "x", "EXCHANGE_STORE_URL": "sqlite:////tmp/o.db"})
    assert overridden.store_url == "sqlite:////tmp/o.db"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"store": {"url": "${NOPE_NOT_SET}"}}, r"store\.url: environment variable \$\{NOPE_NOT_SET\} is not set"),
        ({"devices": {"d": {"driver": "profibus"}}}, "devices.d.driver must be one of opcua, modbus, enip"),
        ({"tags": {"[p]A": {"device": "ghost", "address": "HR1"}}}, r"tags\.\"\[p\]A\"\.device 'ghost'"),
        ({"devices": {"d": {"driver": "modbus"}}, "tags": {"[p]A": {"device": "d", "address": "HR1", "access": "x"}}},
         "access must be"),
        ({"engine": {"workers": 0}}, "engine.workers must be an integer from 1 to 100000, got an integer 0"),
        ({"engine": {"wrokers": 3}}, "unknown key"),
        ({"storage": {}}, "unknown section"),
    ],
)
def test_bad_config_is_named(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw, env={})


@pytest.mark.parametrize("cron", [
    "0 0 29 2 *",  # leap days: every fourth year
    "0 0 29 2 1#5",  # a leap day that is the fifth Monday: every 28 years or so
    "0 6 31 2 1",  # day and weekday both set: either fires (Mondays in February)
    "0 0 L 2 *",  # the last day of February
    "0 0 15W * *",  # the weekday nearest the 15th
    "0 0 31 */2 *",
    "*/5 * * * * *",
])
def test_a_cron_that_fires_however_rarely_is_accepted(cron: str) -> None:
    config = config_from_dict({"schedules": {"s": {"workflow": "w", "cron": cron, "timezone": "Europe/Berlin"}}},
                              env={})
    assert config.schedules["s"].cron == cron


def test_retention_of_an_hour_is_the_shortest_accepted() -> None:
    config = config_from_dict({"retention": {"finished_runs_days": 1 / 24}}, env={})
    assert config.retention.finished_runs_days == 1 / 24
    with pytest.raises(ConfigError, match=r"retention\.finished_runs_days must be at least one hour"):
        config_from_dict({"retention": {"finished_runs_days": 0.99 / 24}}, env={})


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_text("[store\nurl=")
    with pytest.raises(ConfigError, match="exchange.toml is not valid TOML"):
        load_config(path, env={})


def test_certificate_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "exchange.toml"
    path.parent.mkdir()
    path.write_text('[devices.line]\ndriver = "opcua"\nurl = "opc.tcp://h:4840"\ncertificate = "pki/client.der"\n'
                    'private_key = "/abs/key.pem"\n')
    settings = load_config(path, env={}).devices["line"].settings
    assert settings["certificate"] == str(tmp_path / "etc" / "pki" / "client.der")
    assert settings["private_key"] == "/abs/key.pem"


def test_every_engine_number_has_a_range_that_holds_its_default() -> None:
    defaults = EngineConfig()
    numbers = {name for name in EngineConfig.__dataclass_fields__ if not isinstance(getattr(defaults, name), str)}
    assert set(ENGINE_RANGES) == numbers
    for name, (low, high) in ENGINE_RANGES.items():
        assert low <= getattr(defaults, name) <= high, name


def test_store_shared_and_the_new_tag_keys(tmp_path: Path) -> None:
    assert config_from_dict({}, env={}).store_shared is False
    path = tmp_path / "exchange.toml"
    path.write_text('[store]\nshared = true\n[devices.plc]\ndriver = "modbus"\nhost = "h"\n'
                    '[tags."[p]Run"]\ndevice = "plc"\naddress = "C1"\nbool_numbers = true\non_doubt = "fail"\n')
    config = load_config(path, env={})
    assert config.store_shared is True
    assert (config.tags["[p]Run"].bool_numbers, config.tags["[p]Run"].on_doubt) == (True, "fail")


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "exchange.toml"
    path.write_bytes(b'\xef\xbb\xbf[store]\nurl = "sqlite:///x.db"\n')
    assert load_config(path, env={}).store_url == f"sqlite:///{tmp_path / 'x.db'}"


ROOT = Path(__file__).resolve().parents[1]


def _documented_configs() -> list[tuple[str, str]]:
    """The complete configs the repository shows: the ```toml blocks of its docs that start with a
    table, and the demo's config (scripts/demo.py: its head plus the simulated plant's tables)."""
    from simulators.config_text import render_config
    from simulators.protocol_map import PROTOCOLS, assign_areas

    found: list[tuple[str, str]] = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```toml\n(.*?)```", doc.read_text(), flags=re.S)):
            lines = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
            if lines and lines[0].startswith("["):
                found.append((f"{doc.name}#{i}", block))
    plant = render_config("127.0.0.1", {p: 10_000 + i for i, p in enumerate(PROTOCOLS)}, assign_areas(PROTOCOLS))
    head = ('[store]\nurl = "sqlite:///exchange.db"\n\n[apps]\npaths = ["apps"]\n\n'
            '[engine]\nprogress_interval_ms = 200\n\n')
    found.append(("demo", head + plant))
    return found


def test_the_configs_the_repository_shows_still_load(tmp_path: Path) -> None:
    configs = _documented_configs()
    assert {name for name, _ in configs} >= {"README.md#0", "databases.md#0", "demo"}
    for name, body in configs:
        path = tmp_path / f"{name.replace('#', '_')}.toml"
        path.write_text(body)
        env = {var: "x" for var in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", body)}
        config = load_config(path, env=env)
        assert config.source == str(path), name
    demo = load_config(tmp_path / "demo.toml", env={})
    assert demo.devices and demo.tags and demo.engine.progress_interval_ms == 200


def test_a_command_tag_may_send_every_run_command_abort_included() -> None:
    from exchange import _config_plant
    from exchange._engine import COMMANDS

    assert set(_config_plant.COMMANDS) == set(COMMANDS)  # the config cannot import the engine: kept equal here
    raw = {"command_tags": {"abort": {"tag": "[p]AbortPB", "cmd": " abort ", "partition_key": "line1"}}}
    (found,) = _config_plant.command_tags(raw, "exchange.toml", {"[p]AbortPB": object()}).values()
    assert (found.cmd, found.tag) == ("ABORT", "[p]AbortPB")
