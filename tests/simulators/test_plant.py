"""The demo line's model alone: its config and ``simulators.plant`` stepped by the plant state, no servers.

The demo is an ordinary simulated config (valve and mixer feedbacks are ``follows`` of their
commands) plus its model; these tests drive it step by step through the same ``PlantState`` every
simulated config uses.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from exchange._config import config_from_dict
from simulators.config_text import line1_document
from simulators.plant import POINTS, LineModel, PlantParams, tag
from simulators.protocol_map import assign_areas
from simulators.spec import build_spec
from simulators.state import PlantState, PointValueError, UnknownPoint, to_point_value

LEVEL = "Line1/Tank/Level"
INLET = "Line1/Tank/InletValve/Cmd"
INLET_OPEN = "Line1/Tank/InletValve/Open"
OUTLET = "Line1/Tank/OutletValve/Cmd"
OUTLET_OPEN = "Line1/Tank/OutletValve/Open"
PORTS = {"modbus": 15020, "opcua": 14840, "enip": 14818}


class Line:
    """The demo line's state with ``params``, read and written by plant path."""

    def __init__(self, params: PlantParams | None = None) -> None:
        params = params or PlantParams()
        document = line1_document("127.0.0.1", PORTS, assign_areas(("modbus", "opcua", "enip")), params)
        self.state = PlantState(build_spec(config_from_dict(document, env={})), LineModel(params).step)

    def read(self, path: str) -> Any:
        return self.state.values[self.state.resolve(tag(path))]

    def write(self, path: str, value: Any) -> None:
        point = self.state.spec.points[self.state.resolve(tag(path))]
        self.state.set(point.id, to_point_value(point, value, path))

    def tick(self, dt: float) -> None:
        self.state.step(dt)

    def run(self, seconds: float, dt: float = 0.1) -> None:
        for _ in range(round(seconds / dt)):
            self.tick(dt)

    def snapshot(self) -> dict[str, Any]:
        return {point.path: self.read(point.path) for point in POINTS}


def test_inlet_fills_after_the_valve_strokes() -> None:
    plant = Line(PlantParams(inflow_percent_per_second=5.0, valve_stroke_seconds=0.2))
    plant.write(INLET, True)
    plant.tick(0.1)
    assert plant.read(INLET_OPEN) is False
    assert plant.read(LEVEL) == 0.0  # closed valve: nothing flows yet
    plant.tick(0.1)
    assert plant.read(INLET_OPEN) is True
    plant.run(2.0)
    assert plant.read(LEVEL) == pytest.approx(0.5 + 10.0)


def test_outlet_drains_and_both_open_is_the_difference() -> None:
    plant = Line(PlantParams(initial_level_percent=50.0, valve_stroke_seconds=0.0,
                             inflow_percent_per_second=5.0, outflow_percent_per_second=4.0))
    plant.write(OUTLET, True)
    plant.run(5.0)
    assert plant.read(LEVEL) == pytest.approx(30.0)
    assert plant.read(OUTLET_OPEN) is True
    plant.write(INLET, True)
    plant.run(5.0)
    assert plant.read(LEVEL) == pytest.approx(35.0)
    plant.write(INLET, False)
    plant.write(OUTLET, False)
    plant.run(1.0)
    assert plant.read(LEVEL) == pytest.approx(35.0)
    assert plant.read(INLET_OPEN) is False and plant.read(OUTLET_OPEN) is False


def test_level_clamps_to_0_and_100() -> None:
    plant = Line(PlantParams(initial_level_percent=95.0, valve_stroke_seconds=0.0))
    plant.write(INLET, True)
    plant.run(10.0)
    assert plant.read(LEVEL) == 100.0
    plant.write(INLET, False)
    plant.write(OUTLET, True)
    plant.run(60.0)
    assert plant.read(LEVEL) == 0.0


def test_heater_reaches_setpoint_and_holds_it_then_cools_toward_ambient() -> None:
    plant = Line(PlantParams(heating_rate_c_per_second=2.0, ambient_c=20.0, cooling_time_constant_seconds=10.0))
    plant.write("Line1/Heater/Setpoint", 30.0)
    plant.write("Line1/Heater/Enable", True)
    plant.run(2.0)
    assert plant.read("Line1/Heater/Temperature") == pytest.approx(24.0)
    plant.run(10.0)
    assert plant.read("Line1/Heater/Temperature") == 30.0  # held exactly, no overshoot
    plant.write("Line1/Heater/Setpoint", 25.0)  # a lower setpoint is followed down too
    plant.run(5.0)
    assert plant.read("Line1/Heater/Temperature") == 25.0
    plant.write("Line1/Heater/Enable", False)
    plant.run(10.0)  # one time constant: 1/e of the excess remains
    assert plant.read("Line1/Heater/Temperature") == pytest.approx(20.0 + 5.0 / math.e, rel=1e-4)
    plant.run(200.0)
    assert plant.read("Line1/Heater/Temperature") == pytest.approx(20.0, abs=1e-3)


def test_mixer_feedback_follows_the_command_after_its_delay() -> None:
    plant = Line(PlantParams(mixer_delay_seconds=0.5))
    plant.write("Line1/Mixer/RunCmd", True)
    plant.run(0.4)
    assert plant.read("Line1/Mixer/Running") is False
    plant.run(0.1)
    assert plant.read("Line1/Mixer/Running") is True
    plant.write("Line1/Mixer/RunCmd", False)
    plant.run(0.2)
    assert plant.read("Line1/Mixer/Running") is True
    plant.run(0.3)
    assert plant.read("Line1/Mixer/Running") is False


def test_a_mixer_fault_drops_running_and_a_tripped_mixer_needs_a_new_run_command() -> None:
    plant = Line(PlantParams(mixer_delay_seconds=0.0))
    plant.write("Line1/Mixer/RunCmd", True)
    plant.tick(0.1)
    assert plant.read("Line1/Mixer/Running") is True
    plant.write("Line1/Mixer/Fault", True)
    plant.run(1.0)
    assert plant.read("Line1/Mixer/Running") is False
    plant.write("Line1/Mixer/Fault", False)
    plant.tick(0.1)
    assert plant.read("Line1/Mixer/Running") is False  # tripped: it stays off ...
    plant.write("Line1/Mixer/RunCmd", False)
    plant.write("Line1/Mixer/RunCmd", True)
    plant.tick(0.1)
    assert plant.read("Line1/Mixer/Running") is True  # ... until it is started again


def test_same_steps_give_same_values() -> None:
    def scenario() -> dict[str, Any]:
        plant = Line()
        plant.write(INLET, True)
        plant.write("Line1/Heater/Enable", True)
        plant.write("Line1/Mixer/RunCmd", True)
        for dt in (0.05, 0.1, 0.3, 0.01, 1.0, 0.2):
            plant.tick(dt)
        return plant.snapshot()

    first = scenario()
    assert first == scenario()
    assert first[LEVEL] > 0 and first["Line1/Mixer/Running"] is True


def test_plant_writes_are_converted_to_the_point_type() -> None:
    plant = Line()
    plant.write("Line1/Mixer/Speed", 12.6)  # a model's arithmetic: rounded for an Int16
    assert plant.read("Line1/Mixer/Speed") == 13
    plant.write("Line1/Mixer/RunCmd", 1)
    assert plant.read("Line1/Mixer/RunCmd") is True


@pytest.mark.parametrize(
    ("path", "value", "error", "message"),
    [
        ("Line1/Nope", 1, UnknownPoint, "unknown tag '\\[plant\\]Line1/Nope'"),
        ("Line1/Mixer/Speed", "fast", PointValueError, "'fast' is not a number"),
        ("Line1/Mixer/Speed", 40000, PointValueError, "outside the Int16 range"),
        ("Line1/Heater/Setpoint", float("nan"), PointValueError, "not a finite number"),
    ],
)
def test_bad_writes_name_the_tag(path: str, value: object, error: type[Exception], message: str) -> None:
    plant = Line()
    before = plant.snapshot()
    with pytest.raises(error, match=message):
        plant.write(path, value)
    assert plant.snapshot() == before


def test_negative_step_is_refused() -> None:
    with pytest.raises(ValueError, match="finite number of seconds >= 0"):
        Line().tick(-0.1)


def test_every_point_starts_with_a_value_of_its_type() -> None:
    plant = Line()
    for point in POINTS:
        value = plant.read(point.path)
        assert isinstance(value, bool if point.data_type.value == "Boolean" else (int, float))
    assert plant.read("Line1/Heater/Setpoint") == 60.0 and plant.read("Line1/Heater/Temperature") == 20.0
