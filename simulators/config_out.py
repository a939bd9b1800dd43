"""The config that points at a running simulator (``--config-out``, ``sim.config_path``).

:func:`rewrite` takes the config as written (the TOML document, ``${VAR}`` left as they are) and
gives every simulated device the simulator's host and port, through its protocol's ``device_out``
(Logix devices also get ``upload_tags = false`` and their tags a ``type``; OPC UA devices lose their
security keys). When the file goes to another folder than the original, relative paths (the SQLite
store, the apps, certificates, the model) are made absolute so they still name the same files.
:func:`dumps` writes TOML that ``tomllib`` reads back as the same document.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from exchange._config import PATH_SETTINGS
from exchange._config_simulation import model_is_file

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_SQLITE = ("sqlite:///", "sqlite+pysqlite:///")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        # JSON's escapes are TOML's (\uXXXX, \n, \", \\); control characters must be escaped in both
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as TOML")


def _table(lines: list[str], prefix: list[str], table: Mapping[str, Any]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in table.items() if isinstance(v, dict)}
    if prefix and (scalars or not tables):
        if lines:
            lines.append("")
        lines.append("[" + ".".join(_key(part) for part in prefix) + "]")
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items())
    for key, sub in tables.items():
        _table(lines, [*prefix, key], sub)


def dumps(document: Mapping[str, Any], header: str = "") -> str:
    """``document`` (as ``tomllib`` gives it) as TOML text, after ``header`` comment lines."""
    lines: list[str] = [f"# {line}".rstrip() for line in header.splitlines()]
    top = {k: v for k, v in document.items() if not isinstance(v, dict)}
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in top.items())
    body: list[str] = []
    _table(body, [], {k: v for k, v in document.items() if isinstance(v, dict)})
    if lines and body:
        lines.append("")
    return "\n".join(lines + body) + "\n"


def _absolute(path: str, base_dir: Path) -> str:
    return path if Path(path).is_absolute() or path.startswith("$") else str((base_dir / path).resolve())


def _absolute_sqlite(url: Any, base_dir: Path) -> Any:
    if not isinstance(url, str):
        return url
    for scheme in _SQLITE:
        if url.startswith(scheme):
            rest = url[len(scheme):]
            if rest and not rest.startswith(("/", ":memory:", "$")):
                return scheme + str((base_dir / rest).resolve())
    return url


def absolute_paths(document: dict[str, Any], base_dir: Path) -> None:
    """Make the document's relative file paths absolute against ``base_dir`` (in place)."""
    store = document.get("store")
    if isinstance(store, dict) and "url" in store:
        store["url"] = _absolute_sqlite(store["url"], base_dir)
    apps = document.get("apps")
    if isinstance(apps, dict) and isinstance(apps.get("paths"), list):
        apps["paths"] = [_absolute(p, base_dir) if isinstance(p, str) else p for p in apps["paths"]]
    for database in (document.get("databases") or {}).values():
        if isinstance(database, dict) and "url" in database:
            database["url"] = _absolute_sqlite(database["url"], base_dir)
    for device in (document.get("devices") or {}).values():
        if isinstance(device, dict):
            for key in PATH_SETTINGS:
                if isinstance(device.get(key), str) and device[key]:
                    device[key] = _absolute(device[key], base_dir)
    for section in ("api", "opcua_server"):
        table = document.get(section)
        if isinstance(table, dict):
            for key in ("cert", "key"):
                if isinstance(table.get(key), str):
                    table[key] = _absolute(table[key], base_dir)
    simulation = document.get("simulation")
    if isinstance(simulation, dict) and isinstance(simulation.get("model"), str):
        if model_is_file(simulation["model"]):
            simulation["model"] = _absolute(simulation["model"], base_dir)


def rewrite(document: Mapping[str, Any], devices: Mapping[str, dict[str, Any]],
            tags: Mapping[str, dict[str, Any]], *, base_dir: Path | None = None) -> dict[str, Any]:
    """A copy of ``document`` with ``devices`` and ``tags`` tables replaced (by name and written
    path), relative paths made absolute against ``base_dir`` when given."""
    out = copy.deepcopy(dict(document))
    if devices:
        out["devices"] = {**out.get("devices", {}), **devices}
    if tags:
        out["tags"] = {**out.get("tags", {}), **tags}
    if base_dir is not None:
        absolute_paths(out, base_dir)
    return out
