"""The step library's shared services, wired to the runtime, and the checks a runtime makes at start.

Each service is built once per runtime, on first use, from its config, and closed with the runtime:

- :func:`tags`: the :class:`~exchange._tags.service.TagService` (``[devices.*]``, ``[tags.*]``);
- :func:`databases`: the :class:`~exchange._integrations.sql.SqlConnections` (``[databases.*]``);
- :func:`http`: the :class:`~exchange._integrations.http.HttpClient` (``[http]``).

:func:`preflight` builds the services the config uses and validates their settings now, so that a
gateway, ``exchange run`` and ``running_engine`` in a test all stop at start with a line naming a
mistake, instead of failing a run later. The protocol libraries are imported only for the drivers in
use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from exchange._arguments import shown
from exchange._config import Config
from exchange._config_keys import toml_key
from exchange._engine import ServiceKey, service
from exchange.errors import ConfigError, DatabaseError

if TYPE_CHECKING:
    from exchange._engine import Runtime
    from exchange._integrations.http import HttpClient
    from exchange._integrations.sql import SqlConnections
    from exchange._tags.phase_states import PhaseReading
    from exchange._tags.service import TagService

__all__ = ["DATABASES", "HTTP", "TAGS", "check_command_tag_acks", "databases", "http", "phase_states", "preflight",
           "tags"]


def _tag_service(config: Config) -> TagService:
    from exchange._tags.service import TagService

    return TagService.from_config(config)


def _sql_connections(config: Config) -> SqlConnections:
    from exchange._integrations.sql import SqlConnections

    return SqlConnections.from_config(config)


def _http_client(config: Config) -> HttpClient:
    from exchange._integrations.http import HttpClient

    return HttpClient.from_config(config)


TAGS: ServiceKey[TagService] = ServiceKey("tags", _tag_service)
DATABASES: ServiceKey[SqlConnections] = ServiceKey("databases", _sql_connections)
HTTP: ServiceKey[HttpClient] = ServiceKey("http", _http_client)


def tags() -> TagService:
    """The runtime's TagService."""
    return service(TAGS)


def databases() -> SqlConnections:
    """The runtime's named SQL connections. A config mistake found here, inside a step, is a
    DatabaseError (fatal: retrying cannot fix a config)."""
    try:
        return service(DATABASES)
    except ConfigError as exc:
        raise DatabaseError(str(exc)) from exc


def http() -> HttpClient:
    """The runtime's HTTP client."""
    return service(HTTP)


def phase_states(runtime: Runtime) -> list[PhaseReading]:
    """Each configured phase (``[phases."UNIT/PHASE"]``) as its PLC reports it now, through the
    runtime's tag service (:func:`exchange._tags.phase_states.read_phases`): for the surfaces that
    may not touch tags themselves (the HTTP API). Blocks for up to a device's timeout: call it
    from a worker thread. A device backing off after a failure answers Bad at once."""
    from exchange._tags.phase_states import read_phases

    phases = list(runtime.config.phases.values())
    if not phases:
        return []
    return read_phases(runtime.services.get(TAGS), phases)


def check_command_tag_acks(config: Config, tags: TagService) -> None:
    """Each ``[command_tags]`` ``ack_value`` through the checks a workflow's ``tags.write`` of it
    would make (:meth:`TagService.prepare_write`: the tag writable over its protocol, the value of
    its type and within its min/max), so that a value the ack write would always refuse stops the
    gateway at start instead of leaving the push button set. ConfigError naming the key. An OPC UA
    tag without ``type`` is held to its node's type only when written (the type is the device's)."""
    from exchange._tags.table import TagDef
    from exchange.errors import ReadOnlyTag, TagError

    def detail(tag: TagDef, exc: TagError) -> str:
        return str(exc).removeprefix(tag.where).removeprefix(": ").removesuffix("; nothing was written")

    for name, entry in config.command_tags.items():
        if entry.ack_tag is None:
            continue
        where = f"{config.source}: command_tags.{name}"
        try:
            tags.prepare_write([entry.ack_tag], [entry.ack_value])
        except ReadOnlyTag as exc:
            raise ConfigError(f"{where}.ack_tag: {str(exc).removesuffix('; nothing was written')}") from None
        except TagError as exc:
            tag = tags.tag(entry.ack_tag)
            kind = tag.data_type.value if tag.data_type is not None else "the device's type"
            bounds = "".join(f", {word} {bound:g}" for word, bound in (("min", tag.min_value), ("max", tag.max_value))
                             if bound is not None)
            unset = " (false is ack_value's default)" if entry.ack_value is False else ""
            raise ConfigError(f"{where}.ack_value: {shown(entry.ack_value)}{unset} does not fit tag {tag.path!r} "
                              f"({kind}{bounds}): {detail(tag, exc)}") from None


def preflight(runtime: Runtime) -> None:
    """Build and check the services ``runtime``'s config uses: every device's settings, the tag
    table (and each command tag's ``ack_value`` against its ``ack_tag``: :func:`check_command_tag_acks`),
    every database URL (an engine is built; no connection is opened), and that every schedule and
    trigger names a workflow of the apps with ``params`` that fit it (and every ``[record.WORKFLOW]``
    a workflow of the apps). ConfigError (or the driver's error) naming the first mistake."""
    config = runtime.config
    if config.tags or config.devices:
        from exchange._drivers.registry import validate_devices

        validate_devices(config.devices.values())
        check_command_tag_acks(config, runtime.services.get(TAGS))
    if config.databases:
        connections = runtime.services.get(DATABASES)
        for name in connections.names():
            connections.engine(name)  # builds the engine (no connection yet): a bad URL is named now
    known = set(runtime.registry.names())
    for section, entries in (("schedules", config.schedules), ("triggers", config.triggers)):
        for name, entry in entries.items():
            if entry.workflow not in known:
                raise ConfigError(f"{config.source}: {section}.{name}.workflow {entry.workflow!r} is not a workflow "
                                  f"of the apps ({', '.join(sorted(known)) or 'none loaded'})")
    from exchange._plant.params import config_params_problem

    params_problem = config_params_problem(config, runtime.registry)
    if params_problem is not None:
        raise ConfigError(f"{config.source}: {params_problem}")
    for name in config.record.workflows:
        if name not in known:
            raise ConfigError(f"{config.source}: record.{toml_key(name)} names no workflow of the apps "
                              f"({', '.join(sorted(known)) or 'none loaded'})")
    for name, entry in config.command_tags.items():
        if entry.workflow is not None and entry.workflow not in known:
            raise ConfigError(f"{config.source}: command_tags.{name}.workflow {entry.workflow!r} is not a workflow "
                              "of the apps")
