"""The parameters a schedule's or a trigger's run starts with, and their check at gateway start.

A run of ``[schedules.NAME]`` gets the config's ``params`` plus ``scheduled_at`` (the tick, ISO 8601
UTC) when the workflow takes it; a run of ``[triggers.NAME]`` gets ``params`` plus ``trigger_value``
and ``trigger_at`` when the workflow takes them. :func:`config_params_problem` checks the config's
``params`` against the workflow's parameters as every start does (names, required ones, each value
against its annotation) before the gateway runs anything, so a schedule that could never start its
run is refused at start naming the key, not logged as an ERROR on every tick.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exchange._arguments import json_problem
from exchange._config import Config
from exchange._engine import Registry, WorkflowDef

SCHEDULED_AT = "scheduled_at"
TRIGGER_VALUE = "trigger_value"
TRIGGER_AT = "trigger_at"
_SAMPLE_TIME = "2026-01-01T06:00:00.000+00:00"  # what scheduled_at and trigger_at look like


def schedule_params(params: Mapping[str, Any], definition: WorkflowDef, tick_iso: str) -> dict[str, Any]:
    """A schedule's run parameters: ``params`` and the tick when the workflow takes ``scheduled_at``."""
    given = dict(params)
    if SCHEDULED_AT in definition.signature.names:
        given[SCHEDULED_AT] = tick_iso
    return given


def trigger_params(params: Mapping[str, Any], definition: WorkflowDef, value: Any, at_iso: str) -> dict[str, Any]:
    """A trigger's run parameters: ``params``, and the tag's value and the edge's time when the
    workflow takes ``trigger_value`` / ``trigger_at``."""
    given = dict(params)
    names = definition.signature.names
    if TRIGGER_VALUE in names:
        given[TRIGGER_VALUE] = value
    if TRIGGER_AT in names:
        given[TRIGGER_AT] = at_iso
    return given


def _problems(where: str, params: Mapping[str, Any], definition: WorkflowDef, runs_with: dict[str, Any],
              supplied: tuple[str, ...]) -> list[str]:
    for key, value in params.items():
        problem = json_problem(value, f"{where}.params.{key}")
        if problem is not None:
            return [problem]
    found = definition.signature.problems(runs_with, supplied=supplied)
    return [p.said_of_key(f"{where}.params", definition.name) for p in found]


def config_params_problem(config: Config, registry: Registry) -> str | None:
    """Why a ``[schedules]`` or ``[triggers]`` entry's params cannot start its workflow (every
    problem, each naming its key: ``schedules.morning_cip.params.line expects int, got "ten"
    (str) (workflow 'plant.cip')``), or None when they all can. Entries of an unknown workflow are
    left to the caller."""
    found: list[str] = []
    known = set(registry.names())
    for name, schedule in config.schedules.items():
        if schedule.workflow in known:
            definition = registry.get(schedule.workflow)
            found += _problems(f"schedules.{name}", schedule.params, definition,
                               schedule_params(schedule.params, definition, _SAMPLE_TIME), ())
    for name, trigger in config.triggers.items():
        if trigger.workflow in known:
            definition = registry.get(trigger.workflow)
            runs_with = trigger_params(trigger.params, definition, None, _SAMPLE_TIME)
            runs_with.pop(TRIGGER_VALUE, None)  # the tag's value: its type is the tag's, not known here
            found += _problems(f"triggers.{name}", trigger.params, definition, runs_with, (TRIGGER_VALUE,))
    return "; ".join(found) or None
