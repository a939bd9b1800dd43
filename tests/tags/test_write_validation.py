"""A tag write is validated once, by the tag layer: the driver gets values already converted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from exchange._config import DeviceConfig, config_from_dict
from exchange._drivers.base import Point
from exchange._tags.service import TagService
from exchange._tags.table import TagDef
from exchange._values import QualifiedValue, Quality
from exchange.errors import ReadOnlyTag, TagTypeError

TAGS = {
    "[p]Speed": {"device": "plc", "address": "HR1"},
    "[p]Rate": {"device": "plc", "address": "HRF3", "bool_numbers": True},
    "[p]Run": {"device": "plc", "address": "C1"},
}


class Recorder:
    """A driver that keeps what it is asked to write (and sends nothing)."""

    def __init__(self, device: DeviceConfig) -> None:
        self.device = device.name
        self.writes: list[list[tuple[Point, Any]]] = []

    def read(self, points: Sequence[Point]) -> list[QualifiedValue]:
        return [QualifiedValue.bad(Quality.BAD_NOT_CONNECTED) for _ in points]

    def write(self, writes: Sequence[tuple[Point, Any]]) -> None:
        self.writes.append(list(writes))

    def retry_now(self) -> None:
        return None

    def close(self) -> None:
        return None


def test_the_driver_gets_each_value_converted_to_its_tag_type() -> None:
    drivers: list[Recorder] = []

    def factory(device: DeviceConfig) -> Recorder:
        drivers.append(Recorder(device))
        return drivers[-1]

    config = config_from_dict({"devices": {"plc": {"driver": "modbus", "host": "127.0.0.1"}}, "tags": TAGS}, env={})
    service = TagService(config, driver_factory=factory)
    try:
        service.write(["[p]Speed", "[p]Rate", "[p]Run"], ["42", True, "on"])
        with pytest.raises(TagTypeError, match="True is a boolean"):  # refused before any driver call
            service.write(["[p]Speed"], [True])
    finally:
        service.close()
    [sent] = drivers[0].writes
    assert [(point.path, value, type(value)) for point, value in sent] == [
        ("[p]Speed", 42, int), ("[p]Rate", 1.0, float), ("[p]Run", True, bool)
    ]


def test_an_access_other_than_rw_fails_closed() -> None:
    """config.py admits only "ro" and "rw"; a TagDef built in code with anything else is read-only."""
    for access in ("ro", "RO", "readonly"):
        with pytest.raises(ReadOnlyTag, match=f'access = "{access}"'):
            TagDef("[p]A", "plc", "HR1", access=access).check_writable()
    TagDef("[p]A", "plc", "HR1", access="rw").check_writable()
