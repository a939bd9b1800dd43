"""The simulated plant: one process line (``Line1``) with a tank, a mixer and a heater.

Pure Python and protocol-free: :class:`Plant` holds the state, clients' commands go in through
:meth:`Plant.write`, process values come out through :meth:`Plant.read`, and :meth:`Plant.tick`
advances the physics by ``dt_seconds``. The same sequence of writes and ticks always gives the same
values (no clock, no randomness), so tests can drive it step by step.

Points (paths without the tag provider; ``rw`` = written by clients, ``ro`` = owned by the plant)::

    Line1/Tank/Level               Float32  ro  %      0..100, rises with the inlet, falls with the outlet
    Line1/Tank/InletValve/Cmd      Boolean  rw         open command
    Line1/Tank/InletValve/Open     Boolean  ro         feedback: follows Cmd after valve_stroke_seconds
    Line1/Tank/OutletValve/Cmd     Boolean  rw
    Line1/Tank/OutletValve/Open    Boolean  ro
    Line1/Mixer/RunCmd             Boolean  rw         run command
    Line1/Mixer/Running            Boolean  ro         feedback: follows RunCmd after mixer_delay_seconds
    Line1/Mixer/Fault              Boolean  ro         true while a fault is injected; Running is then false
    Line1/Mixer/Speed              Int16    rw  rpm    0..1500 speed setpoint
    Line1/Heater/Enable            Boolean  rw
    Line1/Heater/Setpoint          Float32  rw  degC   0..95
    Line1/Heater/Temperature       Float32  ro  degC   moves toward Setpoint at heating_rate while enabled,
                                                        decays toward ambient (time constant) otherwise

Physics, per tick: actuator feedbacks are updated first (a command that has been stable for the
actuator's delay is reflected in its feedback), then the level integrates the flows through the valves
that are actually open (clamped to 0..100 %), then the temperature moves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exchange._values import DataType

LINE = "Line1"
AREAS = ("Tank", "Mixer", "Heater")


@dataclass(frozen=True)
class PlantPoint:
    """One point of the plant, before any protocol address is given to it."""

    path: str  # e.g. "Line1/Tank/Level" (no tag provider)
    data_type: DataType
    writable: bool  # True: a command/setpoint that clients write; False: a process value
    min_value: float | None = None
    max_value: float | None = None
    units: str = ""

    @property
    def area(self) -> str:
        """The plant area (``Tank``, ``Mixer``, ``Heater``) the point belongs to."""
        return self.path.split("/")[1]


def _p(path: str, data_type: DataType, writable: bool, **extra: Any) -> PlantPoint:
    return PlantPoint(f"{LINE}/{path}", data_type, writable, **extra)


POINTS: tuple[PlantPoint, ...] = (
    _p("Tank/Level", DataType.FLOAT32, False, min_value=0.0, max_value=100.0, units="%"),
    _p("Tank/InletValve/Cmd", DataType.BOOLEAN, True),
    _p("Tank/InletValve/Open", DataType.BOOLEAN, False),
    _p("Tank/OutletValve/Cmd", DataType.BOOLEAN, True),
    _p("Tank/OutletValve/Open", DataType.BOOLEAN, False),
    _p("Mixer/RunCmd", DataType.BOOLEAN, True),
    _p("Mixer/Running", DataType.BOOLEAN, False),
    _p("Mixer/Fault", DataType.BOOLEAN, False),
    _p("Mixer/Speed", DataType.INT16, True, min_value=0, max_value=1500, units="rpm"),
    _p("Heater/Enable", DataType.BOOLEAN, True),
    _p("Heater/Setpoint", DataType.FLOAT32, True, min_value=0.0, max_value=95.0, units="degC"),
    _p("Heater/Temperature", DataType.FLOAT32, False, units="degC"),
)
POINTS_BY_PATH: dict[str, PlantPoint] = {p.path: p for p in POINTS}


@dataclass(frozen=True)
class PlantParams:
    """Rates and delays of the physics; the defaults make a demo cycle last seconds, not minutes."""

    inflow_percent_per_second: float = 5.0
    outflow_percent_per_second: float = 4.0
    valve_stroke_seconds: float = 0.2
    mixer_delay_seconds: float = 0.5
    heating_rate_c_per_second: float = 2.0
    cooling_time_constant_seconds: float = 60.0
    ambient_c: float = 20.0
    initial_level_percent: float = 0.0
    initial_setpoint_c: float = 60.0
    initial_speed_rpm: int = 0


@dataclass
class Actuator:
    """A command with a feedback that follows it once the command has been stable for ``delay_seconds``."""

    delay_seconds: float
    command: bool = False
    feedback: bool = False
    faulted: bool = False
    _pending_seconds: float = 0.0

    def advance(self, dt_seconds: float) -> None:
        if self.faulted:
            self.feedback = False
            self._pending_seconds = 0.0
            return
        if self.command == self.feedback:
            self._pending_seconds = 0.0
            return
        self._pending_seconds += dt_seconds
        if self._pending_seconds >= self.delay_seconds:
            self.feedback = self.command
            self._pending_seconds = 0.0


@dataclass
class Plant:
    """The state of Line1; mutate commands with :meth:`write`, advance with :meth:`tick`.

    Not thread-safe: whoever shares one (the server ticker and a test) holds a lock around calls.
    """

    params: PlantParams = field(default_factory=PlantParams)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Back to the initial state: tank at its initial level, everything off, ambient temperature."""
        p = self.params
        self.level_percent = float(p.initial_level_percent)
        self.inlet = Actuator(p.valve_stroke_seconds)
        self.outlet = Actuator(p.valve_stroke_seconds)
        self.mixer = Actuator(p.mixer_delay_seconds)
        self.speed_rpm = int(p.initial_speed_rpm)
        self.heater_enabled = False
        self.setpoint_c = float(p.initial_setpoint_c)
        self.temperature_c = float(p.ambient_c)
        self.elapsed_seconds = 0.0

    @property
    def mixer_fault(self) -> bool:
        return self.mixer.faulted

    @mixer_fault.setter
    def mixer_fault(self, on: bool) -> None:
        """Inject (True) or clear (False) a mixer fault: Running drops and Fault is raised."""
        self.mixer.faulted = bool(on)
        if on:
            self.mixer.feedback = False

    def tick(self, dt_seconds: float) -> None:
        """Advance the physics by ``dt_seconds`` (>= 0)."""
        if not dt_seconds >= 0 or math.isinf(dt_seconds):
            raise ValueError(f"plant tick: dt_seconds must be a finite number >= 0, got {dt_seconds!r}")
        p = self.params
        for actuator in (self.inlet, self.outlet, self.mixer):
            actuator.advance(dt_seconds)
        rate = 0.0
        if self.inlet.feedback:
            rate += p.inflow_percent_per_second
        if self.outlet.feedback:
            rate -= p.outflow_percent_per_second
        self.level_percent = min(100.0, max(0.0, self.level_percent + rate * dt_seconds))
        if self.heater_enabled:
            step = p.heating_rate_c_per_second * dt_seconds
            gap = self.setpoint_c - self.temperature_c
            self.temperature_c = self.setpoint_c if abs(gap) <= step else self.temperature_c + math.copysign(
                step, gap
            )
        else:
            decay = math.exp(-dt_seconds / p.cooling_time_constant_seconds)
            self.temperature_c = p.ambient_c + (self.temperature_c - p.ambient_c) * decay
        self.elapsed_seconds += dt_seconds

    def read(self, path: str) -> Any:
        """The current value of any point (Python bool, int or float as its data type says)."""
        getter = _READERS.get(path)
        if getter is None:
            raise KeyError(f"plant has no point {path!r}")
        return getter(self)

    def snapshot(self) -> dict[str, Any]:
        """Every point's current value, by path."""
        return {path: getter(self) for path, getter in _READERS.items()}

    def write(self, path: str, value: Any) -> None:
        """Set a command or setpoint as a client would; values are coerced and clamped to the point's range."""
        point = POINTS_BY_PATH.get(path)
        if point is None:
            raise KeyError(f"plant has no point {path!r}")
        if not point.writable:
            raise ValueError(f"plant point {path} is read-only (a process value)")
        coerced = _coerce(point, value)
        _WRITERS[path](self, coerced)


def _coerce(point: PlantPoint, value: Any) -> Any:
    try:
        if point.data_type is DataType.BOOLEAN:
            return bool(value)
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"plant point {point.path}: cannot use {value!r} as {point.data_type.value}") from exc
    if not math.isfinite(number):
        raise ValueError(f"plant point {point.path}: {value!r} is not a finite number")
    if point.min_value is not None:
        number = max(point.min_value, number)
    if point.max_value is not None:
        number = min(point.max_value, number)
    return round(number) if point.data_type.is_integer else number


_READERS: dict[str, Callable[[Plant], Any]] = {
    f"{LINE}/Tank/Level": lambda pl: pl.level_percent,
    f"{LINE}/Tank/InletValve/Cmd": lambda pl: pl.inlet.command,
    f"{LINE}/Tank/InletValve/Open": lambda pl: pl.inlet.feedback,
    f"{LINE}/Tank/OutletValve/Cmd": lambda pl: pl.outlet.command,
    f"{LINE}/Tank/OutletValve/Open": lambda pl: pl.outlet.feedback,
    f"{LINE}/Mixer/RunCmd": lambda pl: pl.mixer.command,
    f"{LINE}/Mixer/Running": lambda pl: pl.mixer.feedback,
    f"{LINE}/Mixer/Fault": lambda pl: pl.mixer.faulted,
    f"{LINE}/Mixer/Speed": lambda pl: pl.speed_rpm,
    f"{LINE}/Heater/Enable": lambda pl: pl.heater_enabled,
    f"{LINE}/Heater/Setpoint": lambda pl: pl.setpoint_c,
    f"{LINE}/Heater/Temperature": lambda pl: pl.temperature_c,
}

_WRITERS: dict[str, Callable[[Plant, Any], None]] = {
    f"{LINE}/Tank/InletValve/Cmd": lambda pl, v: setattr(pl.inlet, "command", v),
    f"{LINE}/Tank/OutletValve/Cmd": lambda pl, v: setattr(pl.outlet, "command", v),
    f"{LINE}/Mixer/RunCmd": lambda pl, v: setattr(pl.mixer, "command", v),
    f"{LINE}/Mixer/Speed": lambda pl, v: setattr(pl, "speed_rpm", v),
    f"{LINE}/Heater/Enable": lambda pl, v: setattr(pl, "heater_enabled", v),
    f"{LINE}/Heater/Setpoint": lambda pl, v: setattr(pl, "setpoint_c", v),
}
