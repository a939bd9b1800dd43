"""Register layouts through the whole tag layer, over Modbus TCP, RTU over TCP and RTU on a serial line.

Against pymodbus's own servers (tests/drivers/modbus_servers.py): byte and word order per device and
per tag (the same float in all four layouts), 64-bit values, strings over N registers, and bits of
registers (mask write; read-modify-write only where the device has none and the tag allows it).
What the server holds and the requests it received are read from the server, not from Exchange.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._config import config_from_dict
from exchange._tags.service import TagService
from exchange.errors import DeviceError, ReadOnlyTag, TagError, TagRangeError, TagTypeError
from tests.drivers.modbus_servers import ServerProcess, SocatPair, Unit

UNIT, NO_MASK = 3, 4  # NO_MASK answers function 22 with ILLEGAL FUNCTION
VALUE = 123.456
ABCD = struct.pack(">f", VALUE)
A, B, C, D = (ABCD[i : i + 1] for i in range(4))
LAYOUTS = {  # (byte_order, word_order) -> the float's two registers on the wire
    ("big", "big"): A + B + C + D,
    ("big", "little"): C + D + A + B,
    ("little", "big"): B + A + D + C,
    ("little", "little"): D + C + B + A,
}


def words(raw: bytes) -> list[int]:
    return list(struct.unpack(f">{len(raw) // 2}H", raw))


def initial_holding() -> dict[int, int]:
    holding: dict[int, int] = {}
    for n, raw in enumerate(LAYOUTS.values()):  # HRF1, HRF3, HRF5, HRF7 (offsets 0..7)
        holding.update({2 * n: words(raw)[0], 2 * n + 1: words(raw)[1]})
    return holding


class Line:
    """One transport's server and a TagService whose devices reach it."""

    def __init__(self, transport: str, folder: Path) -> None:
        self.pair = SocatPair(folder).start() if transport == "serial" else None
        units = [Unit(UNIT, initial_holding()), Unit(NO_MASK, mask_write=False)]
        serial_port = self.pair.server if self.pair else None
        self.server = ServerProcess(transport, units, serial_port=serial_port).start()
        where: dict[str, Any] = {"transport": transport, "timeout_ms": 1000}
        if self.pair is not None:
            where["serial_port"] = self.pair.client
        else:
            where.update(host="127.0.0.1", port=self.server.port)
        devices = {
            "dev": {"driver": "modbus", **where, "unit_id": UNIT},
            "swapped": {"driver": "modbus", **where, "unit_id": UNIT, "byte_order": "little", "word_order": "little"},
            "nomask": {"driver": "modbus", **where, "unit_id": NO_MASK},
            "declared": {"driver": "modbus", **where, "unit_id": NO_MASK, "mask_write": False},
        }
        tags: dict[str, dict[str, Any]] = {}
        for n, (byte_order, word_order) in enumerate(LAYOUTS):
            tags[f"[t]Float/{byte_order}_{word_order}"] = {
                "device": "dev", "address": f"HRF{2 * n + 1}", "byte_order": byte_order, "word_order": word_order}
        tags["[t]Swapped/Device"] = {"device": "swapped", "address": "HRF7"}  # DCBA by the device's default
        tags["[t]Swapped/TagSaysBig"] = {"device": "swapped", "address": "HRF1", "byte_order": "big",
                                         "word_order": "big"}
        self.service = TagService(config_from_dict({"devices": devices, "tags": tags}, env={}))

    def add_tags(self, tags: dict[str, dict[str, Any]]) -> TagService:
        """A second service over the same devices with more tags (the first keeps its drivers)."""
        config = self.service.config
        raw_devices = {name: dict(d.settings) for name, d in config.devices.items()}
        return TagService(config_from_dict({"devices": raw_devices, "tags": tags}, env={}))

    def close(self) -> None:
        self.service.close()
        self.server.stop()
        if self.pair is not None:
            self.pair.stop()


@pytest.fixture(scope="module", params=["tcp", "rtu-over-tcp", "serial"])
def line(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Line]:
    made = Line(request.param, tmp_path_factory.mktemp(f"line-{request.param}"))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def tags(line: Line, request: pytest.FixtureRequest) -> Iterator[TagService]:
    """A service with the test's own tags (``TAGS`` on the test function's module-level dict)."""
    svc = line.add_tags(request.param)
    try:
        yield svc
    finally:
        svc.close()


def with_tags(tags: dict[str, dict[str, Any]]) -> Any:
    return pytest.mark.parametrize("tags", [tags], indirect=True)


def test_the_same_float_reads_right_in_all_four_layouts(line: Line) -> None:
    paths = [f"[t]Float/{b}_{w}" for b, w in LAYOUTS]
    values = line.service.read(paths)
    assert [v.quality.value for v in values] == ["Good"] * 4, values
    assert [v.value for v in values] == [pytest.approx(VALUE, rel=1e-6)] * 4
    device_default, tag_override = line.service.read(["[t]Swapped/Device", "[t]Swapped/TagSaysBig"])
    assert device_default.value == pytest.approx(VALUE, rel=1e-6)  # HRF7 is DCBA: the device's own order
    assert tag_override.value == pytest.approx(VALUE, rel=1e-6)  # HRF1 is ABCD: the tag's order wins


@with_tags({f"[w]F/{b}_{w}": {"device": "dev", "address": f"HRF{101 + 2 * n}", "byte_order": b, "word_order": w}
            for n, (b, w) in enumerate(LAYOUTS)})
def test_writes_go_out_in_the_tags_layout(line: Line, tags: TagService) -> None:
    paths = [f"[w]F/{b}_{w}" for b, w in LAYOUTS]
    tags.write(paths, [VALUE] * 4)
    held = line.server.holding(UNIT, 100, 8)
    assert [held[2 * n : 2 * n + 2] for n in range(4)] == [words(raw) for raw in LAYOUTS.values()]
    assert [v.value for v in tags.read(paths)] == [pytest.approx(VALUE, rel=1e-6)] * 4


SIXTY_FOUR = {
    "[s]D/big": {"device": "dev", "address": "HRD121"},
    "[s]D/little": {"device": "dev", "address": "HRD125", "byte_order": "little", "word_order": "little"},
    "[s]I64/cdab": {"device": "dev", "address": "HRI_64129", "word_order": "little"},
    "[s]U64/badc": {"device": "dev", "address": "HRUI_64133", "byte_order": "little"},
}


@with_tags(SIXTY_FOUR)
def test_64_bit_values_round_trip_in_their_layouts(line: Line, tags: TagService) -> None:
    values = [-1234.5678901234, 2.0**60 + 0.5, -(2**62) - 7, 2**64 - 2]
    tags.write(list(SIXTY_FOUR), values)
    assert [v.value for v in tags.read(list(SIXTY_FOUR))] == values
    held = line.server.holding(UNIT, 120, 16)
    assert held[0:4] == words(struct.pack(">d", values[0]))
    assert held[4:8] == words(bytes(reversed(struct.pack(">d", values[1]))))  # DCBA...: every byte reversed
    raw = struct.pack(">q", values[2])
    assert held[8:12] == words(raw[6:8] + raw[4:6] + raw[2:4] + raw[0:2])  # least significant word first
    raw = struct.pack(">Q", values[3])
    assert held[12:16] == words(b"".join(raw[i + 1 : i + 2] + raw[i : i + 1] for i in range(0, 8, 2)))


STRINGS = {
    "[s]Batch": {"device": "dev", "address": "HRS141:4", "type": "String"},
    "[s]Swapped": {"device": "dev", "address": "HRS146:3", "byte_order": "little"},
    "[s]OtherDevice": {"device": "swapped", "address": "HR150"},
}


@with_tags(STRINGS)
def test_strings_over_n_registers(line: Line, tags: TagService) -> None:
    tags.write(["[s]Batch", "[s]Swapped"], ["PUMP-7", "AB1"])
    assert line.server.holding(UNIT, 140, 4) == [0x5055, 0x4D50, 0x2D37, 0x0000]  # "PU" "MP" "-7", NUL padded
    assert line.server.holding(UNIT, 145, 3) == [0x4241, 0x0031, 0x0000]  # each register's bytes swapped
    assert [v.value for v in tags.read(["[s]Batch", "[s]Swapped"])] == ["PUMP-7", "AB1"]
    line.server.clear()
    with pytest.raises(TagRangeError, match=r"9 characters do not fit 4 registers \(8 characters\).*nothing was sent"):
        tags.write(["[s]Batch"], ["PUMP-1234"])
    with pytest.raises(TagTypeError, match="not ASCII"):
        tags.write(["[s]Batch"], ["Pümpe"])
    with pytest.raises(TagRangeError, match="does not fit"):  # checked before the first device is sent to
        tags.write(["[s]OtherDevice", "[s]Batch"], [5, "PUMP-1234"])
    assert line.server.writes() == []
    line.server.set_holding(UNIT, 140, [0x4142, 0x0043, 0x4445])  # "AB", "\0C", "DE": a read stops at the NUL
    assert tags.read(["[s]Batch"])[0].value == "AB"


BITS = {
    "[b]Run": {"device": "dev", "address": "HR161.0"},
    "[b]Fault": {"device": "dev", "address": "HR161.15"},
    "[b]Swapped": {"device": "swapped", "address": "HR162.0"},
    "[b]Word": {"device": "dev", "address": "HRUS161"},
    "[b]Input": {"device": "dev", "address": "IR1.2"},
    "[b]NoMask": {"device": "nomask", "address": "HR161.3"},
    "[b]NoMaskRmw": {"device": "nomask", "address": "HR162.3", "rmw": True},
    "[b]Declared": {"device": "declared", "address": "HR163.1"},
    "[b]DeclaredRmw": {"device": "declared", "address": "HR163.2", "rmw": True},
}


@with_tags(BITS)
def test_bits_of_registers_are_mask_written_leaving_the_other_bits(line: Line, tags: TagService) -> None:
    line.server.set_holding(UNIT, 160, [0x0F0E, 0x0000])
    assert [v.value for v in tags.read(["[b]Run", "[b]Fault"])] == [False, False]
    line.server.clear()
    tags.write(["[b]Run", "[b]Fault"], [True, True])
    assert line.server.holding(UNIT, 160) == [0x8F0F]  # bits 0 and 15 set, the rest as they were
    [mask] = line.server.writes()  # both bits of the register in one FC22, nothing else
    assert (mask.function_code, mask.address, mask.values) == (22, 160, (0x7FFE, 0x8001))
    assert [v.value for v in tags.read(["[b]Run", "[b]Fault"])] == [True, True]
    tags.write(["[b]Swapped"], [True])  # bit 0 of a byte-swapped register is the wire's bit 8
    assert line.server.holding(UNIT, 161) == [0x0100]
    with pytest.raises(TagError, match="both write HR161.*nothing was sent"):
        tags.write(["[b]Word", "[b]Run"], [0, False])
    with pytest.raises(ReadOnlyTag):
        tags.write(["[b]Input"], [True])


@with_tags(BITS)
def test_without_mask_write_a_bit_is_written_only_where_the_tag_allows_read_modify_write(
    line: Line, tags: TagService
) -> None:
    line.server.set_holding(NO_MASK, 160, [0x00F0, 0x00F0, 0x00F0])
    line.server.clear()
    # mask_write = false: known before anything is sent
    with pytest.raises(TagError, match=r"read-modify-write.*mask_write = false.*set rmw = true.*nothing was sent"):
        tags.write(["[b]Declared"], [True])
    assert line.server.received() == []
    tags.write(["[b]DeclaredRmw"], [True])
    assert [(r.function_code, r.address) for r in line.server.received()] == [(3, 162), (6, 162)]
    assert line.server.holding(NO_MASK, 162) == [0x00F4]
    # a device that only says so by refusing function 22: the refused request wrote nothing
    line.server.clear()
    with pytest.raises(DeviceError, match=r"ILLEGAL FUNCTION.*set rmw = true"):
        tags.write(["[b]NoMask"], [True])
    assert line.server.holding(NO_MASK, 160) == [0x00F0]
    tags.write(["[b]NoMaskRmw"], [True])  # learned: no second FC22, straight to read and write
    assert [(r.function_code, r.address) for r in line.server.received()] == [(22, 160), (3, 161), (6, 161)]
    assert line.server.holding(NO_MASK, 160, 2) == [0x00F0, 0x00F8]
    with pytest.raises(TagError, match="nothing was sent"):
        tags.write(["[b]NoMask"], [False])
    assert len(line.server.received()) == 3
