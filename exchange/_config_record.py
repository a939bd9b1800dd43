"""``[record]``: the process values a batch record keeps (tags sampled while a run runs).

The scalar keys of ``[record]`` are the settings and the tags every run samples; its tables are
per workflow (``[record.fill_tank] tags = [...]``), whose tags are sampled for that workflow's runs
in addition to the global ones. Checked when the config is loaded, like every other section, one
line naming the key: an unknown key (with the closest known one), a tag that is not configured, an
``interval_ms`` that is not an integer from :data:`INTERVAL_MS_MIN` to :data:`INTERVAL_MS_MAX`, a
``keep_alive_ms`` shorter than the interval. A table naming a workflow the apps do not have is
refused when a gateway, ``exchange run`` or ``running_engine`` starts (the apps are loaded then:
:func:`exchange.workflows._services.preflight`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from exchange._config_keys import describe_value, known_tag, refuse_unknown, section_table, toml_key
from exchange.errors import ConfigError

RECORD_SETTINGS = ("tags", "interval_ms", "keep_alive_ms")
RECORD_WORKFLOW_KEYS = ("tags",)
INTERVAL_MS_MIN = 100  # a sampler faster than this is a historian's job, not a batch record's
INTERVAL_MS_MAX = 3_600_000
KEEP_ALIVE_MS_MAX = 86_400_000


@dataclass(frozen=True)
class RecordConfig:
    """``[record]``: the tags sampled for every run (``tags``) and per workflow (``workflows``),
    read every ``interval_ms`` and kept on change, and at least every ``keep_alive_ms`` while
    unchanged."""

    tags: tuple[str, ...] = ()
    interval_ms: int = 1000
    keep_alive_ms: int = 60_000
    workflows: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def configured(self) -> bool:
        """Whether any run samples anything."""
        return bool(self.tags) or any(self.workflows.values())

    def tags_for(self, workflow: str) -> tuple[str, ...]:
        """The tags a run of ``workflow`` samples: the global ones, then its own, each once."""
        own = self.workflows.get(workflow, ())
        return self.tags + tuple(tag for tag in own if tag not in self.tags) if own else self.tags


def record(raw: Mapping[str, Any], source: str, tags: Mapping[str, Any]) -> RecordConfig:
    """``[record]``, checked against the configured ``tags``."""
    table = section_table(raw, "record", source)
    if not table:
        return RecordConfig()
    where = f"{source}: record"
    settings = {key: value for key, value in table.items() if not isinstance(value, dict)}
    refuse_unknown(settings, RECORD_SETTINGS, where)
    interval_ms = _milliseconds(settings, "interval_ms", where, 1000, INTERVAL_MS_MIN, INTERVAL_MS_MAX)
    keep_alive_ms = _milliseconds(settings, "keep_alive_ms", where, max(60_000, interval_ms), interval_ms,
                                  KEEP_ALIVE_MS_MAX)
    workflows: dict[str, tuple[str, ...]] = {}
    for name, own in table.items():
        if not isinstance(own, dict):
            continue
        own_where = f"{where}.{toml_key(name)}"
        refuse_unknown(own, RECORD_WORKFLOW_KEYS, own_where)
        if "tags" not in own:
            raise ConfigError(f"{own_where}.tags is missing: list the tags the runs of {name!r} sample")
        workflows[name] = _tag_list(own["tags"], f"{own_where}.tags", tags)
    return RecordConfig(tags=_tag_list(settings.get("tags", []), f"{where}.tags", tags), interval_ms=interval_ms,
                        keep_alive_ms=keep_alive_ms, workflows=workflows)


def _tag_list(value: Any, where: str, tags: Mapping[str, Any]) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of tag paths, got {describe_value(value)}")
    found: list[str] = []
    for path in value:
        if not isinstance(path, str) or not path.strip():
            raise ConfigError(f"{where}: each tag is a non-empty string, got {describe_value(path)}")
        known_tag(path.strip(), where, tags)
        if path.strip() in found:
            raise ConfigError(f"{where}: tag {path.strip()!r} is listed twice")
        found.append(path.strip())
    return tuple(found)


def _milliseconds(table: Mapping[str, Any], key: str, where: str, default: int, least: int, most: int) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise ConfigError(f"{where}.{key} must be an integer from {least} to {most} (milliseconds), "
                          f"got {describe_value(value)}")
    return value
