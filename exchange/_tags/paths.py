"""Ignition-style tag paths: ``[provider]Folder/Sub/Tag``.

A path is a provider in square brackets followed by one or more names separated by ``/``. Names
hold letters, digits, ``_``, ``-`` and inner spaces; they cannot be empty and cannot contain ``.``
(Ignition's property separator) or other punctuation. As in Ignition, paths compare without regard
to case: :attr:`TagPath.key` is the lookup key, :func:`str` gives the path as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exchange.errors import TagPathError

EXAMPLE = "[default]Line1/Tank/Level"


@dataclass(frozen=True)
class TagPath:
    provider: str
    names: tuple[str, ...]

    def __str__(self) -> str:
        return f"[{self.provider}]" + "/".join(self.names)

    @property
    def key(self) -> str:
        """The case-insensitive identity of the path."""
        return str(self).casefold()

    @property
    def name(self) -> str:
        return self.names[-1]

    @property
    def folder(self) -> str:
        return "/".join(self.names[:-1])


def _bad_char(text: str) -> str | None:
    for char in text:
        if not (char.isalnum() or char in "_- "):
            return char
    return None


def _check_name(path: str, name: str, position: int, what: str) -> None:
    if not name:
        raise TagPathError(f"tag path {path!r}: the {what} at position {position} is empty")
    if name != name.strip():
        raise TagPathError(f"tag path {path!r}: the {what} {name!r} starts or ends with a space")
    bad = _bad_char(name)
    if bad == ".":
        raise TagPathError(
            f"tag path {path!r}: the {what} {name!r} contains '.' (tag properties are not addressable)"
        )
    if bad is not None:
        raise TagPathError(
            f"tag path {path!r}: the {what} {name!r} contains {bad!r} "
            "(allowed: letters, digits, '_', '-', inner spaces)"
        )


def parse_tag_path(path: Any) -> TagPath:
    """Parse and validate ``path``; TagPathError names the path and what is wrong with it."""
    if not isinstance(path, str) or not path.strip():
        raise TagPathError(f"a tag path must be a non-empty string like {EXAMPLE!r}, got {path!r}")
    text = path.strip()
    if not text.startswith("["):
        raise TagPathError(f"tag path {path!r} must start with a [provider], e.g. {EXAMPLE!r}")
    close = text.find("]")
    if close < 0:
        raise TagPathError(f"tag path {path!r}: the [provider] is not closed with ']'")
    provider = text[1:close]
    if not provider.strip():
        raise TagPathError(f"tag path {path!r}: the [provider] is empty, e.g. {EXAMPLE!r}")
    _check_name(path, provider, 0, "provider")
    rest = text[close + 1 :]
    if not rest:
        raise TagPathError(f"tag path {path!r} names no tag after [{provider}]")
    if "[" in rest or "]" in rest:
        raise TagPathError(f"tag path {path!r}: '[' or ']' after the provider")
    names = rest.split("/")
    for position, name in enumerate(names, start=1):
        _check_name(path, name, position, "name")
    return TagPath(provider, tuple(names))


def is_valid_tag_path(path: Any) -> bool:
    try:
        parse_tag_path(path)
    except TagPathError:
        return False
    return True
