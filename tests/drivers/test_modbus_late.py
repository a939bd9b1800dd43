"""Recognising the late reply of a Modbus RTU request, and draining a serial port until it came or
the line fell silent (exchange._drivers.modbus.late), on frames pymodbus itself builds and on a real
pseudo-terminal opened with pyserial (the line's other end writes as a device would); and a serial
line that finds bytes nobody waited for settles before its next request."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import serial
from pymodbus.framer import FramerRTU
from pymodbus.pdu import DecodePDU, ExceptionResponse
from pymodbus.pdu.bit_message import ReadCoilsResponse, WriteSingleCoilResponse
from pymodbus.pdu.register_message import (
    MaskWriteRegisterResponse,
    ReadHoldingRegistersResponse,
    WriteMultipleRegistersResponse,
)

from exchange._drivers.modbus.late import StillTalking, drain, find_reply, late_reply
from exchange._drivers.modbus.line import Line
from exchange._drivers.modbus.settings import ModbusSettings
from tests.waiting import wait_until

FRAMER = FramerRTU(DecodePDU(False))


def frame(pdu: Any) -> bytes:
    return bytes(FRAMER.buildFrame(pdu))


@pytest.mark.parametrize(("function", "args", "kwargs", "reply"), [
    ("read_holding_registers", (11,), {"count": 1}, ReadHoldingRegistersResponse(registers=[1011], dev_id=3)),
    ("read_holding_registers", (0,), {"count": 3}, ReadHoldingRegistersResponse(registers=[1, 2, 3], dev_id=3)),
    ("read_coils", (0,), {"count": 9}, ReadCoilsResponse(bits=[True] * 16, dev_id=3)),
    ("write_coil", (4, True), {}, WriteSingleCoilResponse(address=4, bits=[True], dev_id=3)),
    ("write_registers", (4, [1, 2]), {}, WriteMultipleRegistersResponse(address=4, count=2, dev_id=3)),
    ("mask_write_register", (), {"address": 4, "and_mask": 1, "or_mask": 2},
     MaskWriteRegisterResponse(address=4, and_mask=1, or_mask=2, dev_id=3)),
])
def test_the_late_reply_is_found_whole_and_only_whole(function: str, args: Any, kwargs: Any, reply: Any) -> None:
    owed = late_reply(3, function, args, kwargs)
    assert owed is not None
    data = frame(reply)
    assert find_reply(data, owed) == len(data)
    assert find_reply(b"\x00\xff" + data, owed) == len(data) + 2  # after noise
    assert find_reply(data[:-1], owed) is None  # not all there yet
    assert find_reply(data[:-2] + bytes([data[-2] ^ 1, data[-1]]), owed) is None  # a bad CRC
    other_unit = late_reply(4, function, args, kwargs)
    assert other_unit is not None and find_reply(data, other_unit) is None


def test_an_exception_answers_the_request_and_another_count_does_not() -> None:
    owed = late_reply(3, "read_holding_registers", (11,), {"count": 2})
    assert owed is not None
    refused = frame(ExceptionResponse(3, 2, device_id=3))
    assert find_reply(refused, owed) == len(refused)
    one_register = frame(ReadHoldingRegistersResponse(registers=[7], dev_id=3))
    assert find_reply(one_register, owed) is None  # the reply to another read, not this one


@pytest.fixture
def pty_port() -> Iterator[tuple[serial.Serial, int]]:
    """A pyserial port on a pseudo-terminal, and the descriptor of its other end (the device's)."""
    device_end, port_end = os.openpty()
    port = serial.Serial(os.ttyname(port_end), timeout=1)
    try:
        yield port, device_end
    finally:
        port.close()
        os.close(device_end)
        os.close(port_end)


def later(seconds: float, action: Any) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def test_drain_returns_once_the_owed_reply_came_and_discards_it(pty_port: tuple[serial.Serial, int]) -> None:
    port, device = pty_port
    owed = late_reply(3, "read_holding_registers", (11,), {"count": 1})
    reply = frame(ReadHoldingRegistersResponse(registers=[1011], dev_id=3))
    started = time.monotonic()
    later(0.2, lambda: os.write(device, reply)).join()
    came_at = drain(port, owed, window_s=5, gap_s=0.002, silent_from=started, limit_s=20)
    assert came_at is not None and came_at - started < 4  # the reply ended it, not the 5 s window
    assert port.in_waiting == 0  # read and discarded


def test_drain_without_the_reply_waits_for_silence_restarted_by_every_byte(
    pty_port: tuple[serial.Serial, int],
) -> None:
    port, device = pty_port
    owed = late_reply(3, "read_holding_registers", (11,), {"count": 1})
    started = time.monotonic()
    timer = later(0.3, lambda: os.write(device, b"\x03\x03"))  # half a frame: not the reply
    assert drain(port, owed, window_s=0.4, gap_s=0.002, silent_from=started, limit_s=20) is None
    timer.join()
    assert time.monotonic() - started >= 0.7  # 0.4 s of silence counted from the last byte


def test_drain_after_the_reply_and_more_bytes_waits_the_whole_window(pty_port: tuple[serial.Serial, int]) -> None:
    port, device = pty_port
    owed = late_reply(3, "read_holding_registers", (11,), {"count": 1})
    reply = frame(ReadHoldingRegistersResponse(registers=[1011], dev_id=3))
    started = time.monotonic()
    os.write(device, reply + b"\x03")  # something after the reply: nothing is known
    assert drain(port, owed, window_s=0.3, gap_s=0.002, silent_from=started, limit_s=20) is not None
    assert time.monotonic() - started >= 0.3  # the whole window of silence, not the gap


def test_a_line_that_keeps_talking_is_given_up_on(pty_port: tuple[serial.Serial, int]) -> None:
    port, device = pty_port
    stop = threading.Event()

    def babble() -> None:
        while not stop.wait(0.02):
            os.write(device, b"\x55")

    thread = threading.Thread(target=babble)
    thread.start()
    try:
        with pytest.raises(StillTalking, match="kept bringing bytes"):
            drain(port, None, window_s=0.1, gap_s=0.002, silent_from=time.monotonic(), limit_s=0.5)
    finally:
        stop.set()
        thread.join()


def test_bytes_found_before_a_request_settle_the_line_first(caplog: pytest.LogCaptureFixture) -> None:
    device, port_end = os.openpty()
    path = os.ttyname(port_end)
    line = Line(ModbusSettings(device="d3", transport="serial", serial_port=path, unit_id=3), ("serial", path))
    try:
        client = line.client(0.2)
        # a reply later than timeout_ms + late_reply_ms, arriving while no request waits for it
        os.write(device, frame(ReadHoldingRegistersResponse(registers=[1007], dev_id=3)))
        wait_until(lambda: client.socket.in_waiting > 0, timeout_s=10)
        started = time.monotonic()
        line.wait_for_quiet(0.3)
        assert time.monotonic() - started >= 0.3  # a whole window of silence before the next request
        assert client.socket.in_waiting == 0  # and the stale reply is gone
        assert "bytes arrived while no request was waiting for them" in caplog.text
    finally:
        line.close()
        os.close(device)
        os.close(port_end)
