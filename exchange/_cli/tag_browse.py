"""``exchange tags list`` and ``exchange tags read``: the configured tags, and their values now.

Neither opens the store. ``read`` exits :data:`EXIT_NOT_GOOD` when a value read is not Good (a device
down, an address it does not have), so a script can tell "read, but not usable" from a refusal (1).
"""

from __future__ import annotations

import re
import sys

import click

from exchange._cli.common import Context, fail, print_json
from exchange._cli.render import printable
from exchange._cli.tag_view import open_service, reading_dict, reading_line, type_name
from exchange._tags.table import TagDef

EXIT_NOT_GOOD = 3  # every tag was read, and at least one value is not Good


def _matcher(pattern: str) -> re.Pattern[str]:
    """PATTERN as a search: any case, ``*`` any run of characters, ``?`` one; all else literal (the
    ``[provider]`` brackets of a tag path are not a character class)."""
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.IGNORECASE)


def _limits(tag: TagDef) -> str:
    if tag.min_value is None and tag.max_value is None:
        return ""
    low = "" if tag.min_value is None else f"{tag.min_value:g}"
    high = "" if tag.max_value is None else f"{tag.max_value:g}"
    return f"{low}..{high}"


def _access(tag: TagDef) -> str:
    if tag.access == "rw" and not tag.writable:
        return "ro (protocol)"  # the config allows it, the protocol cannot write it (Modbus IR, DI)
    return tag.access


def _listed(tag: TagDef) -> dict[str, object]:
    return {"path": tag.path, "device": tag.device, "address": tag.address,
            "type": tag.type_name, "access": tag.access,
            "writable": tag.access == "rw" and tag.writable, "min": tag.min_value, "max": tag.max_value,
            "on_doubt": tag.on_doubt}


@click.command("list")
@click.argument("pattern", required=False)
@click.option("--device", default=None, help="Only the tags of this device.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def list_tags(obj: Context, pattern: str | None, device: str | None, as_json: bool) -> None:
    """The configured tags: path, device, type, address, access and limits.

    PATTERN keeps the tags whose path contains it (any case; * and ? are wildcards)."""
    with open_service(obj) as service:
        tags = sorted(service.table, key=lambda t: t.path.lower())
        if device is not None:
            devices = sorted(obj.config.devices)
            if device not in devices:
                fail(f"unknown device {device!r} (devices: {', '.join(devices) or 'none'})")
            tags = [t for t in tags if t.device == device]
        if pattern is not None:
            matcher = _matcher(pattern)
            tags = [t for t in tags if matcher.search(t.path)]
    if as_json:
        print_json([_listed(t) for t in tags])
        return
    if not tags:
        click.echo("no tags match" if len(service.table) else "no tags configured ([tags] in the config)")
        return
    rows = [("PATH", "DEVICE", "TYPE", "ADDRESS", "ACCESS", "LIMITS")]
    rows += [(t.path, t.device, type_name(t), t.address, _access(t), _limits(t)) for t in tags]
    widths = [max(len(printable(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(printable(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


@click.command("read")
@click.argument("paths", metavar="PATH...", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def read_tags(obj: Context, paths: tuple[str, ...], as_json: bool) -> None:
    """Read tags now: value, quality and timestamp of each (one request per device).

    Exit 3 when a value is not Good; an unknown tag is refused before anything is read (exit 1)."""
    with open_service(obj) as service:
        tags = [service.tag(path) for path in paths]  # every path checked before anything is read
        readings = service.read_tags(tags, explicit=True)
    if as_json:
        print_json([reading_dict(t, r) for t, r in zip(tags, readings, strict=True)])
    else:
        width = max(len(printable(t.path)) for t in tags)
        for tag, reading in zip(tags, readings, strict=True):
            click.echo(reading_line(tag, reading, width))
    if not all(r.quality.is_good for r in readings):
        sys.exit(EXIT_NOT_GOOD)


COMMANDS = [list_tags, read_tags]

__all__ = ["COMMANDS", "EXIT_NOT_GOOD"]
