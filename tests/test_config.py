"""Loading and validating the one config."""

from __future__ import annotations

from pathlib import Path

import pytest

from exchange.config import config_from_dict, load_config
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
        ({"engine": {"workers": 0}}, "workers must be at least 1"),
        ({"engine": {"wrokers": 3}}, "unknown key"),
        ({"storage": {}}, "unknown section"),
    ],
)
def test_bad_config_is_named(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(raw, env={})


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
