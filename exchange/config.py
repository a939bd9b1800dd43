"""One typed configuration, loaded and validated once.

Sources, later ones winning: built-in defaults, the TOML file (``--config FILE``, else ``EXCHANGE_CONFIG``,
else ``./exchange.toml`` when present), then the environment: ``EXCHANGE_STORE_URL`` and
``EXCHANGE_APPS`` (paths separated by ``os.pathsep``). ``${NAME}`` inside any string value is replaced
by the environment variable NAME; a missing variable is a :class:`ConfigError` naming it and the key.

Relative paths (SQLite files, app folders) are resolved against the directory the config file lives
in, or the working directory when there is no file.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exchange.errors import ConfigError

DEFAULT_STORE_URL = "sqlite:///var/exchange.db"
DRIVERS = ("opcua", "modbus", "enip")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class EngineConfig:
    """Tuning of the dispatcher and workers; every value has a unit in its name."""

    workers: int = 2000  # runs a gateway executes at once, each on its thread (a waiting one costs ~nothing)
    node_id: str = ""  # empty: the host name
    dispatch_poll_ms: int = 100
    mailbox_poll_ms: int = 10  # SQLite: how often the gateway's one mailbox query runs
    cancel_poll_ms: int = 200
    lease_seconds: float = 5.0  # a dead gateway's runs are taken over within ~lease + 1 s
    stop_timeout_seconds: float = 10.0  # on SIGTERM, how long runs get to reach a point where they can stop
    progress_interval_ms: int = 500
    progress_history_max: int = 200
    step_output_max_bytes: int = 1_000_000
    # size limits on what callers hand in (bad input is refused before anything is stored)
    params_max_bytes: int = 1_000_000  # a run's parameters, as JSON
    result_max_bytes: int = 1_000_000  # a run's result, as JSON
    message_max_bytes: int = 64_000  # one mailbox message's payload, as JSON
    reason_max_chars: int = 1_000  # the reason of a command, cancel or start


@dataclass(frozen=True)
class DeviceConfig:
    """One ``[devices.NAME]`` table; ``settings`` keeps every key for the driver to parse."""

    name: str
    driver: str
    settings: Mapping[str, Any]


@dataclass(frozen=True)
class TagConfig:
    """One ``[tags."[provider]Path"]`` table, as written; the tag layer validates it into a TagDef."""

    path: str
    device: str
    address: str
    access: str = "rw"
    data_type: str | None = None
    min_value: float | None = None
    max_value: float | None = None
    bool_numbers: bool = False  # booleans may be written as 1/0, and 0/1 to a Boolean
    on_doubt: str | None = None  # "readback" | "fail"; unset: by the value (exchange/tags/table.py)


@dataclass(frozen=True)
class DatabaseConfig:
    name: str
    url: str
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpConfig:
    verify_tls: bool = True
    pool_connections: int = 10
    default_timeout_ms: int = 10_000


@dataclass(frozen=True)
class Config:
    store_url: str = DEFAULT_STORE_URL
    app_paths: tuple[str, ...] = ("apps",)
    engine: EngineConfig = EngineConfig()
    devices: Mapping[str, DeviceConfig] = field(default_factory=dict)
    tags: Mapping[str, TagConfig] = field(default_factory=dict)
    databases: Mapping[str, DatabaseConfig] = field(default_factory=dict)
    http: HttpConfig = HttpConfig()
    source: str = "<defaults>"
    base_dir: str = "."

    def node_id(self) -> str:
        import socket

        return self.engine.node_id or socket.gethostname()


def _expand(value: Any, key: str, env: Mapping[str, str]) -> Any:
    if isinstance(value, str):

        def repl(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env:
                raise ConfigError(f"config key {key}: environment variable ${{{name}}} is not set")
            return env[name]

        return _VAR.sub(repl, value)
    if isinstance(value, dict):
        return {k: _expand(v, f"{key}.{k}" if key else k, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{key}[{i}]", env) for i, v in enumerate(value)]
    return value


def _resolve_sqlite(url: str, base_dir: Path) -> str:
    """Make a relative ``sqlite:///rel/path`` absolute against ``base_dir``."""
    prefix = "sqlite:///"
    for scheme in ("sqlite:///", "sqlite+pysqlite:///"):
        if url.startswith(scheme):
            prefix = scheme
            break
    else:
        return url
    rest = url[len(prefix):]
    if not rest or rest.startswith("/") or rest.startswith(":memory:"):
        return url
    return prefix + str((base_dir / rest).resolve())


def _table(raw: Mapping[str, Any], name: str, source: str) -> dict[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    return value


def _int(table: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}.{key} must be a non-negative integer, got {value!r}")
    return value


def _engine(raw: Mapping[str, Any], source: str) -> EngineConfig:
    table = _table(raw, "engine", source)
    where = f"{source}: engine"
    known = set(EngineConfig.__dataclass_fields__)
    unknown = set(table) - known
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    defaults = EngineConfig()
    values: dict[str, Any] = {}
    for key in known:
        default = getattr(defaults, key)
        if key not in table:
            continue
        if isinstance(default, str):
            if not isinstance(table[key], str):
                raise ConfigError(f"{where}.{key} must be a string")
            values[key] = table[key]
        elif isinstance(default, float):
            if isinstance(table[key], bool) or not isinstance(table[key], (int, float)) or table[key] <= 0:
                raise ConfigError(f"{where}.{key} must be a positive number, got {table[key]!r}")
            values[key] = float(table[key])
        else:
            values[key] = _int(table, key, default, where)
    engine = EngineConfig(**values)
    if engine.workers < 1:
        raise ConfigError(f"{where}.workers must be at least 1")
    return engine


PATH_SETTINGS = ("certificate", "private_key", "server_certificate")  # files, relative to the config


def _devices(raw: Mapping[str, Any], source: str, base_dir: Path) -> dict[str, DeviceConfig]:
    devices: dict[str, DeviceConfig] = {}
    for name, table in _table(raw, "devices", source).items():
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: [devices.{name}] must be a table")
        driver = table.get("driver")
        if driver not in DRIVERS:
            raise ConfigError(
                f"{source}: devices.{name}.driver must be one of {', '.join(DRIVERS)}, got {driver!r}"
            )
        settings = dict(table)
        for key in PATH_SETTINGS:
            if isinstance(settings.get(key), str) and settings[key] and not Path(settings[key]).is_absolute():
                settings[key] = str((base_dir / settings[key]).resolve())
        devices[name] = DeviceConfig(name=name, driver=str(driver), settings=settings)
    return devices


def _tags(raw: Mapping[str, Any], source: str, devices: Mapping[str, DeviceConfig]) -> dict[str, TagConfig]:
    tags: dict[str, TagConfig] = {}
    for path, table in _table(raw, "tags", source).items():
        where = f'{source}: tags."{path}"'
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table")
        device = table.get("device")
        if not isinstance(device, str) or device not in devices:
            raise ConfigError(f"{where}.device {device!r} is not a configured device")
        address = table.get("address")
        if not isinstance(address, str) or not address.strip():
            raise ConfigError(f"{where}.address must be a non-empty string")
        access = table.get("access", "rw")
        if access not in ("ro", "rw"):
            raise ConfigError(f'{where}.access must be "ro" or "rw", got {access!r}')
        bounds: dict[str, float | None] = {}
        for key in ("min", "max"):
            value = table.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"{where}.{key} must be a number, got {value!r}")
            bounds[key] = None if value is None else float(value)
        data_type = table.get("type")
        if data_type is not None and not isinstance(data_type, str):
            raise ConfigError(f"{where}.type must be a string")
        bool_numbers = table.get("bool_numbers", False)
        if not isinstance(bool_numbers, bool):
            raise ConfigError(f"{where}.bool_numbers must be true or false, got {bool_numbers!r}")
        on_doubt = table.get("on_doubt")
        if on_doubt is not None and on_doubt not in ("readback", "fail"):
            raise ConfigError(f'{where}.on_doubt must be "readback" or "fail", got {on_doubt!r}')
        unknown = set(table) - {"device", "address", "access", "min", "max", "type", "bool_numbers", "on_doubt"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        tags[path] = TagConfig(
            path=path,
            device=device,
            address=address.strip(),
            access=str(access),
            data_type=data_type,
            min_value=bounds["min"],
            max_value=bounds["max"],
            bool_numbers=bool_numbers,
            on_doubt=on_doubt,
        )
    return tags


def _databases(raw: Mapping[str, Any], source: str, base_dir: Path) -> dict[str, DatabaseConfig]:
    databases: dict[str, DatabaseConfig] = {}
    for name, table in _table(raw, "databases", source).items():
        if not isinstance(table, dict) or not isinstance(table.get("url"), str):
            raise ConfigError(f"{source}: databases.{name}.url must be a string")
        settings = {k: v for k, v in table.items() if k != "url"}
        databases[name] = DatabaseConfig(name=name, url=_resolve_sqlite(table["url"], base_dir), settings=settings)
    return databases


def _http(raw: Mapping[str, Any], source: str) -> HttpConfig:
    table = _table(raw, "http", source)
    verify = table.get("verify_tls", True)
    if not isinstance(verify, bool):
        raise ConfigError(f"{source}: http.verify_tls must be true or false")
    return HttpConfig(
        verify_tls=verify,
        pool_connections=_int(table, "pool_connections", 10, f"{source}: http"),
        default_timeout_ms=_int(table, "default_timeout_ms", 10_000, f"{source}: http"),
    )


def config_from_dict(
    raw: Mapping[str, Any],
    *,
    source: str = "<dict>",
    base_dir: str | Path = ".",
    env: Mapping[str, str] | None = None,
) -> Config:
    """Validate a parsed TOML document (plus environment overrides) into a :class:`Config`."""
    env = os.environ if env is None else env
    base = Path(base_dir).resolve()
    expanded = _expand(dict(raw), "", env)
    known = {"store", "apps", "engine", "devices", "tags", "databases", "http"}
    unknown = set(expanded) - known
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(sorted(unknown))}")
    store = _table(expanded, "store", source)
    store_url = env.get("EXCHANGE_STORE_URL") or store.get("url", DEFAULT_STORE_URL)
    if not isinstance(store_url, str) or not store_url:
        raise ConfigError(f"{source}: store.url must be a non-empty string")
    apps = _table(expanded, "apps", source)
    if env.get("EXCHANGE_APPS"):
        paths: list[Any] = [p for p in env["EXCHANGE_APPS"].split(os.pathsep) if p]
    else:
        paths = apps.get("paths", ["apps"])
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ConfigError(f"{source}: apps.paths must be a list of strings")
    devices = _devices(expanded, source, base)
    return Config(
        store_url=_resolve_sqlite(store_url, base),
        app_paths=tuple(str((base / p).resolve()) if not Path(p).is_absolute() else p for p in paths),
        engine=_engine(expanded, source),
        devices=devices,
        tags=_tags(expanded, source, devices),
        databases=_databases(expanded, source, base),
        http=_http(expanded, source),
        source=source,
        base_dir=str(base),
    )


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Load the config from ``path``, ``EXCHANGE_CONFIG`` or ``./exchange.toml`` (defaults if none)."""
    env = os.environ if env is None else env
    chosen = path or env.get("EXCHANGE_CONFIG")
    if chosen is None and Path("exchange.toml").is_file():
        chosen = "exchange.toml"
    if chosen is None:
        return config_from_dict({}, source="<defaults>", base_dir=Path.cwd(), env=env)
    file = Path(chosen)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {file} does not exist") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {file} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"config file {file} cannot be read: {exc}") from exc
    return config_from_dict(raw, source=str(file), base_dir=file.resolve().parent, env=env)
