"""The ``[devices.NAME]`` keys of a Modbus device, validated once with errors naming the key.

Three transports (``transport``): ``"tcp"`` (Modbus TCP, the default: ``host``, ``port``),
``"rtu-over-tcp"`` (RTU frames through a serial-to-Ethernet gateway: ``host``, ``port``) and
``"serial"`` (RTU on a serial line: ``serial_port``, ``baudrate``, ``parity``, ``stopbits``,
``bytesize``). A key of another transport is refused, naming the transport it belongs to, so a
half-edited table (``host`` left beside ``serial_port``) is not silently ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from exchange._config import DeviceConfig
from exchange._drivers.modbus.codec import ORDERS, Layout
from exchange._drivers.modbus.plan import MAX_READ_BITS, MAX_READ_REGISTERS
from exchange._drivers.settings_reader import SettingsReader
from exchange.errors import ConfigError

TCP, RTU_OVER_TCP, SERIAL = "tcp", "rtu-over-tcp", "serial"
TRANSPORTS = (TCP, RTU_OVER_TCP, SERIAL)
PARITIES = ("N", "E", "O")
_NETWORK_KEYS = ("host", "port")
_SERIAL_KEYS = ("serial_port", "baudrate", "parity", "stopbits", "bytesize", "late_reply_ms")
_KEYS = {
    "transport", *_NETWORK_KEYS, *_SERIAL_KEYS, "unit_id", "zero_based", "word_order", "byte_order",
    "mask_write", "frame_gap_ms", "timeout_ms", "span_gaps", "max_registers_per_read", "max_bits_per_read",
    "reconnect_min_ms", "reconnect_max_ms",
}
MAX_FRAME_GAP_MS = 10_000.0
# the settings that must agree between devices on one serial port (they are the port's, not a device's;
# line.py keeps its own copy for the check at first use, a backstop for a config built in code)
PORT_SETTINGS = ("baudrate", "parity", "stopbits", "bytesize")


@dataclass(frozen=True)
class ModbusSettings:
    device: str
    host: str = ""  # tcp and rtu-over-tcp
    port: int = 502
    unit_id: int = 1
    zero_based: bool = False
    word_order: str = "big"
    byte_order: str = "big"
    timeout_ms: int = 2000
    span_gaps: bool = True  # one read may cover unrequested registers between two tags
    max_registers_per_read: int = MAX_READ_REGISTERS
    max_bits_per_read: int = MAX_READ_BITS
    reconnect_min_ms: int = 100
    reconnect_max_ms: int = 5000
    transport: str = TCP
    serial_port: str = ""  # serial
    baudrate: int = 19200
    parity: str = "N"
    stopbits: int = 1
    bytesize: int = 8
    mask_write: bool = True  # the device has function 22 (mask write register)
    frame_gap_ms: float | None = None  # None: 3.5 characters at the baud rate (serial), 0 otherwise
    late_reply_ms: int | None = None  # serial: silence that settles the line after a lost reply; None: timeout_ms

    @property
    def endpoint(self) -> str:
        """Where the device is, as messages name it: ``host:port`` or the serial port."""
        if self.transport == SERIAL:
            return self.serial_port
        return f"{self.host}:{self.port}" + (" (RTU)" if self.transport == RTU_OVER_TCP else "")

    @property
    def layout(self) -> Layout:
        """The device's byte and word order (a tag may override either)."""
        return Layout(self.byte_order, self.word_order)

    @property
    def shares_line(self) -> bool:
        """RTU transports: devices behind one serial line (or gateway) share one link, serialised."""
        return self.transport != TCP

    @property
    def gap_s(self) -> float:
        """Silence kept on the line between the end of one frame and the next request.

        Modbus RTU separates frames by 3.5 character times of silence; above 19,200 baud the
        specification fixes it at 1.75 ms. A gateway (rtu-over-tcp) keeps its own serial timing.
        """
        if self.frame_gap_ms is not None:
            return self.frame_gap_ms / 1000
        if self.transport != SERIAL:
            return 0.0
        if self.baudrate > 19200:
            return 0.00175
        bits_per_char = 1 + self.bytesize + (0 if self.parity == "N" else 1) + self.stopbits
        return 3.5 * bits_per_char / self.baudrate

    @property
    def late_reply_s(self) -> float:
        """How long a serial line must be silent after a request lost its reply before it takes the
        reply as never coming (:mod:`exchange._drivers.modbus.line`): ``late_reply_ms``, else
        ``timeout_ms`` (a reply up to twice the timeout late is still recognised as late)."""
        return (self.late_reply_ms if self.late_reply_ms is not None else self.timeout_ms) / 1000

    @classmethod
    def from_device(cls, device: DeviceConfig) -> ModbusSettings:
        """Validate ``device.settings``; ConfigError names ``devices.NAME.key`` and the bad value."""
        read = SettingsReader(device, _KEYS, "modbus")
        read.check_unknown()
        transport = read.choice("transport", TRANSPORTS, TCP)
        wrong = _SERIAL_KEYS if transport != SERIAL else _NETWORK_KEYS
        for key in wrong:
            if key in read.raw:
                needs = 'transport = "serial"' if transport != SERIAL else 'transport = "tcp" or "rtu-over-tcp"'
                raise ConfigError(f"{read.at(key)} is a key of {needs}; this device has transport = "
                                  f'"{transport}"')
        rtu = transport != TCP
        low_unit, high_unit = (1, 247) if rtu else (0, 255)
        unit_id = read.raw.get("unit_id", 1)
        if rtu and unit_id == 0:
            raise ConfigError(f"{read.at('unit_id')} must be 1 to 247 on an RTU line: 0 is the broadcast "
                              "address, which no device answers")
        settings = cls(
            device=device.name,
            transport=transport,
            host=read.host() if transport != SERIAL else "",
            port=read.port(502),
            serial_port=_serial_port(read) if transport == SERIAL else "",
            baudrate=read.integer("baudrate", 19200, 50, 4_000_000),
            parity=read.choice("parity", PARITIES, "N"),
            stopbits=read.integer("stopbits", 1, 1, 2),
            bytesize=_bytesize(read),
            unit_id=read.integer("unit_id", 1, low_unit, high_unit),
            zero_based=read.boolean("zero_based", False),
            word_order=read.choice("word_order", ORDERS, "big"),
            byte_order=read.choice("byte_order", ORDERS, "big"),
            mask_write=read.boolean("mask_write", True),
            frame_gap_ms=_frame_gap_ms(read),
            timeout_ms=read.integer("timeout_ms", 2000, 1, 600_000),
            late_reply_ms=read.integer("late_reply_ms", 0, 1, 600_000) if "late_reply_ms" in read.raw else None,
            span_gaps=read.boolean("span_gaps", True),
            max_registers_per_read=read.integer("max_registers_per_read", MAX_READ_REGISTERS, 1, MAX_READ_REGISTERS),
            max_bits_per_read=read.integer("max_bits_per_read", MAX_READ_BITS, 1, MAX_READ_BITS),
            reconnect_min_ms=read.integer("reconnect_min_ms", 100, 1, 3_600_000),
            reconnect_max_ms=read.integer("reconnect_max_ms", 5000, 1, 3_600_000),
        )
        read.check_at_least("reconnect_max_ms", settings.reconnect_max_ms,
                            "reconnect_min_ms", settings.reconnect_min_ms)
        return settings


def check_shared_ports(devices: Sequence[ModbusSettings]) -> None:
    """ConfigError naming the device and the key when two devices on one ``serial_port`` disagree
    on one of :data:`PORT_SETTINGS`: the port has one line speed and framing, so the second device
    would be spoken to at the first one's (and never answer), found only at its first request."""
    first_on: dict[str, ModbusSettings] = {}
    for settings in devices:
        if settings.transport != SERIAL:
            continue
        first = first_on.setdefault(settings.serial_port, settings)
        for name in PORT_SETTINGS:
            mine, theirs = getattr(settings, name), getattr(first, name)
            if mine != theirs:
                raise ConfigError(
                    f"devices.{settings.device}.{name} is {mine!r} but device {first.device!r} on the same "
                    f"serial_port {settings.serial_port!r} has {theirs!r}: the devices of one port share its "
                    "baud rate, parity, stop bits and byte size"
                )


def _serial_port(read: SettingsReader) -> str:
    try:
        import serial  # noqa: F401  (pyserial: pymodbus's serial client needs it)
    except ImportError as exc:
        raise ConfigError(f'{read.at("transport")} = "serial" needs the pyserial package '
                          "(pip install pyserial)") from exc
    value = read.raw.get("serial_port")
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f'{read.at("serial_port")} must be the serial device, e.g. "/dev/ttyUSB0" '
                          f'(transport = "serial"), got {value!r}')
    return value.strip()


def _bytesize(read: SettingsReader) -> int:
    value = read.integer("bytesize", 8, 5, 8)
    if value != 8:
        raise ConfigError(f"{read.at('bytesize')} must be 8: Modbus RTU frames are 8-bit binary, got {value}")
    return value


def _frame_gap_ms(read: SettingsReader) -> float | None:
    value = read.raw.get("frame_gap_ms")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not (
        0 <= value <= MAX_FRAME_GAP_MS
    ):
        raise ConfigError(f"{read.at('frame_gap_ms')} must be a number of milliseconds from 0 to "
                          f"{MAX_FRAME_GAP_MS:g}, got {value!r}")
    return float(value)
