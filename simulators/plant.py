"""The demo line ``Line1`` (tank, mixer, heater): its points, and its model for the simulator.

The demo is an ordinary simulated config (:mod:`simulators.config_text` writes it: devices, tags and
a ``[simulation]`` section) plus this module as its model: ``[simulation] model = "simulators.plant"``.
Valve and mixer feedbacks are ``follows`` of their commands; :func:`step` does the rest.

Points (paths without the tag provider; ``rw`` = written by clients, ``ro`` = owned by the plant)::

    Line1/Tank/Level               Float32  ro  %      0..100, rises with the inlet, falls with the outlet
    Line1/Tank/InletValve/Cmd      Boolean  rw         open command
    Line1/Tank/InletValve/Open     Boolean  ro         feedback: follows Cmd after valve_stroke_seconds
    Line1/Tank/OutletValve/Cmd     Boolean  rw
    Line1/Tank/OutletValve/Open    Boolean  ro
    Line1/Mixer/RunCmd             Boolean  rw         run command
    Line1/Mixer/Running            Boolean  ro         feedback: follows RunCmd after mixer_delay_seconds;
                                                        false while Fault is (a tripped mixer stays off
                                                        until RunCmd is given again)
    Line1/Mixer/Fault              Boolean  ro         a fault (tests raise it: plant_faults.mixer_fault())
    Line1/Mixer/Speed              Int16    rw  rpm    0..1500 speed setpoint
    Line1/Heater/Enable            Boolean  rw
    Line1/Heater/Setpoint          Float32  rw  degC   0..95
    Line1/Heater/Temperature       Float32  ro  degC   moves toward Setpoint at heating_rate while enabled,
                                                        decays toward ambient (time constant) otherwise

Each step (after the follows): the level integrates the flows through the valves that are open
(their feedbacks), clamped to 0..100 %; the temperature moves; a fault holds Running false.

When OPC UA serves the mixer, the demo's config also has an array tag and an object whose method
:func:`set_speed` answers (``SetSpeed``; see :mod:`simulators.opcua_extras`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from exchange._values import DataType

LINE = "Line1"
AREAS = ("Tank", "Mixer", "Heater")
PROVIDER = "plant"
SPEED_MIN_RPM, SPEED_MAX_RPM = 0, 1500


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
    _p("Mixer/Speed", DataType.INT16, True, min_value=SPEED_MIN_RPM, max_value=SPEED_MAX_RPM, units="rpm"),
    _p("Heater/Enable", DataType.BOOLEAN, True),
    _p("Heater/Setpoint", DataType.FLOAT32, True, min_value=0.0, max_value=95.0, units="degC"),
    _p("Heater/Temperature", DataType.FLOAT32, False, units="degC"),
)
POINTS_BY_PATH: dict[str, PlantPoint] = {p.path: p for p in POINTS}

# which follows the demo's [simulation] has: feedback -> (command, PlantParams field with its delay)
FOLLOWS: dict[str, tuple[str, str]] = {
    f"{LINE}/Tank/InletValve/Open": (f"{LINE}/Tank/InletValve/Cmd", "valve_stroke_seconds"),
    f"{LINE}/Tank/OutletValve/Open": (f"{LINE}/Tank/OutletValve/Cmd", "valve_stroke_seconds"),
    f"{LINE}/Mixer/Running": (f"{LINE}/Mixer/RunCmd", "mixer_delay_seconds"),
}


def tag(path: str) -> str:
    """The demo's tag path of plant point ``path`` (``[plant]Line1/...``)."""
    return f"[{PROVIDER}]{path}"


@dataclass(frozen=True)
class PlantParams:
    """The demo line's rates, delays and initial values; the defaults make a cycle last seconds.

    ``inflow_percent_per_second`` / ``outflow_percent_per_second``: how fast an open inlet fills
    and an open outlet drains the tank; ``valve_stroke_seconds`` / ``mixer_delay_seconds``: how long
    a feedback takes to follow its command (the ``delay_ms`` of its ``follows``);
    ``heating_rate_c_per_second``: how fast an enabled heater moves the temperature toward its
    setpoint; ``cooling_time_constant_seconds`` / ``ambient_c``: how a disabled one cools;
    ``initial_*``: where the level, the setpoint and the speed start (the temperature starts at
    ``ambient_c``). Pass one to ``exchange_plant``'s ``sim_plant_params`` fixture, or to
    :class:`simulators.plant_servers.PlantServers`.
    """

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

    def initial_values(self) -> dict[str, Any]:
        """The points that do not start at 0/False, by plant path."""
        return {
            f"{LINE}/Tank/Level": float(self.initial_level_percent),
            f"{LINE}/Mixer/Speed": int(self.initial_speed_rpm),
            f"{LINE}/Heater/Setpoint": float(self.initial_setpoint_c),
            f"{LINE}/Heater/Temperature": float(self.ambient_c),
        }


class LineModel:
    """The physics of Line1 as a simulator model: ``step(plant, dt_s)`` with these ``params``."""

    def __init__(self, params: PlantParams | None = None) -> None:
        self.params = params or PlantParams()

    def step(self, plant: Any, dt_s: float) -> None:
        p = self.params
        rate = 0.0
        if plant[tag(f"{LINE}/Tank/InletValve/Open")]:
            rate += p.inflow_percent_per_second
        if plant[tag(f"{LINE}/Tank/OutletValve/Open")]:
            rate -= p.outflow_percent_per_second
        if rate:
            level = plant[tag(f"{LINE}/Tank/Level")]
            plant[tag(f"{LINE}/Tank/Level")] = min(100.0, max(0.0, level + rate * dt_s))

        if plant[tag(f"{LINE}/Mixer/Fault")]:
            plant[tag(f"{LINE}/Mixer/Running")] = False

        temperature = plant[tag(f"{LINE}/Heater/Temperature")]
        if plant[tag(f"{LINE}/Heater/Enable")]:
            setpoint = plant[tag(f"{LINE}/Heater/Setpoint")]
            move = p.heating_rate_c_per_second * dt_s
            gap = setpoint - temperature
            temperature = setpoint if abs(gap) <= move else temperature + math.copysign(move, gap)
        else:
            decay = math.exp(-dt_s / p.cooling_time_constant_seconds)
            temperature = p.ambient_c + (temperature - p.ambient_c) * decay
        plant[tag(f"{LINE}/Heater/Temperature")] = temperature


_DEFAULT = LineModel()


def step(plant: Any, dt_s: float) -> None:
    """The demo line's model with the default :class:`PlantParams` (``[simulation] model``)."""
    _DEFAULT.step(plant, dt_s)


def set_speed(plant: Any, speed: int) -> int:
    """``Mixer/Control.SetSpeed(Speed) -> Previous`` (``[simulation.tags] methods ... call``): set the
    speed setpoint as a client's write would and return the one it replaced. Refused with
    BadOutOfRange outside 0..1500 rpm and BadInvalidState while the mixer is in fault (then nothing
    changes)."""
    from simulators.servers.opcua_methods import MethodRefused  # asyncua: only where OPC UA serves

    if not SPEED_MIN_RPM <= speed <= SPEED_MAX_RPM:
        raise MethodRefused("BadOutOfRange", f"speed {speed} rpm is outside {SPEED_MIN_RPM}..{SPEED_MAX_RPM}")
    if plant[tag(f"{LINE}/Mixer/Fault")]:
        raise MethodRefused("BadInvalidState", "the mixer is in fault")
    previous = int(plant[tag(f"{LINE}/Mixer/Speed")])
    plant[tag(f"{LINE}/Mixer/Speed")] = speed
    return previous
