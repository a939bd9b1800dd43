"""``exchange tags``: look at and write the configured tags from the command line (commissioning).

``list`` and ``read`` (:mod:`exchange._cli.tag_browse`), ``watch`` (:mod:`exchange._cli.tag_watch`),
``write`` and ``audit`` (:mod:`exchange._cli.tag_write`), ``call`` (:mod:`exchange._cli.tag_call`).
"""

from __future__ import annotations

import click

from exchange._cli import tag_browse, tag_call, tag_watch, tag_write


@click.group()
def tags() -> None:
    """The configured tags: list, read, watch, write and call a method (audited), and the audit of both."""


for _module in (tag_browse, tag_watch, tag_write, tag_call):
    for _command in _module.COMMANDS:
        tags.add_command(_command)

COMMANDS = [tags]

__all__ = ["COMMANDS"]
