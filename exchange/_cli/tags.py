"""``exchange tags``: look at and write the configured tags from the command line (commissioning).

``list`` and ``read`` (:mod:`exchange._cli.tag_browse`), ``watch`` (:mod:`exchange._cli.tag_watch`).
"""

from __future__ import annotations

import click

from exchange._cli import tag_browse, tag_watch


@click.group()
def tags() -> None:
    """The configured tags: list, read, watch."""


for _module in (tag_browse, tag_watch):
    for _command in _module.COMMANDS:
        tags.add_command(_command)

COMMANDS = [tags]

__all__ = ["COMMANDS"]
