"""What the demo line serves on OPC UA beyond its points: an array and an object with a method.

Written into the demo's config (:mod:`simulators.config_text`) when OPC UA serves the Mixer (the
default split), as any config would declare them, so authors and the suite try array tags and
``tags.call`` without a real server:

- ``[plant]Line1/Mixer/Profile`` (``ns=2;s=Line1.Mixer.Profile``): a writable ``Int16[5]`` tag (0..1500
  per element; five elements, as a PLC's fixed array), a speed profile the plant holds (a recipe
  table: the model does not use it); it starts, and returns at a reset, at :data:`PROFILE_INITIAL`
  (``[simulation.tags] initial``).
- ``[plant]Line1/Mixer/Control`` (``ns=2;s=Line1.Mixer.Control``): an object with the method
  ``SetSpeed(Speed: Int16) -> (Previous: Int16)`` (``[simulation.tags."...".methods.SetSpeed]``),
  answered by :func:`simulators.plant.set_speed`: it sets the mixer's speed setpoint and returns the
  one it replaced; it refuses a speed outside 0..1500 with BadOutOfRange and any call while the mixer
  is in fault with BadInvalidState.
"""

from __future__ import annotations

from typing import Any

from simulators.plant import LINE, SPEED_MAX_RPM, SPEED_MIN_RPM, tag

PROFILE_PATH = f"{LINE}/Mixer/Profile"
PROFILE_ADDRESS = "ns=2;s=Line1.Mixer.Profile"
PROFILE_INITIAL: tuple[int, ...] = (0, 300, 600, 900, 0)
CONTROL_PATH = f"{LINE}/Mixer/Control"
CONTROL_ADDRESS = "ns=2;s=Line1.Mixer.Control"
SPEED_ADDRESS = "ns=2;s=Line1.Mixer.Speed"
FAULT_ADDRESS = "ns=2;s=Line1.Mixer.Fault"
SET_SPEED: dict[str, Any] = {"inputs": ["Speed: Int16"], "outputs": ["Previous: Int16"], "call": "set_speed"}


def extra_tags(device: str) -> dict[str, dict[str, Any]]:
    """The ``[tags]`` tables of the extras, on ``device`` (the OPC UA device)."""
    return {
        tag(PROFILE_PATH): {"device": device, "address": PROFILE_ADDRESS, "type": f"Int16[{len(PROFILE_INITIAL)}]",
                            "min": SPEED_MIN_RPM, "max": SPEED_MAX_RPM},
        tag(CONTROL_PATH): {"device": device, "address": CONTROL_ADDRESS},  # an object: tags.call(path, ...)
    }


def extra_simulation() -> dict[str, dict[str, Any]]:
    """Their ``[simulation.tags]`` tables: the profile's initial values, the object's method."""
    return {
        tag(PROFILE_PATH): {"initial": list(PROFILE_INITIAL)},
        tag(CONTROL_PATH): {"methods": {"SetSpeed": dict(SET_SPEED)}},
    }
