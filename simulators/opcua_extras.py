"""What the simulated plant serves on OPC UA beyond its points: an array and a method.

Served with the Mixer when OPC UA serves it (the default split), so authors and the suite try
``tags.call`` and array tags without a real server:

- ``[plant]Line1/Mixer/Profile`` (``ns=2;s=Line1.Mixer.Profile``): a writable Int16[5], a speed
  profile held by the server (a recipe table: the physics does not use it).
- ``[plant]Line1/Mixer/Control`` (``ns=2;s=Line1.Mixer.Control``): an object with the method
  ``SetSpeed(Speed: Int16) -> (Previous: Int16)``. It sets the mixer's speed setpoint as a client
  write would (the ticker takes it into the plant) and returns the one it replaced. It refuses a speed
  outside 0..1500 with BadOutOfRange and any call while the mixer is in fault with BadInvalidState.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from exchange._values import DataType
from simulators.plant import LINE
from simulators.servers.base import SimPoint
from simulators.servers.opcua_methods import MethodRefused, MethodScope, SimArgument, SimMethod

PROFILE_PATH = f"{LINE}/Mixer/Profile"
PROFILE_ADDRESS = "ns=2;s=Line1.Mixer.Profile"
PROFILE_INITIAL: tuple[int, ...] = (0, 300, 600, 900, 0)
CONTROL_PATH = f"{LINE}/Mixer/Control"
CONTROL_ADDRESS = "ns=2;s=Line1.Mixer.Control"
SPEED_ADDRESS = "ns=2;s=Line1.Mixer.Speed"
FAULT_ADDRESS = "ns=2;s=Line1.Mixer.Fault"
SPEED_MIN_RPM, SPEED_MAX_RPM = 0, 1500


def _set_speed(scope: MethodScope, args: list[Any]) -> list[Any]:
    (speed,) = args
    if not SPEED_MIN_RPM <= speed <= SPEED_MAX_RPM:
        raise MethodRefused("BadOutOfRange", f"speed {speed} rpm is outside {SPEED_MIN_RPM}..{SPEED_MAX_RPM}")
    if scope.get(FAULT_ADDRESS):
        raise MethodRefused("BadInvalidState", "the mixer is in fault")
    previous = scope.get(SPEED_ADDRESS)
    scope.set(SPEED_ADDRESS, speed)
    return [previous]


SET_SPEED = SimMethod(CONTROL_ADDRESS, "SetSpeed", (SimArgument("Speed", DataType.INT16),),
                      (SimArgument("Previous", DataType.INT16),), _set_speed)


def mixer_extras(points: Sequence[SimPoint]) -> tuple[list[SimPoint], list[SimMethod]]:
    """The array point and the method, when ``points`` (an OPC UA server's) include the mixer's."""
    addresses = {p.address for p in points}
    if SPEED_ADDRESS not in addresses or FAULT_ADDRESS not in addresses:
        return [], []
    profile = SimPoint(PROFILE_ADDRESS, DataType.INT16, list(PROFILE_INITIAL), writable=True, array=True)
    return [profile], [SET_SPEED]


def extra_tag_lines(device: str, provider: str) -> list[list[str]]:
    """The config's tables for the extras, on ``device`` (the OPC UA device)."""
    return [
        [f'[tags."[{provider}]{PROFILE_PATH}"]', f'device = "{device}"', f'address = "{PROFILE_ADDRESS}"',
         'type = "Int16[]"', f"min = {SPEED_MIN_RPM}", f"max = {SPEED_MAX_RPM}"],
        [f'[tags."[{provider}]{CONTROL_PATH}"]          # an object: tags.call(path, "SetSpeed", rpm)',
         f'device = "{device}"', f'address = "{CONTROL_ADDRESS}"'],
    ]
