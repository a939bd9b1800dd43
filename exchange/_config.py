"""One typed configuration, loaded and validated once.

Sources, later ones winning: built-in defaults, the TOML file (``--config FILE``, else ``EXCHANGE_CONFIG``,
else ``./exchange.toml`` when present), then the environment: ``EXCHANGE_STORE_URL`` and
``EXCHANGE_APPS`` (paths separated by ``os.pathsep``). ``${NAME}`` inside any string value is replaced
by the environment variable NAME; a missing variable is a :class:`ConfigError` naming it and the key.

Relative paths (SQLite files, app folders) are resolved against the directory the config file lives
in, or the working directory when there is no file.

Every table is checked for keys it does not know (a typo such as ``[store] ulr`` must not quietly
open a new, empty store): the error names the file, the table and the key, and the closest valid key.
``[devices.NAME]`` tables are the exception: their keys belong to the drivers, which check them.
Numbers are checked against a range (a value no machine could honour is a typo, not a setting).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from exchange._config_keys import closest, refuse_unknown
from exchange._config_keys import describe_value as _kind
from exchange._config_keys import section_table as _table
from exchange._config_phases import PhaseConfig, UnitsConfig, WatchdogConfig
from exchange._config_phases import phases as _phases
from exchange._config_phases import units as _units
from exchange._config_phases import watchdog as _watchdog
from exchange._config_record import RecordConfig
from exchange._config_record import record as _record
from exchange._config_roles import roles as _roles
from exchange._config_signatures import SignaturesConfig
from exchange._config_signatures import signatures as _signatures
from exchange._config_simulation import SIMULATION_KEYS, SimulationConfig, simulation
from exchange.errors import ConfigError

_D = TypeVar("_D")

DEFAULT_STORE_URL = "sqlite:///var/exchange.db"
DRIVERS = ("opcua", "modbus", "enip")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

_DAY_MS = 86_400_000
_DAY_SECONDS = 86_400.0
_INT32_MAX = 2**31 - 1
# [retention] finished_runs_days below this is refused: the run a caller waits on (``start --wait``,
# the console, the OPC UA server's finished runs) would be deleted before it is read, and the audit
# log, kept as long, with it; a gateway applies retention hourly by default anyway.
RETENTION_AGE_MIN_SECONDS = 3600.0
NODE_ID_MAX_CHARS = 100  # the store keeps "<node id>/<pid>-<tag>" in a 200-character column


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


# The range each number of [engine] may take, inclusive (floats: above the lower bound).
ENGINE_RANGES: Mapping[str, tuple[float, float]] = {
    "workers": (1, 100_000),
    "dispatch_poll_ms": (0, _DAY_MS),
    "mailbox_poll_ms": (0, _DAY_MS),
    "cancel_poll_ms": (0, _DAY_MS),
    "lease_seconds": (0.0, _DAY_SECONDS),
    "stop_timeout_seconds": (0.0, _DAY_SECONDS),
    "progress_interval_ms": (0, _DAY_MS),
    "progress_history_max": (0, 1_000_000),
    "step_output_max_bytes": (1, _INT32_MAX),
    "params_max_bytes": (1, _INT32_MAX),
    "result_max_bytes": (1, _INT32_MAX),
    "message_max_bytes": (1, _INT32_MAX),
    "reason_max_chars": (1, _INT32_MAX),
}


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
    access: str | None = None  # "ro" | "rw"; None (unset): "rw" where the protocol can write the address
    data_type: str | None = None
    min_value: float | None = None
    max_value: float | None = None
    bool_numbers: bool = False  # booleans may be written as 1/0 (and 0/1 to a Boolean)
    on_doubt: str | None = None  # "readback" | "fail"; unset: by the value (exchange/_tags/table.py)
    # the tag's protocol keys as written (PROTOCOL_TAG_KEYS); the device's protocol checks them
    options: Mapping[str, Any] = field(default_factory=dict)


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
class ApiConfig:
    """``[api]``: the HTTP API and operator console the gateway serves (not served when ``listen`` is unset)."""

    listen: str | None = None  # "HOST:PORT"; port 0 takes a free port (the gateway prints it)
    cert: str | None = None  # TLS certificate (PEM); with ``key``, the API is served over HTTPS
    key: str | None = None
    session_hours: float = 12.0  # a console sign-in lasts this long (one shift), then signs in again
    max_body_bytes: int = 1_048_576  # a request body larger than this is refused (413)
    # addresses or networks ("10.0.0.5", "10.1.0.0/16") of reverse proxies whose X-Forwarded-For is
    # believed; from any other peer the header is ignored (anyone could write it)
    trusted_proxies: list[str] = field(default_factory=list)
    password_min_chars: int = 12  # the shortest password `exchange users` and the console accept


@dataclass(frozen=True)
class OpcuaServerConfig:
    """``[opcua_server]``: runs as OPC UA nodes for HMIs and SCADA (not served when ``listen`` is unset)."""

    listen: str | None = None  # "opc.tcp://HOST:PORT/PATH"; port 0 takes a free port (printed)
    cert: str | None = None  # the server's certificate (DER or PEM): Basic256Sha256 Sign and SignAndEncrypt
    key: str | None = None
    refresh_ms: int = 500  # how often the nodes are brought up to date (one store query)
    finished_minutes: float = 60.0  # a finished run stays visible this long


@dataclass(frozen=True)
class RetentionConfig:
    """``[retention]``: finished runs deleted hourly by one gateway (and by ``exchange retention
    apply``); none is deleted when both are unset. Unfinished runs are never deleted."""

    finished_runs_days: float | None = None  # finished runs older than this (by finish time) go
    max_finished_runs: int | None = None  # beyond this many finished runs, the oldest go
    interval_minutes: float = 60.0  # how often a gateway applies it
    # a directory (absolute; relative ones are read from the config's): each run's batch record is
    # written there as <run id>.json before the run is deleted; a run whose record could not be
    # written is not deleted (exchange._engine.gateway.archive)
    archive_dir: str | None = None


@dataclass(frozen=True)
class AttentionConfig:
    """``[attention]``: which runs count as needing someone, and who is told (a webhook)."""

    recent_hours: float = 24.0  # ERROR runs, and writes in doubt of finished runs, count this long
    webhook_url: str | None = None  # a JSON POST when a run starts needing someone (None: none)
    webhook_timeout_s: float = 5.0


@dataclass(frozen=True)
class Config:
    store_url: str = DEFAULT_STORE_URL
    # True: the store's database may hold other applications' tables next to Exchange's. False (the
    # default): such a database is refused, so a wrong URL cannot scatter Exchange's tables into it.
    store_shared: bool = False
    app_paths: tuple[str, ...] = ("apps",)
    engine: EngineConfig = EngineConfig()
    devices: Mapping[str, DeviceConfig] = field(default_factory=dict)
    tags: Mapping[str, TagConfig] = field(default_factory=dict)
    databases: Mapping[str, DatabaseConfig] = field(default_factory=dict)
    http: HttpConfig = HttpConfig()
    api: ApiConfig = ApiConfig()
    retention: RetentionConfig = RetentionConfig()
    opcua_server: OpcuaServerConfig = OpcuaServerConfig()
    attention: AttentionConfig = AttentionConfig()
    # [schedules.NAME], [triggers.NAME], [command_tags.NAME]: see exchange/_config_plant.py
    schedules: Mapping[str, Any] = field(default_factory=dict)
    triggers: Mapping[str, Any] = field(default_factory=dict)
    command_tags: Mapping[str, Any] = field(default_factory=dict)
    # [phases."UNIT/PHASE"], [watchdog], [units]: see exchange/_config_phases.py
    phases: Mapping[str, PhaseConfig] = field(default_factory=dict)
    watchdog: WatchdogConfig = WatchdogConfig()
    units: UnitsConfig = UnitsConfig()
    # [record]: the tags a run's batch record samples (exchange/_config_record.py)
    record: RecordConfig = RecordConfig()
    # [roles.NAME]: a plant's own roles, name -> rights (exchange/_config_roles.py, exchange/_roles.py)
    roles: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # [signatures] required_for: the actions that need an electronic signature (exchange/_config_signatures.py)
    signatures: SignaturesConfig = SignaturesConfig()
    # [simulation]: read by `exchange simulate --from-config` and the exchange_sim fixture, ignored by a
    # gateway (checked at load like every table: exchange/_config_simulation.py)
    simulation: SimulationConfig = SimulationConfig()
    source: str = "<defaults>"
    base_dir: str = "."

    def node_id(self) -> str:
        import socket

        return self.engine.node_id or socket.gethostname()


# The keys each table knows. [devices.NAME] is the drivers' (exchange._drivers checks it); the
# settings of [databases.NAME] besides url are checked by exchange._integrations.sql_engine.
SECTIONS = ("store", "apps", "engine", "devices", "tags", "databases", "http", "api", "retention", "opcua_server",
            "schedules", "triggers", "command_tags", "attention", "simulation", "phases", "watchdog", "units", "roles",
            "signatures", "record")
STORE_KEYS = ("url", "shared")
APPS_KEYS = ("paths",)
HTTP_KEYS = tuple(HttpConfig.__dataclass_fields__)
API_KEYS = tuple(ApiConfig.__dataclass_fields__)
RETENTION_KEYS = tuple(RetentionConfig.__dataclass_fields__)
OPCUA_SERVER_KEYS = tuple(OpcuaServerConfig.__dataclass_fields__)
ATTENTION_KEYS = tuple(AttentionConfig.__dataclass_fields__)
ENGINE_KEYS = tuple(EngineConfig.__dataclass_fields__)
# keys of one protocol's tags, checked by that protocol (exchange._drivers.registry.validate_address)
PROTOCOL_TAG_KEYS = ("byte_order", "word_order", "rmw")
TAG_KEYS = ("device", "address", "access", "min", "max", "type", "bool_numbers", "on_doubt", *PROTOCOL_TAG_KEYS)
ON_DOUBT = ("readback", "fail")  # what a tag write whose answer was lost does (exchange._tags.delivery)
_SECTION_KEYS: Mapping[str, tuple[str, ...]] = {
    "store": STORE_KEYS, "apps": APPS_KEYS, "http": HTTP_KEYS, "engine": ENGINE_KEYS, "api": API_KEYS,
    "retention": RETENTION_KEYS, "opcua_server": OPCUA_SERVER_KEYS, "attention": ATTENTION_KEYS,
    "simulation": SIMULATION_KEYS,
}


def _expand(value: Any, key: str, env: Mapping[str, str], source: str) -> Any:
    if isinstance(value, str):

        def repl(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in env:
                raise ConfigError(f"{source}: {key}: environment variable ${{{name}}} is not set")
            return env[name]

        return _VAR.sub(repl, value)
    if isinstance(value, dict):
        return {k: _expand(v, f"{key}.{k}" if key else k, env, source) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, f"{key}[{i}]", env, source) for i, v in enumerate(value)]
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


def _int(table: Mapping[str, Any], key: str, default: int, where: str, low: int = 0, high: int = _INT32_MAX) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}.{key} must be an integer from {low} to {high}, got {_kind(value)}")
    if not low <= value <= high:
        raise ConfigError(f"{where}.{key} must be an integer from {low} to {high}, got {_kind(value)}")
    return value


def _positive_float(table: Mapping[str, Any], key: str, where: str, high: float) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}.{key} must be a number above 0 and at most {high:g}, got {_kind(value)}")
    number = float(value)
    if not math.isfinite(number) or not 0 < number <= high:
        raise ConfigError(f"{where}.{key} must be a number above 0 and at most {high:g}, got {_kind(value)}")
    return number


def _positive_float_or(table: Mapping[str, Any], key: str, where: str, high: float, default: _D) -> float | _D:
    """:func:`_positive_float` when ``key`` is in ``table``, else ``default``."""
    return _positive_float(table, key, where, high) if key in table else default


def _bool(table: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be true or false, got {_kind(value)}")
    return value


def _engine(raw: Mapping[str, Any], source: str) -> EngineConfig:
    table = _table(raw, "engine", source)
    where = f"{source}: engine"
    refuse_unknown(table, ENGINE_KEYS, where)
    defaults = EngineConfig()
    values: dict[str, Any] = {}
    for key in ENGINE_KEYS:
        if key not in table:
            continue
        default = getattr(defaults, key)
        if isinstance(default, str):
            value = table[key]
            if not isinstance(value, str):
                raise ConfigError(f"{where}.{key} must be a string, got {_kind(value)}")
            if len(value) > NODE_ID_MAX_CHARS or not value.isprintable():
                raise ConfigError(
                    f"{where}.{key} must be at most {NODE_ID_MAX_CHARS} printable characters, got {_kind(value)}"
                )
            values[key] = value
        elif isinstance(default, float):
            values[key] = _positive_float(table, key, where, ENGINE_RANGES[key][1])
        else:
            low, high = ENGINE_RANGES[key]
            values[key] = _int(table, key, default, where, int(low), int(high))
    return EngineConfig(**values)


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
            raise ConfigError(f"{where} must be a table, got {_kind(table)}")
        refuse_unknown(table, TAG_KEYS, where)
        device = table.get("device")
        if not isinstance(device, str) or device not in devices:
            hint = closest(device, devices) if isinstance(device, str) else None
            suggestion = f" (did you mean {hint!r}?)" if hint else ""
            raise ConfigError(f"{where}.device {device!r} is not a configured device{suggestion}")
        address = table.get("address")
        if not isinstance(address, str) or not address.strip():
            raise ConfigError(f"{where}.address must be a non-empty string")
        access = table.get("access")
        if access is not None and access not in ("ro", "rw"):
            raise ConfigError(f'{where}.access must be "ro" or "rw", got {access!r}')
        bounds: dict[str, float | None] = {}
        for key in ("min", "max"):
            value = table.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value)
            ):
                raise ConfigError(f"{where}.{key} must be a number, got {_kind(value)}")
            bounds[key] = None if value is None else float(value)
        low, high = bounds["min"], bounds["max"]
        if low is not None and high is not None and low > high:
            raise ConfigError(f"{where}: min {low:g} is above max {high:g}")
        data_type = table.get("type")
        if data_type is not None and not isinstance(data_type, str):
            raise ConfigError(f"{where}.type must be a string, got {_kind(data_type)}")
        on_doubt = table.get("on_doubt")
        if on_doubt is not None and on_doubt not in ON_DOUBT:
            hint = closest(on_doubt, ON_DOUBT) if isinstance(on_doubt, str) else None
            suggestion = f" (did you mean {hint!r}?)" if hint else ""
            raise ConfigError(f'{where}.on_doubt must be "readback" or "fail", got {_kind(on_doubt)}{suggestion}')
        tags[path] = TagConfig(
            path=path,
            device=device,
            address=address.strip(),
            access=access,
            data_type=data_type,
            min_value=low,
            max_value=high,
            bool_numbers=_bool(table, "bool_numbers", False, where),
            on_doubt=on_doubt,
            options={key: table[key] for key in PROTOCOL_TAG_KEYS if key in table},
        )
    return tags


def _databases(raw: Mapping[str, Any], source: str, base_dir: Path) -> dict[str, DatabaseConfig]:
    databases: dict[str, DatabaseConfig] = {}
    for name, table in _table(raw, "databases", source).items():
        where = f"{source}: databases.{name}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table, got {_kind(table)}")
        # The other settings are the SQL layer's to check (exchange._integrations.sql_engine); a key
        # close to "url" while url is missing is a typo of it.
        url = table.get("url")
        if "url" not in table:
            typo = next((key for key in table if closest(key, ("url",))), None)
            raise ConfigError(f"{where}: unknown key {typo!r} (did you mean 'url'?)" if typo
                              else f"{where}: url is missing")
        if not isinstance(url, str) or not url.strip():
            raise ConfigError(f"{where}.url must be a non-empty string, got {_kind(url)}")
        settings = {k: v for k, v in table.items() if k != "url"}
        databases[name] = DatabaseConfig(name=name, url=_resolve_sqlite(url, base_dir), settings=settings)
    return databases


def _http(raw: Mapping[str, Any], source: str) -> HttpConfig:
    table = _table(raw, "http", source)
    where = f"{source}: http"
    refuse_unknown(table, HTTP_KEYS, where)
    return HttpConfig(
        verify_tls=_bool(table, "verify_tls", True, where),
        pool_connections=_int(table, "pool_connections", 10, where, 1, 10_000),
        default_timeout_ms=_int(table, "default_timeout_ms", 10_000, where, 1, _DAY_MS),
    )


def parse_listen(value: Any, where: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (``[::1]:8088`` for IPv6) as ``(host, port)``; ConfigError naming ``where`` otherwise."""
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string \"HOST:PORT\", got {_kind(value)}")
    host, sep, port_text = value.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(f"{where} must be \"HOST:PORT\" with a port from 0 to 65535, got {value!r}")
    return host, int(port_text)


def _cert_and_key(table: Mapping[str, Any], where: str, base_dir: Path, needs: str) -> dict[str, str | None]:
    """``cert`` and ``key`` as paths from ``base_dir``: both or neither (``needs`` says what for)."""
    files: dict[str, str | None] = {}
    for key in ("cert", "key"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise ConfigError(f"{where}.{key} must be a file path, got {_kind(value)}")
        files[key] = None if value is None else str(base_dir / value)
    if (files["cert"] is None) != (files["key"] is None):
        raise ConfigError(f"{where}: cert and key go together ({needs} needs both), got only "
                          f"{'cert' if files['cert'] else 'key'}")
    return files


def _api(raw: Mapping[str, Any], source: str, base_dir: Path) -> ApiConfig:
    table = _table(raw, "api", source)
    where = f"{source}: api"
    refuse_unknown(table, API_KEYS, where)
    listen = table.get("listen")
    if listen is not None:
        parse_listen(listen, f"{where}.listen")
    files = _cert_and_key(table, where, base_dir, "TLS")
    return ApiConfig(
        listen=listen,
        cert=files["cert"],
        key=files["key"],
        session_hours=_positive_float_or(table, "session_hours", where, 24 * 366, 12.0),
        max_body_bytes=_int(table, "max_body_bytes", 1_048_576, where, 1024, 1 << 30),
        trusted_proxies=_networks(table, "trusted_proxies", where),
        password_min_chars=_int(table, "password_min_chars", ApiConfig.password_min_chars, where, 8, 128),
    )


def _networks(table: Mapping[str, Any], key: str, where: str) -> list[str]:
    """A list of IP addresses or networks (CIDR), each written as ipaddress normalises it."""
    import ipaddress

    value = table.get(key, [])
    if not isinstance(value, list):
        raise ConfigError(f'{where}.{key} must be a list of addresses or networks, e.g. ["10.0.0.5", '
                          f'"10.1.0.0/16"], got {_kind(value)}')
    networks: list[str] = []
    for item in value:
        try:
            networks.append(str(ipaddress.ip_network(item.strip(), strict=False)))
        except (AttributeError, ValueError):
            raise ConfigError(f"{where}.{key}: {_kind(item)} is not an IP address or network "
                              "(e.g. 10.0.0.5, 10.1.0.0/16, ::1)") from None
    return networks


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listen address) is reachable from this machine only."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to an address other machines reach


def _retention(raw: Mapping[str, Any], source: str, base: Path) -> RetentionConfig:
    table = _table(raw, "retention", source)
    where = f"{source}: retention"
    refuse_unknown(table, RETENTION_KEYS, where)
    days = _positive_float_or(table, "finished_runs_days", where, 100 * 366, None)
    if days is not None and days * _DAY_SECONDS < RETENTION_AGE_MIN_SECONDS:
        raise ConfigError(f"{where}.finished_runs_days must be at least one hour (1/24 = 0.0417 days), got "
                          f"{_kind(table['finished_runs_days'])} ({days * _DAY_SECONDS:.3g} s)")
    most = _int(table, "max_finished_runs", 0, where, 1, _INT32_MAX) if "max_finished_runs" in table else None
    interval = _positive_float_or(table, "interval_minutes", where, 7 * 24 * 60, RetentionConfig.interval_minutes)
    archive_dir = table.get("archive_dir")
    if archive_dir is not None:
        if not isinstance(archive_dir, str) or not archive_dir.strip():
            raise ConfigError(f"{where}.archive_dir must be a directory's path, got {_kind(archive_dir)}")
        archive_dir = str(Path(archive_dir) if Path(archive_dir).is_absolute() else (base / archive_dir).resolve())
    return RetentionConfig(finished_runs_days=days, max_finished_runs=most, interval_minutes=interval,
                           archive_dir=archive_dir)


def _webhook_url(url: Any, where: str) -> None:
    """ConfigError naming ``where`` unless ``url`` is an http(s) URL with a host, a valid port if any,
    and no blank or control character anywhere (a CR/LF would end the request line early: header
    injection; a blank is a paste error that requests would quietly percent-encode)."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        raise ConfigError(f"{where} must be an http:// or https:// URL, got {_kind(url)}")
    odd = next((c for c in url if c.isspace() or not c.isprintable()), None)
    if odd is not None:
        raise ConfigError(f"{where} must be a URL without blanks or control characters, got {url!r} "
                          f"({odd!r} is character {url.index(odd) + 1})")
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018  (raises ValueError for a port that is not 0-65535)
    except ValueError:
        raise ConfigError(f"{where} has a port that is not a number from 0 to 65535: {url!r}") from None
    if not parts.hostname:
        raise ConfigError(f"{where} has no host: {url!r} (e.g. \"https://mes.plant.local/hooks/exchange\")")
    import ipaddress

    try:
        address = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return  # a host name: what it resolves to is the network's to say
    if address.is_link_local or address.is_unspecified or address.is_multicast:
        kind = ("a link-local address (an address a machine gives itself without DHCP, or a cloud's "
                "metadata service), never a stable receiver" if address.is_link_local
                else "not an address a POST can reach")
        raise ConfigError(f"{where}: {parts.hostname} is {kind}; give the receiver's host name or address")


def _attention(raw: Mapping[str, Any], source: str) -> AttentionConfig:
    table = _table(raw, "attention", source)
    where = f"{source}: attention"
    refuse_unknown(table, ATTENTION_KEYS, where)
    url = table.get("webhook_url")
    if url is not None:
        _webhook_url(url, f"{where}.webhook_url")
    return AttentionConfig(
        recent_hours=_positive_float_or(table, "recent_hours", where, 100 * 366 * 24, AttentionConfig.recent_hours),
        webhook_url=url,
        webhook_timeout_s=_positive_float_or(table, "webhook_timeout_s", where, 300.0,
                                             AttentionConfig.webhook_timeout_s),
    )


def parse_opcua_listen(value: Any, where: str) -> tuple[str, int, str]:
    """``opc.tcp://HOST:PORT/PATH`` as (host, port, path); ConfigError naming ``where`` otherwise."""
    from urllib.parse import urlsplit

    if not isinstance(value, str) or not value.startswith("opc.tcp://"):
        raise ConfigError(f"{where} must be an opc.tcp://HOST:PORT/PATH address, got {_kind(value)}")
    parts = urlsplit(value)
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or port is None:
        raise ConfigError(f"{where} must be an opc.tcp://HOST:PORT/PATH address, got {value!r} (a host and a port)")
    return parts.hostname, port, parts.path or "/"


def _opcua_server(raw: Mapping[str, Any], source: str, base_dir: Path) -> OpcuaServerConfig:
    table = _table(raw, "opcua_server", source)
    where = f"{source}: opcua_server"
    refuse_unknown(table, OPCUA_SERVER_KEYS, where)
    listen = table.get("listen")
    if listen is not None:
        parse_opcua_listen(listen, f"{where}.listen")
    files = _cert_and_key(table, where, base_dir, "Basic256Sha256")
    return OpcuaServerConfig(
        listen=listen, cert=files["cert"], key=files["key"],
        refresh_ms=_int(table, "refresh_ms", 500, where, 50, 60_000),
        finished_minutes=_positive_float_or(table, "finished_minutes", where, 7 * 24 * 60,
                                            OpcuaServerConfig.finished_minutes),
    )


def _check_names(raw: Mapping[str, Any], source: str) -> None:
    """Refuse unknown sections and unknown keys of the fixed tables, before any ``${VAR}`` is read
    (a typo'd key's variable being unset would otherwise hide the typo)."""
    for key in raw:
        if key in SECTIONS:
            continue
        owners = [section for section, keys in _SECTION_KEYS.items() if key in keys]
        if owners and not isinstance(raw[key], dict):
            raise ConfigError(
                f"{source}: {key!r} is outside any table (did you mean to put it under [{owners[0]}]? "
                "keys before the first [table] header are at the top level)"
            )
        refuse_unknown({key: raw[key]}, SECTIONS, source, noun="section")
    for section, known in _SECTION_KEYS.items():
        table = _table(raw, section, source)
        refuse_unknown(table, known, f"{source}: {section}")


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
    _check_names(raw, source)
    expanded = _expand(dict(raw), "", env, source)
    store = _table(expanded, "store", source)
    store_url = env.get("EXCHANGE_STORE_URL") or store.get("url", DEFAULT_STORE_URL)
    if not isinstance(store_url, str) or not store_url.strip():
        raise ConfigError(f"{source}: store.url must be a non-empty string, got {_kind(store_url)}")
    store_shared = _bool(store, "shared", False, f"{source}: store")
    apps = _table(expanded, "apps", source)
    if env.get("EXCHANGE_APPS"):
        paths: list[Any] = [p for p in env["EXCHANGE_APPS"].split(os.pathsep) if p]
    else:
        paths = apps.get("paths", ["apps"])
    if not isinstance(paths, list) or not all(isinstance(p, str) and p.strip() for p in paths):
        raise ConfigError(f"{source}: apps.paths must be a list of non-empty strings, got {paths!r}")
    devices = _devices(expanded, source, base)
    tags = _tags(expanded, source, devices)
    # A plant's schedules, triggers and command tags: their module (cron, time zones) is imported
    # for a config that has some, not on every gateway's way to its first resumed step. An absent
    # section reads as none of them (what the module would answer).
    plant_sections = [section for section in ("schedules", "triggers", "command_tags") if section in expanded]
    if plant_sections:
        from exchange import _config_plant as plant  # it uses this module's helpers

    units = _units(expanded, source)
    phases = _phases(expanded, source, tags, units.units)

    return Config(
        store_url=_resolve_sqlite(store_url, base),
        store_shared=store_shared,
        app_paths=tuple(str((base / p).resolve()) if not Path(p).is_absolute() else p for p in paths),
        engine=_engine(expanded, source),
        devices=devices,
        tags=tags,
        databases=_databases(expanded, source, base),
        http=_http(expanded, source),
        api=_api(expanded, source, base),
        retention=_retention(expanded, source, base),
        opcua_server=_opcua_server(expanded, source, base),
        attention=_attention(expanded, source),
        schedules=plant.schedules(expanded, source) if "schedules" in plant_sections else {},
        triggers=plant.triggers(expanded, source, tags) if "triggers" in plant_sections else {},
        command_tags=plant.command_tags(expanded, source, tags) if "command_tags" in plant_sections else {},
        phases=phases,
        watchdog=_watchdog(expanded, source, tags),
        units=units,
        record=_record(expanded, source, tags),
        roles=_roles(expanded, source),
        signatures=_signatures(expanded, source),
        simulation=simulation(expanded, source, base, tags, phases),
        source=source,
        base_dir=str(base),
    )


def _decode(data: bytes, file: Path) -> str:
    """The file's text: UTF-8 (a leading byte-order mark, as some Windows editors write, is dropped)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        offset = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        line = data.count(b"\n", 0, offset) + 1
        raise ConfigError(
            f"config file {file} is not UTF-8 text: byte 0x{data[offset]:02x} at offset {offset} (line {line}); "
            "save it as UTF-8"
        ) from None


def config_file(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> str | Path | None:
    """The config file a command reads: ``path`` (``--config``), else ``EXCHANGE_CONFIG``, else
    ``./exchange.toml`` when there is one; None when none applies (the defaults)."""
    env = os.environ if env is None else env
    chosen = path or env.get("EXCHANGE_CONFIG")
    if chosen is None and Path("exchange.toml").is_file():
        chosen = "exchange.toml"
    return chosen


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Load the config from ``path``, ``EXCHANGE_CONFIG`` or ``./exchange.toml`` (defaults if none)."""
    env = os.environ if env is None else env
    chosen = config_file(path, env)
    if chosen is None:
        return config_from_dict({}, source="<defaults>", base_dir=Path.cwd(), env=env)
    file = Path(chosen)
    try:
        data = file.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {file} does not exist") from exc
    except OSError as exc:
        raise ConfigError(f"config file {file} cannot be read: {exc}") from exc
    text = _decode(data, file)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {file} is not valid TOML: {exc}") from exc
    except ValueError as exc:  # an integer too long to convert (Python's 4300-digit limit)
        raise ConfigError(f"config file {file} is not usable TOML: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise ConfigError(f"config file {file} is not usable TOML: values nested too deeply") from None
    return config_from_dict(raw, source=str(file), base_dir=file.resolve().parent, env=env)
