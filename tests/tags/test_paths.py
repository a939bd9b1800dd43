"""Ignition-style tag path validation."""

from __future__ import annotations

import pytest

from exchange._tags.paths import parse_tag_path
from exchange.errors import TagPathError


@pytest.mark.parametrize(
    ("text", "provider", "names"),
    [
        ("[plant]Line1/Tank/Level", "plant", ("Line1", "Tank", "Level")),
        ("[default]Pump_1", "default", ("Pump_1",)),
        ("  [my-prov]Area 51/Fan-2 Speed ", "my-prov", ("Area 51", "Fan-2 Speed")),
        ("[plant]Überlauf/Höhe", "plant", ("Überlauf", "Höhe")),
    ],
)
def test_valid_paths(text: str, provider: str, names: tuple[str, ...]) -> None:
    path = parse_tag_path(text)
    assert (path.provider, path.names) == (provider, names)
    assert str(path) == text.strip()


def test_paths_compare_without_case() -> None:
    assert parse_tag_path("[Plant]LINE1/tank").key == parse_tag_path("[plant]Line1/Tank").key


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "non-empty string"),
        (42, "non-empty string"),
        (None, "non-empty string"),
        ("Line1/Tank", "must start with a [provider]"),
        ("[plant Line1/Tank", "not closed"),
        ("[]Line1", "[provider] is empty"),
        ("[plant]", "names no tag"),
        ("[plant]Line1//Tank", "name at position 2 is empty"),
        ("[plant]Line1/Tank/", "name at position 3 is empty"),
        ("[plant]/Tank", "name at position 1 is empty"),
        ("[plant]Tank.Value", "contains '.'"),
        ("[plant]Tank/Level*", "contains '*'"),
        ("[plant]Tank/ Level", "starts or ends with a space"),
        ("[plant]Tank[2]", "'[' or ']' after the provider"),
        ("[pl/ant]Tank", "provider"),
    ],
)
def test_malformed_paths_name_the_path_and_the_problem(text: object, fragment: str) -> None:
    with pytest.raises(TagPathError) as caught:
        parse_tag_path(text)
    assert fragment in str(caught.value)
    if isinstance(text, str) and text:
        assert repr(text) in str(caught.value)
