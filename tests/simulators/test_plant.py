"""The plant model alone: physics driven tick by tick, no servers."""

from __future__ import annotations

from typing import Any

import pytest

from simulators.plant import POINTS, Plant, PlantParams

LEVEL = "Line1/Tank/Level"
INLET = "Line1/Tank/InletValve/Cmd"
INLET_OPEN = "Line1/Tank/InletValve/Open"
OUTLET = "Line1/Tank/OutletValve/Cmd"
OUTLET_OPEN = "Line1/Tank/OutletValve/Open"


def run(plant: Plant, seconds: float, dt: float = 0.1) -> None:
    for _ in range(round(seconds / dt)):
        plant.tick(dt)


def test_inlet_fills_after_the_valve_strokes() -> None:
    plant = Plant(PlantParams(inflow_percent_per_second=5.0, valve_stroke_seconds=0.2))
    plant.write(INLET, True)
    plant.tick(0.1)
    assert plant.read(INLET_OPEN) is False
    assert plant.read(LEVEL) == 0.0  # closed valve: nothing flows yet
    plant.tick(0.1)
    assert plant.read(INLET_OPEN) is True
    run(plant, 2.0)
    assert plant.read(LEVEL) == pytest.approx(0.5 + 10.0)


def test_outlet_drains_and_both_open_is_the_difference() -> None:
    plant = Plant(PlantParams(initial_level_percent=50.0, valve_stroke_seconds=0.0,
                              inflow_percent_per_second=5.0, outflow_percent_per_second=4.0))
    plant.write(OUTLET, True)
    run(plant, 5.0)
    assert plant.read(LEVEL) == pytest.approx(30.0)
    assert plant.read(OUTLET_OPEN) is True
    plant.write(INLET, True)
    run(plant, 5.0)
    assert plant.read(LEVEL) == pytest.approx(35.0)
    plant.write(INLET, False)
    plant.write(OUTLET, False)
    run(plant, 1.0)
    assert plant.read(LEVEL) == pytest.approx(35.0)
    assert plant.read(INLET_OPEN) is False and plant.read(OUTLET_OPEN) is False


def test_level_clamps_to_0_and_100() -> None:
    plant = Plant(PlantParams(initial_level_percent=95.0, valve_stroke_seconds=0.0))
    plant.write(INLET, True)
    run(plant, 10.0)
    assert plant.read(LEVEL) == 100.0
    plant.write(INLET, False)
    plant.write(OUTLET, True)
    run(plant, 60.0)
    assert plant.read(LEVEL) == 0.0


def test_heater_reaches_setpoint_and_holds_it_then_cools_toward_ambient() -> None:
    plant = Plant(PlantParams(heating_rate_c_per_second=2.0, ambient_c=20.0,
                              cooling_time_constant_seconds=10.0))
    plant.write("Line1/Heater/Setpoint", 30.0)
    plant.write("Line1/Heater/Enable", True)
    run(plant, 2.0)
    assert plant.read("Line1/Heater/Temperature") == pytest.approx(24.0)
    run(plant, 10.0)
    assert plant.read("Line1/Heater/Temperature") == 30.0  # held exactly, no overshoot
    plant.write("Line1/Heater/Setpoint", 25.0)  # a lower setpoint is followed down too
    run(plant, 5.0)
    assert plant.read("Line1/Heater/Temperature") == 25.0
    plant.write("Line1/Heater/Enable", False)
    run(plant, 10.0)  # one time constant: 1/e of the excess remains
    assert plant.read("Line1/Heater/Temperature") == pytest.approx(20.0 + 5.0 / 2.718281828, rel=1e-4)
    run(plant, 200.0)
    assert plant.read("Line1/Heater/Temperature") == pytest.approx(20.0, abs=1e-3)


def test_mixer_feedback_follows_the_command_after_its_delay() -> None:
    plant = Plant(PlantParams(mixer_delay_seconds=0.5))
    plant.write("Line1/Mixer/RunCmd", True)
    run(plant, 0.4)
    assert plant.read("Line1/Mixer/Running") is False
    run(plant, 0.1)
    assert plant.read("Line1/Mixer/Running") is True
    plant.write("Line1/Mixer/RunCmd", False)
    run(plant, 0.2)
    assert plant.read("Line1/Mixer/Running") is True
    run(plant, 0.3)
    assert plant.read("Line1/Mixer/Running") is False


def test_mixer_fault_drops_running_until_cleared() -> None:
    plant = Plant(PlantParams(mixer_delay_seconds=0.0))
    plant.write("Line1/Mixer/RunCmd", True)
    plant.tick(0.1)
    assert plant.read("Line1/Mixer/Running") is True
    plant.mixer_fault = True
    assert plant.read("Line1/Mixer/Fault") is True
    run(plant, 1.0)
    assert plant.read("Line1/Mixer/Running") is False
    plant.mixer_fault = False
    plant.tick(0.1)
    assert plant.read("Line1/Mixer/Running") is True and plant.read("Line1/Mixer/Fault") is False


def test_same_ticks_give_same_values() -> None:
    def scenario() -> dict[str, Any]:
        plant = Plant()
        plant.write(INLET, True)
        plant.write("Line1/Heater/Enable", True)
        plant.write("Line1/Mixer/RunCmd", True)
        for dt in (0.05, 0.1, 0.3, 0.01, 1.0, 0.2):
            plant.tick(dt)
        return plant.snapshot()

    first = scenario()
    assert first == scenario()
    assert first[LEVEL] > 0 and first["Line1/Mixer/Running"] is True


def test_writes_are_coerced_and_clamped_to_the_point_range() -> None:
    plant = Plant()
    plant.write("Line1/Mixer/Speed", 2000)
    assert plant.read("Line1/Mixer/Speed") == 1500
    plant.write("Line1/Mixer/Speed", 12.6)
    assert plant.read("Line1/Mixer/Speed") == 13
    plant.write("Line1/Heater/Setpoint", -5)
    assert plant.read("Line1/Heater/Setpoint") == 0.0


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (LEVEL, 10.0, "Line1/Tank/Level is read-only"),
        ("Line1/Nope", 1, "no point 'Line1/Nope'"),
        ("Line1/Mixer/Speed", "fast", "cannot use 'fast' as Int16"),
        ("Line1/Heater/Setpoint", float("nan"), "not a finite number"),
    ],
)
def test_bad_writes_name_the_point(path: str, value: object, message: str) -> None:
    plant = Plant()
    before = plant.snapshot()
    with pytest.raises((KeyError, ValueError), match=message):
        plant.write(path, value)
    assert plant.snapshot() == before


def test_negative_tick_is_refused() -> None:
    with pytest.raises(ValueError, match="dt_seconds must be a finite number >= 0"):
        Plant().tick(-0.1)


def test_every_point_is_readable_and_snapshot_covers_the_catalogue() -> None:
    plant = Plant()
    assert set(plant.snapshot()) == {p.path for p in POINTS}
    for point in POINTS:
        value = plant.read(point.path)
        assert isinstance(value, bool if point.data_type.value == "Boolean" else (int, float))
