"""``[simulation]``: how ``exchange simulate --from-config`` and the ``exchange_sim`` fixture play the
plant of this config (see simulators/README.md). A gateway ignores it, but it is checked like every
other table when the config is loaded, so a typo here is found by any command:

    [simulation]
    tick_ms = 100                           # how often the simulated plant steps
    model = "sim/line1.py"                  # a file (relative to this config) or a module name with
                                            # step(plant, dt_s)
    [simulation.tags."[site]Area9/Valve3/Open"]
    follows = "[site]Area9/Valve3/Cmd"      # takes that tag's value ...
    delay_ms = 300                          # ... this long after it changes
    [simulation.tags."[site]Area9/Silo/Level"]
    initial = 62.5
    type = "Float32"                        # served type of a tag whose device says it (OPC UA)
    [simulation.tags."[site]Area9/Mixer/Control".methods.SetSpeed]
    inputs = ["Speed: Int16"]               # an OPC UA object's method: its arguments, in order,
    outputs = ["Previous: Int16"]           # "Name: Type" ("Int16[]" for an array) ...
    call = "set_speed"                      # ... and the model's function that answers it

Checked here: the keys (unknown ones refused with the closest known one), their value types and
ranges, and that every tag named is a configured tag. Whether a value fits the tag's type, and whether
the simulator can serve the tag at all, is the simulator's to check when it starts (simulators/spec.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from exchange._config_keys import closest, refuse_unknown
from exchange._config_keys import describe_value as _kind
from exchange._values import parse_data_type
from exchange.errors import ConfigError, TagError

SIMULATION_KEYS = ("tick_ms", "model", "tags", "phases")
SIMULATION_PHASE_KEYS = ("duration_s", "transition_ms", "reports")
SIMULATION_TAG_KEYS = ("initial", "type", "follows", "delay_ms", "methods")
SIMULATION_METHOD_KEYS = ("inputs", "outputs", "call")
TICK_MS_RANGE = (1, 60_000)
DELAY_MS_MAX = 86_400_000  # a day: a feedback slower than that is a typo


Initial = bool | int | float | str


@dataclass(frozen=True)
class SimulatedArgument:
    """One argument of a simulated method: ``"Speed: Int16"`` (``"Int16[]"``: an array)."""

    name: str
    data_type: str  # the type's name, without ``[]``
    array: bool = False


@dataclass(frozen=True)
class SimulatedMethodConfig:
    """One ``[simulation.tags."PATH".methods.NAME]`` table: the method ``name`` of the object the tag
    addresses, its arguments in order, and ``call``, the function of the model that answers it."""

    name: str
    inputs: tuple[SimulatedArgument, ...]
    outputs: tuple[SimulatedArgument, ...]
    call: str


@dataclass(frozen=True)
class SimulatedTagConfig:
    """One ``[simulation.tags."PATH"]`` table: ``initial`` None means the type's zero (0, False, "");
    a list for an array tag. A tag with ``methods`` is an object (OPC UA), not a value."""

    path: str
    initial: Initial | list[Initial] | None = None
    data_type: str | None = None  # the type to serve where the tag has none (the device would say it)
    follows: str | None = None
    delay_ms: int = 0
    methods: Mapping[str, SimulatedMethodConfig] = field(default_factory=dict)


@dataclass(frozen=True)
class SimulatedPhaseConfig:
    """One ``[simulation.phases."UNIT/PHASE"]`` table: the PLC side of a configured phase runs for
    ``duration_s``, each transient state lasts ``transition_ms``, and at Complete the ``reports``
    (report name -> value) are written to the phase's report tags (simulators/phases.py)."""

    name: str
    duration_s: float = 5.0
    transition_ms: int = 500
    reports: Mapping[str, Initial] = field(default_factory=dict)


@dataclass(frozen=True)
class SimulationConfig:
    """``[simulation]``; ``model`` is an absolute file path, a module name, or None (no model)."""

    tick_ms: int = 100
    model: str | None = None
    tags: Mapping[str, SimulatedTagConfig] = field(default_factory=dict)
    phases: Mapping[str, SimulatedPhaseConfig] = field(default_factory=dict)


def model_is_file(model: str) -> bool:
    """A ``model`` naming a Python file (``sim/line1.py``), as opposed to a module (``sim.line1``)."""
    return model.endswith(".py") or "/" in model or "\\" in model


def _model(table: Mapping[str, Any], where: str, base_dir: Path) -> str | None:
    model = table.get("model")
    if model is None:
        return None
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{where}.model must be a Python file (sim/line1.py) or a module name, got {_kind(model)}")
    model = model.strip()
    if model_is_file(model):
        return str(Path(model) if Path(model).is_absolute() else (base_dir / model).resolve())
    if not all(part.isidentifier() for part in model.split(".")):
        raise ConfigError(f"{where}.model {model!r} is neither a .py file nor a module name (a.b.c)")
    return model


def _known(path: Any, where: str, tags: Mapping[str, Any]) -> str:
    if not isinstance(path, str) or path not in tags:
        hint = closest(path, tags) if isinstance(path, str) else None
        suggestion = f" (did you mean {hint!r}?)" if hint else ""
        raise ConfigError(f"{where}: {path!r} is not a configured tag{suggestion}")
    return path


def _initial(initial: Any, where: str) -> Initial | list[Initial]:
    items = initial if isinstance(initial, list) else [initial]
    for item in items:
        if not isinstance(item, (bool, int, float, str)):
            raise ConfigError(f"{where}.initial must be a boolean, number or string, or a list of them for an "
                              f"array tag, got {_kind(initial)}")
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(f"{where}.initial must be a finite number, got {_kind(initial)}")
    return list(initial) if isinstance(initial, list) else initial


def _arguments(value: Any, where: str) -> tuple[SimulatedArgument, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f'{where} must be a list of "Name: Type" strings, e.g. ["Speed: Int16"], got {_kind(value)}')
    found: list[SimulatedArgument] = []
    for item in value:
        name, colon, type_name = (part.strip() for part in item.partition(":"))
        if not colon or not name or not type_name:
            raise ConfigError(f'{where}: {item!r} is not "Name: Type" (e.g. "Speed: Int16", "Profile: Int16[]")')
        array = type_name.endswith("[]")
        type_name = type_name[:-2].strip() if array else type_name
        try:
            data_type = parse_data_type(type_name)
        except TagError as exc:
            raise ConfigError(f"{where}: argument {name!r}: {exc}") from exc
        if any(arg.name == name for arg in found):
            raise ConfigError(f"{where}: argument {name!r} is named twice")
        found.append(SimulatedArgument(name, data_type.value, array))
    return tuple(found)


def _methods(value: Any, where: str) -> dict[str, SimulatedMethodConfig]:
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"{where} must hold tables [{where.split(': ', 1)[-1]}.NAME], got {_kind(value)}")
    methods: dict[str, SimulatedMethodConfig] = {}
    for name, table in value.items():
        at = f"{where}.{name}"
        if not isinstance(table, dict):
            raise ConfigError(f"{at} must be a table, got {_kind(table)}")
        refuse_unknown(table, SIMULATION_METHOD_KEYS, at)
        call = table.get("call")
        if not isinstance(call, str) or not call.isidentifier():
            raise ConfigError(f"{at}.call must name a function of the [simulation] model (set_speed), got "
                              f"{_kind(call)}")
        methods[name] = SimulatedMethodConfig(name, _arguments(table.get("inputs", []), f"{at}.inputs"),
                                              _arguments(table.get("outputs", []), f"{at}.outputs"), call)
    return methods


def _tag(path: str, table: Any, where: str, tags: Mapping[str, Any]) -> SimulatedTagConfig:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, got {_kind(table)}")
    refuse_unknown(table, SIMULATION_TAG_KEYS, where)
    methods = _methods(table["methods"], f"{where}.methods") if "methods" in table else {}
    if methods and set(table) - {"methods"}:
        others = ", ".join(sorted(set(table) - {"methods"}))
        raise ConfigError(f"{where}: a tag with methods is an object, not a value: {others} cannot go with methods")
    initial = table.get("initial")
    if initial is not None:
        initial = _initial(initial, where)
    data_type = table.get("type")
    if data_type is not None and (not isinstance(data_type, str) or not data_type.strip()):
        raise ConfigError(f"{where}.type must be a data type name such as \"Float32\", got {_kind(data_type)}")
    follows = table.get("follows")
    if follows is not None:
        follows = _known(follows, f"{where}.follows", tags)
        if follows == path:
            raise ConfigError(f"{where}.follows names the tag itself")
    delay = table.get("delay_ms", 0)
    if isinstance(delay, bool) or not isinstance(delay, int) or not 0 <= delay <= DELAY_MS_MAX:
        raise ConfigError(f"{where}.delay_ms must be an integer from 0 to {DELAY_MS_MAX}, got {_kind(delay)}")
    if "delay_ms" in table and follows is None:
        raise ConfigError(f"{where}.delay_ms needs follows (the tag whose changes it delays)")
    return SimulatedTagConfig(path=path, initial=initial, data_type=data_type, follows=follows, delay_ms=delay,
                              methods=methods)


def _refuse_follows_cycles(found: Mapping[str, SimulatedTagConfig], where: str) -> None:
    """ConfigError naming the tags of the first ``follows`` loop (A follows B follows A): each would
    wait on the other, so none ever takes a value from outside the loop."""
    done: set[str] = set()
    for start in found:
        chain: list[str] = []
        path: str | None = start
        while path is not None and path not in done:
            if path in chain:
                loop = chain[chain.index(path):] + [path]
                raise ConfigError(f'{where}.tags."{loop[0]}".follows: a loop, ' + " follows ".join(
                    repr(p) for p in loop) + ": a tag of a loop never takes a value from outside it; "
                    "one of them must follow something else or nothing")
            chain.append(path)
            entry = found.get(path)
            path = entry.follows if entry is not None else None
        done.update(chain)


def _phases(value: Any, where: str, phases: Mapping[str, Any]) -> dict[str, SimulatedPhaseConfig]:
    if not isinstance(value, dict):
        raise ConfigError(f'{where}.phases must hold tables [simulation.phases."UNIT/PHASE"], got {_kind(value)}')
    found: dict[str, SimulatedPhaseConfig] = {}
    for name, table in value.items():
        at = f'{where}.phases."{name}"'
        if not isinstance(table, dict):
            raise ConfigError(f"{at} must be a table, got {_kind(table)}")
        refuse_unknown(table, SIMULATION_PHASE_KEYS, at)
        phase = phases.get(name)
        if phase is None:
            configured = ", ".join(sorted(phases)) or "none"
            raise ConfigError(f'{at}: no [phases."{name}"] to play (configured: {configured})')
        duration = table.get("duration_s", SimulatedPhaseConfig.duration_s)
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not 0 < duration <= 86_400:
            raise ConfigError(f"{at}.duration_s must be a number of seconds above 0 (at most a day), got "
                              f"{_kind(duration)}")
        transition = table.get("transition_ms", SimulatedPhaseConfig.transition_ms)
        if isinstance(transition, bool) or not isinstance(transition, int) or not 0 <= transition <= 600_000:
            raise ConfigError(f"{at}.transition_ms must be an integer from 0 to 600000, got {_kind(transition)}")
        reports = table.get("reports", {})
        if not isinstance(reports, dict):
            raise ConfigError(f"{at}.reports must be a table of report name = value, got {_kind(reports)}")
        for report, report_value in reports.items():
            if report not in phase.reports:
                known = ", ".join(sorted(phase.reports)) or "none"
                raise ConfigError(f'{at}.reports.{report}: the phase has no such report (its reports: {known})')
            _initial(report_value, f"{at}.reports.{report}")
        found[name] = SimulatedPhaseConfig(name=name, duration_s=float(duration), transition_ms=transition,
                                           reports=dict(reports))
    return found


def simulation(raw: Mapping[str, Any], source: str, base_dir: Path, tags: Mapping[str, Any],
               phases: Mapping[str, Any] | None = None) -> SimulationConfig:
    """Validate ``[simulation]`` of ``raw`` (keys already expanded); ConfigError naming the key."""
    table = raw.get("simulation", {})
    where = f"{source}: simulation"
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [simulation] must be a table, got {_kind(table)}")
    refuse_unknown(table, SIMULATION_KEYS, where)
    tick = table.get("tick_ms", SimulationConfig.tick_ms)
    low, high = TICK_MS_RANGE
    if isinstance(tick, bool) or not isinstance(tick, int) or not low <= tick <= high:
        raise ConfigError(f"{where}.tick_ms must be an integer from {low} to {high}, got {_kind(tick)}")
    tag_tables = table.get("tags", {})
    if not isinstance(tag_tables, dict):
        raise ConfigError(f'{where}.tags must hold tables [simulation.tags."PATH"], got {_kind(tag_tables)}')
    found: dict[str, SimulatedTagConfig] = {}
    for path, tag_table in tag_tables.items():
        tag_where = f'{where}.tags."{path}"'
        _known(path, tag_where, tags)
        found[path] = _tag(path, tag_table, tag_where, tags)
    _refuse_follows_cycles(found, where)
    model = _model(table, where, base_dir)
    with_methods = [path for path, tag in found.items() if tag.methods]
    if with_methods and model is None:
        raise ConfigError(f'{where}.tags."{with_methods[0]}".methods: a method is answered by a function of the '
                          "model: give [simulation] a model")
    return SimulationConfig(tick_ms=tick, model=model, tags=found,
                            phases=_phases(table.get("phases", {}), where, phases or {}))
