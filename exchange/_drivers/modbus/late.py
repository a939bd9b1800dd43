"""The reply a Modbus RTU request that timed out may still get: how to recognise it, and how a
serial line waits it out (:func:`drain`).

RTU frames carry no transaction id: the answer to one read of a register and the answer to the next
read of another register look alike (same unit, function and byte count). After a request lost its
reply, the serial line (:mod:`exchange._drivers.modbus.line`) listens before it sends again, and a
complete frame that can only be that reply (:func:`find_reply`: this unit, this function or its
exception, the length the request asked for, a good CRC) tells it the device has caught up.
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass
from typing import Any

from pymodbus.framer import FramerRTU

__all__ = ["FUNCTION_CODES", "LateReply", "StillTalking", "drain", "find_reply", "late_reply"]

_KEEP_BYTES = 1024  # of what a settling line brings, the tail kept to find the late reply in
_POLL_S = 0.005  # how often a port without a descriptor is asked for bytes

_EXCEPTION_FRAME = 5  # unit, function | 0x80, code, CRC (2)
# the function code each pymodbus client method sends
FUNCTION_CODES = {
    "read_coils": 1, "read_discrete_inputs": 2, "read_holding_registers": 3, "read_input_registers": 4,
    "write_coil": 5, "write_register": 6, "write_coils": 15, "write_registers": 16, "mask_write_register": 22,
}


@dataclass(frozen=True)
class LateReply:
    """The reply still owed for a request: from ``unit_id``, to ``function_code``, ``length`` bytes
    long with its CRC when it is not an exception (None: the request does not tell)."""

    unit_id: int
    function_code: int
    length: int | None


def late_reply(unit_id: int, function: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> LateReply | None:
    """What a request (a pymodbus client method and its arguments) would be answered with; None for
    a function this driver does not send."""
    code = FUNCTION_CODES.get(function)
    if code is None:
        return None
    count = kwargs.get("count")
    length: int | None = None
    if code in (1, 2) and isinstance(count, int):
        length = 5 + (count + 7) // 8  # unit, function, byte count, the bits packed in bytes, CRC
    elif code in (3, 4) and isinstance(count, int):
        length = 5 + 2 * count
    elif code in (5, 6, 15, 16):
        length = 8  # unit, function, address, value or quantity, CRC
    elif code == 22:
        length = 10  # unit, function, address, and mask, or mask, CRC
    return LateReply(unit_id, code, length)


def find_reply(data: bytes, reply: LateReply) -> int | None:
    """Where in ``data`` the frame of ``reply`` ends, if ``data`` holds it whole; None otherwise."""
    for start in range(len(data) - _EXCEPTION_FRAME + 1):
        if data[start] != reply.unit_id:
            continue
        function = data[start + 1]
        if function == reply.function_code | 0x80:
            length: int | None = _EXCEPTION_FRAME
        elif function == reply.function_code:
            length = reply.length
        else:
            continue
        if length is None or start + length > len(data):
            continue
        frame = data[start:start + length]
        if FramerRTU.check_CRC(frame[:-2], int.from_bytes(frame[-2:], "big")):
            return start + length
    return None


class StillTalking(Exception):
    """The line kept bringing bytes for longer than a drain may take."""


def drain(port: Any, owed: LateReply | None, *, window_s: float, gap_s: float, silent_from: float,
          limit_s: float) -> float | None:
    """Read and discard what the serial ``port`` (a pyserial port) brings until it has been silent
    for ``window_s`` since ``silent_from`` or its last byte, or only for ``gap_s`` after the whole
    ``owed`` reply when nothing came after it. Returns when the owed reply came
    (``time.monotonic()``), None if it did not. StillTalking after ``limit_s``; the port's own
    errors propagate."""
    started = time.monotonic()
    need_s = window_s
    heard = b""
    came_at: float | None = None
    while True:
        now = time.monotonic()
        left = silent_from + need_s - now
        if left <= 0:
            return came_at
        if now - started >= limit_s:
            raise StillTalking(f"the line kept bringing bytes for {now - started:.1f} s")
        if not _readable(port, min(left, started + limit_s - now)):
            continue
        data = port.read(max(1, port.in_waiting))
        silent_from = time.monotonic()
        if came_at is not None:
            need_s = window_s  # more after the owed reply: nothing is known any more
            continue
        heard = (heard + data)[-_KEEP_BYTES:]
        end = find_reply(heard, owed) if owed is not None else None
        if end is not None:
            # the device caught up: after its reply the inter-frame silence is enough, unless more
            # came with it
            came_at = silent_from
            need_s = gap_s if end == len(heard) else window_s


def _readable(port: Any, timeout_s: float) -> bool:
    """Whether ``port`` has bytes to read within ``timeout_s``: select on its descriptor, or (a
    pyserial URL handler without one) polling its input count."""
    try:
        fd = port.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last two
        fd = None
    if fd is not None:
        readable, _, _ = select.select([fd], [], [], timeout_s)
        return bool(readable)
    deadline = time.monotonic() + timeout_s
    while port.in_waiting == 0:
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))
    return True
