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

from exchange._config import Config
from exchange.errors import ConfigError, DatabaseError
from exchange.workflows._engine.resources import ServiceKey
from exchange.workflows._engine.services import service

if TYPE_CHECKING:
    from exchange._integrations.http import HttpClient
    from exchange._integrations.sql import SqlConnections
    from exchange._tags.service import TagService
    from exchange.workflows._engine.runtime import Runtime

__all__ = ["DATABASES", "HTTP", "TAGS", "databases", "http", "preflight", "tags"]


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


def preflight(runtime: Runtime) -> None:
    """Build and check the services ``runtime``'s config uses: every device's settings, the tag
    table, every database URL (an engine is built; no connection is opened), and that every
    schedule and trigger names a workflow of the apps with ``params`` that fit it. ConfigError (or
    the driver's error) naming the first mistake."""
    config = runtime.config
    if config.tags or config.devices:
        from exchange._drivers.registry import validate_settings

        for device in config.devices.values():
            validate_settings(device)
        runtime.services.get(TAGS)
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
    for name, entry in config.command_tags.items():
        if entry.workflow is not None and entry.workflow not in known:
            raise ConfigError(f"{config.source}: command_tags.{name}.workflow {entry.workflow!r} is not a workflow "
                              "of the apps")
