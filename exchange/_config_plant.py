"""``[schedules.NAME]``, ``[triggers.NAME]`` and ``[command_tags.NAME]``: what starts runs and sends
commands without anyone at a keyboard (see docs/plant-features.md). Checked when the config is
loaded: a bad cron expression or one that never fires (``0 6 31 2 *``), an unknown timezone or tag,
an unknown edge or command is one line naming the key. Whether the workflow exists, and whether an
``ack_value`` fits its ``ack_tag``, is checked when the apps and the tag table are loaded (the
gateway's preflight, :func:`exchange.workflows._services.preflight`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from exchange._config_keys import known_tag, named_tables, text_value
from exchange.errors import ConfigError

EDGES = ("rising", "falling", "change")
CATCH_UP = ("latest", "none")
COMMANDS = ("HOLD", "RESUME", "STOP", "ABORT", "RESET")
_START_KEYS = ("queue", "partition_key", "priority")
# A cron of 5 or 6 fields has no year: its dates repeat with the calendar, and any date it can name
# comes round within 28 years or so (the 29th of February on a given weekday; 40 across a century
# that skips its leap year). Searching this far ahead from a fixed date is therefore a complete
# answer to "does it ever fire", in a bounded number of croniter's month-and-day steps (~15 ms).
NEVER_FIRES_SEARCH_YEARS = 50
_NEVER_FIRES_FROM = datetime(2000, 1, 1)  # naive: no time zone, so no DST adjustment can loop


@dataclass(frozen=True)
class StartOptions:
    queue: str | None = None
    partition_key: str | None = None
    priority: int = 0

    def as_options(self) -> dict[str, Any]:
        """As ``Runtime.start`` takes them."""
        options: dict[str, Any] = {"priority": self.priority}
        if self.queue:
            options["queue"] = self.queue
        if self.partition_key:
            options["partitionKey"] = self.partition_key
        return options


@dataclass(frozen=True)
class ScheduleConfig:
    name: str
    workflow: str
    cron: str
    timezone: str = "UTC"
    params: Mapping[str, Any] = field(default_factory=dict)
    catch_up: str = "latest"  # ticks missed while no gateway ran: "latest" (one run) or "none"
    start: StartOptions = StartOptions()

    @property
    def seconds_first(self) -> bool:
        return len(self.cron.split()) == 6


@dataclass(frozen=True)
class TriggerConfig:
    name: str
    tag: str
    workflow: str
    when: str = "rising"
    params: Mapping[str, Any] = field(default_factory=dict)
    poll_ms: int = 200
    start: StartOptions = StartOptions()


@dataclass(frozen=True)
class CommandTagConfig:
    name: str
    tag: str
    cmd: str
    when: str = "rising"
    partition_key: str | None = None  # the command goes to this partition's active run
    workflow: str | None = None  # ... or to this workflow's newest active run
    ack_tag: str | None = None  # written with ack_value once the command is stored
    ack_value: Any = False
    poll_ms: int = 200


SCHEDULE_KEYS = ("workflow", "cron", "timezone", "params", "catch_up", *_START_KEYS)
TRIGGER_KEYS = ("tag", "when", "workflow", "params", "poll_ms", *_START_KEYS)
COMMAND_TAG_KEYS = ("tag", "when", "cmd", "partition_key", "workflow", "ack_tag", "ack_value", "poll_ms")


def _choice(table: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...], default: str) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or value.strip().lower() not in choices:
        raise ConfigError(f"{where}.{key} must be one of {', '.join(choices)}, got {value!r}")
    return value.strip().lower()


def _params(table: Mapping[str, Any], where: str) -> dict[str, Any]:
    params = table.get("params", {})
    if not isinstance(params, dict):
        raise ConfigError(f"{where}.params must be a table of parameters, got {type(params).__name__}")
    return dict(params)


def _cron(table: Mapping[str, Any], where: str) -> str:
    """The schedule's cron: 5 fields or 6 with seconds first, and one that fires at all."""
    from croniter import CroniterBadDateError, croniter  # with dateutil ~20 ms: paid by configs with schedules only

    cron = text_value(table, "cron", where)
    assert cron is not None
    fields = len(cron.split())
    seconds_first = fields == 6
    if fields not in (5, 6) or not croniter.is_valid(cron, second_at_beginning=seconds_first):
        raise ConfigError(f"{where}.cron {cron!r} is not a cron expression of 5 fields (minute hour day month "
                          "weekday) or 6 with seconds first")
    try:
        croniter(cron, _NEVER_FIRES_FROM, second_at_beginning=seconds_first,
                 max_years_between_matches=NEVER_FIRES_SEARCH_YEARS).get_next(datetime)
    except CroniterBadDateError:
        raise ConfigError(f"{where}.cron {cron!r} never fires: no date matches its day, month and weekday "
                          "fields (e.g. the 31st of February)") from None
    return cron


def _poll_ms(table: Mapping[str, Any], where: str) -> int:
    value = table.get("poll_ms", 200)
    if isinstance(value, bool) or not isinstance(value, int) or not 20 <= value <= 60_000:
        raise ConfigError(f"{where}.poll_ms must be an integer from 20 to 60000, got {value!r}")
    return value


def _start(table: Mapping[str, Any], where: str) -> StartOptions:
    priority = table.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
        raise ConfigError(f"{where}.priority must be a 32-bit integer, got {priority!r}")
    return StartOptions(queue=text_value(table, "queue", where, required=False),
                        partition_key=text_value(table, "partition_key", where, required=False), priority=priority)


def _zone(table: Mapping[str, Any], where: str) -> str:
    """``timezone`` as written (default UTC). Blanks around it are refused, not trimmed: a zone name
    is an exact key of the time zone database, and a name that differs from the file is a typo."""
    zone = table.get("timezone")
    if isinstance(zone, str) and zone.strip() and zone != zone.strip():
        raise ConfigError(f"{where}.timezone {zone!r} has blanks around it: write {zone.strip()!r}")
    return text_value(table, "timezone", where, required=False) or "UTC"


def schedules(raw: Mapping[str, Any], source: str) -> dict[str, ScheduleConfig]:
    found = {}
    for name, table in named_tables(raw, "schedules", source, SCHEDULE_KEYS).items():
        where = f"{source}: schedules.{name}"
        cron = _cron(table, where)
        zone = _zone(table, where)
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"{where}.timezone {zone!r} is not a known time zone (e.g. 'Europe/Berlin')") from None
        workflow = text_value(table, "workflow", where)
        assert workflow is not None
        found[name] = ScheduleConfig(name=name, workflow=workflow, cron=cron, timezone=zone,
                                     params=_params(table, where),
                                     catch_up=_choice(table, "catch_up", where, CATCH_UP, "latest"),
                                     start=_start(table, where))
    return found


def triggers(raw: Mapping[str, Any], source: str, tags: Mapping[str, Any]) -> dict[str, TriggerConfig]:
    found = {}
    for name, table in named_tables(raw, "triggers", source, TRIGGER_KEYS).items():
        where = f"{source}: triggers.{name}"
        tag, workflow = text_value(table, "tag", where), text_value(table, "workflow", where)
        assert tag is not None and workflow is not None
        found[name] = TriggerConfig(name=name, tag=known_tag(tag, where, tags), workflow=workflow,
                                    when=_choice(table, "when", where, EDGES, "rising"), params=_params(table, where),
                                    poll_ms=_poll_ms(table, where), start=_start(table, where))
    return found


def command_tags(raw: Mapping[str, Any], source: str, tags: Mapping[str, Any]) -> dict[str, CommandTagConfig]:
    found = {}
    for name, table in named_tables(raw, "command_tags", source, COMMAND_TAG_KEYS).items():
        where = f"{source}: command_tags.{name}"
        tag = text_value(table, "tag", where)
        assert tag is not None
        cmd = table.get("cmd")
        if not isinstance(cmd, str) or cmd.strip().upper() not in COMMANDS:
            raise ConfigError(f"{where}.cmd must be one of {', '.join(COMMANDS)}, got {cmd!r}")
        key, workflow = text_value(table, "partition_key", where, required=False), text_value(table, "workflow", where,
                                                                                     required=False)
        if (key is None) == (workflow is None):
            raise ConfigError(f"{where}: give partition_key or workflow (whose active run gets the command), "
                              "one of them")
        ack = text_value(table, "ack_tag", where, required=False)
        if ack is not None:
            known_tag(ack, where, tags)
            if getattr(tags[ack], "access", None) == "ro":
                raise ConfigError(f"{where}.ack_tag {ack!r} is read-only (access = \"ro\"); it is written back")
        found[name] = CommandTagConfig(name=name, tag=known_tag(tag, where, tags), cmd=cmd.strip().upper(),
                                       when=_choice(table, "when", where, EDGES, "rising"), partition_key=key,
                                       workflow=workflow, ack_tag=ack, ack_value=table.get("ack_value", False),
                                       poll_ms=_poll_ms(table, where))
    return found
