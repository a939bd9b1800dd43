"""The simulated plant's values and how they move: ``follows`` and the model, on a simulated clock.

Pure Python, no servers and no threads: :class:`PlantState` holds one value per point (by point id,
see :mod:`simulators.spec`), takes values that clients wrote (:meth:`PlantState.observe`), and
:meth:`PlantState.step` advances the simulated clock by ``dt_s``:

1. each ``follows`` whose delay has run out since a change of its source gives its follower the
   value the source took then (a feedback takes its command's value ``delay_ms`` after each change;
   changes closer together than the delay are all played, each ``delay_ms`` late);
2. the model's ``step(plant, dt_s)`` runs: ``plant[path]`` reads and writes points by tag path.
   Its writes are converted to the point's type when made (a wrong one raises in the model, naming
   the tag) and applied only when ``step`` returns: a model that raises changes nothing, its error
   (the model's line and the tag) is kept in :attr:`PlantState.model_errors` and logged once, and
   the next step calls it again.

Frozen points (a stuck sensor, a command the program ignores) keep showing their frozen value to
clients while the plant's own value goes on: the state keeps both (:attr:`PlantState.shown`).

A status word and its bits (Modbus ``HR10`` and ``HR10.3``, one register group of
:mod:`simulators.register_bits`) are one value to the plant: setting or observing one changes the
others at once (their followers see the change too), so the model never reads a word and a bit of
it that disagree, and what is sent to the server is consistent.

Time is kept in integer microseconds, so delays are exact multiples of ticks, not float sums.
"""

from __future__ import annotations

import builtins
import difflib
import logging
import math
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from exchange._tags.paths import parse_tag_path
from exchange._values import DataType
from exchange._values.convert import coerce_value, to_bool
from exchange.errors import TagError
from simulators.phases import PhaseMachine
from simulators.spec import PlantSpec, PointSpec, follow_value

log = logging.getLogger(__name__)

StepFunction = Callable[["PlantView", float], Any]
MODEL_ERRORS_KEPT = 100


class UnknownPoint(KeyError):
    """``plant[path]`` with a path that is not a tag of the config; the message names it."""

    def __str__(self) -> str:
        return str(self.args[0])


class PointValueError(ValueError):
    """A value that does not fit the point it is written to; the message names the tag."""


def to_point_value(point: PointSpec, value: Any, where: str) -> Any:
    """``value`` for ``point`` as the plant writes it: looser than a gateway's write (a model's
    arithmetic gives 1.0 for a count, 0/1 for a bit): floats are rounded for integer types, 0 and 1
    are booleans for a Boolean; PointValueError naming ``where`` for anything else that does not fit.
    """
    if point.array:
        if not isinstance(value, (list, tuple)):
            raise PointValueError(f"{where}: an array tag takes a list, got {type(value).__name__} {value!r}")
        if point.length is not None and len(value) != point.length:
            raise PointValueError(f"{where}: the array holds {point.length} elements, got a list of {len(value)}")
        return [to_point_value(replace(point, array=False), item, f"{where} element [{index}]")
                for index, item in enumerate(value)]
    data_type = point.data_type
    try:
        if data_type is DataType.BOOLEAN:
            return to_bool(value, where, numbers=True)
        if data_type.is_integer and isinstance(value, float) and math.isfinite(value):
            value = round(value)
        return coerce_value(value, data_type, where, bool_numbers=True)
    except TagError as exc:
        raise PointValueError(str(exc)) from None


class PlantView:
    """What a model's ``step(plant, dt_s)`` gets: ``plant[path]`` reads and writes points by tag path
    (any spelling the config accepts: the provider and names ignore case); ``path in plant``;
    ``plant.time_s`` is the simulated time since the start, ``plant.dt_s`` this step's length."""

    def __init__(self, state: PlantState, dt_s: float) -> None:
        self._state = state
        self._staged: dict[str, Any] = {}
        self.dt_s = dt_s
        self.time_s = state.time_s

    def __getitem__(self, path: str) -> Any:
        point_id = self._state.resolve(path)
        value = self._staged[point_id] if point_id in self._staged else self._state.values[point_id]
        return list(value) if isinstance(value, list) else value  # a copy: changes go through plant[path] = ...

    @property
    def staged(self) -> dict[str, Any]:
        """Point id -> the value the model set (applied when it returns)."""
        return self._staged

    def __setitem__(self, path: str, value: Any) -> None:
        point = self._state.spec.points[self._state.resolve(path)]
        self._staged[point.id] = to_point_value(point, value, f"tag {path!r} ({point.data_type.value})")

    def __contains__(self, path: object) -> bool:
        try:
            self._state.resolve(path)  # type: ignore[arg-type]
        except UnknownPoint:
            return False
        return True

    def get(self, path: str, default: Any = None) -> Any:
        return self[path] if path in self else default

    def paths(self) -> Iterator[str]:
        """Every tag path of the config."""
        return iter(self._state.spec.point_of_tag)


class PlantState:
    """The values of a plant's points, advanced by :meth:`step`; not thread-safe (the engine locks)."""

    def __init__(self, spec: PlantSpec, model: StepFunction | None = None, model_file: str | None = None) -> None:
        self.spec = spec
        self.model = model
        self.model_file = model_file  # to find the model's own line in a traceback
        self._paths: dict[str, str] = {}
        for path, point_id in spec.point_of_tag.items():
            self._paths[path] = point_id
            self._paths[parse_tag_path(path).key] = point_id
        self._by_source: dict[str, list[int]] = {}
        for index, follow in enumerate(spec.follows):
            self._by_source.setdefault(follow.source, []).append(index)
        self.model_errors: list[str] = []
        self.machines: list[PhaseMachine] = []  # the PLC side of [simulation.phases]: the engine adds them
        self.reset()

    def reset(self) -> None:
        """Back to the initial values at time 0; nothing pending, nothing frozen, no model error kept."""
        self.values: dict[str, Any] = {pid: point.initial for pid, point in self.spec.points.items()}
        self.shown: dict[str, Any] = {}  # frozen point id -> the value clients see
        self.time_us = 0
        self._pending: list[deque[tuple[int, Any]]] = [deque() for _ in self.spec.follows]
        self._changed: builtins.set[str] = builtins.set()
        self.model_errors.clear()
        self._last_error: str | None = None
        for machine in self.machines:
            machine.reset()
        self.prime_machines()

    def prime_machines(self) -> None:
        """Each phase's state tag shows its machine's state (Idle) from the start, not 0."""
        for machine in self.machines:
            self._write_tag(machine.phase.state, machine.state_number)

    @property
    def time_s(self) -> float:
        return self.time_us / 1e6

    def resolve(self, path: str) -> str:
        """The point id of tag ``path``; UnknownPoint naming it (and the closest tag) otherwise."""
        found = self._paths.get(path)
        if found is not None:
            return found
        try:
            key = parse_tag_path(path).key
        except TagError as exc:
            raise UnknownPoint(f"unknown tag {path!r}: {exc}") from None
        found = self._paths.get(key)
        if found is None:
            close = difflib.get_close_matches(str(path), list(self.spec.point_of_tag), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UnknownPoint(f"unknown tag {path!r}: not in the config's [tags]{hint}")
        self._paths[path] = found
        return found

    # -- changes ------------------------------------------------------------------------------------

    def set(self, point_id: str, value: Any, *, late_us: int = 0) -> None:
        """The plant changes a point (a test's write, a follow, the model); already converted.
        ``late_us``: how long after the last step it happened (for the delay of its followers)."""
        if self.values[point_id] == value and type(self.values[point_id]) is type(value):
            return
        self.values[point_id] = value
        self._changed.add(point_id)
        self._record(point_id, value, late_us)
        for partner, partner_value in self._spread(point_id).items():
            self.values[partner] = partner_value
            self._changed.add(partner)
            self._record(partner, partner_value, late_us)

    def observe(self, point_id: str, value: Any) -> None:
        """A client changed a point on its server: the plant takes the value (not sent back)."""
        if point_id in self.shown:
            return  # a frozen point: the program does not see what clients write
        point = self.spec.points[point_id]
        try:
            value = to_point_value(point, value, f"point {point.paths[0]!r}")
        except PointValueError as exc:
            self._report(f"ignored a value a client wrote: {exc}")
            return
        if any(isinstance(v, float) and not math.isfinite(v) for v in (value if isinstance(value, list) else [value])):
            return
        if self.values[point_id] == value and type(self.values[point_id]) is type(value):
            return  # already the plant's (a word's partner, taken with it)
        self.values[point_id] = value
        self._record(point_id, value)
        for partner, partner_value in self._spread(point_id).items():  # the server holds them already
            self.values[partner] = partner_value
            self._record(partner, partner_value)

    def _spread(self, point_id: str) -> dict[str, Any]:
        """The values a word's bits, or a bit's word and sibling bits, take after ``point_id`` changed."""
        registers = self.spec.registers
        word = registers.word(point_id)
        if word is None:
            return {}
        return registers.spread(point_id, self.values, self.spec.points[word].data_type)

    def _record(self, point_id: str, value: Any, late_us: int = 0) -> None:
        for index in self._by_source.get(point_id, ()):
            follow = self.spec.follows[index]
            self._pending[index].append((self.time_us + late_us + follow.delay_ms * 1000, value))

    def take_changes(self) -> builtins.set[str]:  # ``set`` is a method here
        """The points the plant changed since the last call (to be sent to their servers)."""
        changed, self._changed = self._changed, set()
        return changed

    def freeze(self, point_id: str, shown: Any) -> None:
        """Clients see ``shown`` (already converted) until :meth:`unfreeze`; the plant goes on."""
        self.shown[point_id] = shown

    def unfreeze(self, point_id: str) -> None:
        self.shown.pop(point_id, None)

    # -- the step -----------------------------------------------------------------------------------

    def step(self, dt_s: float) -> None:
        """Advance the simulated clock by ``dt_s`` (>= 0), then :meth:`run` the step."""
        self.advance_clock(dt_s)
        self.run(dt_s)

    def advance_clock(self, dt_s: float) -> None:
        """Move the simulated clock only: values a client wrote during the last ``dt_s`` are then
        observed at the end of it (late rather than early: a follower never moves before its delay)."""
        if not (dt_s >= 0 and math.isfinite(dt_s)):
            raise ValueError(f"a simulation step must be a finite number of seconds >= 0, got {dt_s!r}")
        self.time_us += round(dt_s * 1e6)

    def run(self, dt_s: float) -> None:
        """The step that ends now: due follows, the phases' PLC logic, then the model over ``dt_s``."""
        for index, follow in enumerate(self.spec.follows):
            pending = self._pending[index]
            due = None
            while pending and pending[0][0] <= self.time_us:
                due = pending.popleft()
            if due is not None:
                point = self.spec.points[follow.follower]
                self.set(follow.follower, follow_value(due[1], point.data_type))
        for machine in self.machines:
            machine.step(dt_s, self._read_tag, self._write_tag)
        if self.model is not None:
            self._run_model(dt_s)

    def _read_tag(self, path: str) -> Any:
        return self.values[self.resolve(path)]

    def _write_tag(self, path: str, value: Any) -> None:
        point_id = self.resolve(path)
        point = self.spec.points[point_id]
        self.set(point_id, to_point_value(point, value, f"point {point.paths[0]!r}"))

    def _run_model(self, dt_s: float) -> None:
        assert self.model is not None
        view = PlantView(self, dt_s)
        try:
            self.model(view, dt_s)
        except Exception as exc:  # noqa: BLE001 - any model error is reported; the plant serves on
            self._report(self._describe(exc))
            return
        self._last_error = None
        for point_id, value in view.staged.items():
            self.set(point_id, value)

    def describe(self, exc: BaseException) -> str:
        """An error of the model's code: its line in the model, and what it was."""
        return self._describe(exc)

    def report(self, message: str) -> None:
        """Keep and log ``message`` as a model error (see :meth:`_report`)."""
        self._report(message)

    def _describe(self, exc: BaseException) -> str:
        frames = traceback.extract_tb(exc.__traceback__)
        own = [f for f in frames if self.model_file is not None and f.filename == self.model_file]
        frame = (own or frames[1:] or frames)[-1]
        where = f"model {frame.filename} line {frame.lineno} (in {frame.name})"
        what = str(exc) if isinstance(exc, (UnknownPoint, PointValueError)) else f"{type(exc).__name__}: {exc}"
        return f"{where}: {what}; the plant keeps its last values"

    def _report(self, message: str) -> None:
        """Keep ``message`` and log it, once while it repeats (a model fails at every tick)."""
        if message == self._last_error:
            return
        self._last_error = message
        log.error("simulated plant: %s", message)
        if len(self.model_errors) < MODEL_ERRORS_KEPT:
            self.model_errors.append(message)
