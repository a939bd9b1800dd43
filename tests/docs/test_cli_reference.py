"""docs/cli.md against the ``exchange`` program: every command and option is documented, and every
option the page documents exists.

The page has one ``## `exchange NAME``` section per command, with a usage line naming its
arguments and a table of its options; ``## Global options`` holds the group's own options.
"""

from __future__ import annotations

import click
import pytest

# The program's click group: the one place this test reaches into internals (the console script
# ``exchange`` is ``exchange._cli.main:main``).
from exchange._cli.main import cli
from tests.docs.markdown import code_blocks, first_code, page, sections, table_rows

PAGE = page("cli.md")
GLOBAL = "Global options"


def documented() -> dict[str, tuple[set[str], str]]:
    """Section title (``exchange NAME`` or ``Global options``) -> (its table's options, its text)."""
    found: dict[str, tuple[set[str], str]] = {}
    for section in sections(PAGE):
        title = first_code(section.title) or section.title
        options = {code for row in table_rows(section.body) if (code := first_code(row[0]))}
        found[title] = (options, section.body)
    return found


DOCUMENTED = documented()


def option_names(command: click.Command, *, subcommands: bool = True) -> set[str]:
    """The options of ``command`` as the page names them: the long form, else the short one. A
    group's section documents the options of all its subcommands."""
    names: set[str] = set()
    if subcommands and isinstance(command, click.Group):
        for sub in command.commands.values():
            names |= option_names(sub)
    for param in command.params:
        if isinstance(param, click.Option):
            longs = [o for o in param.opts if o.startswith("--")]
            names.add(longs[0] if longs else param.opts[0])
    return names


def commands() -> dict[str, click.Command]:
    """Every subcommand (loaded: the group loads them when named)."""
    ctx = click.Context(cli)
    found = {name: cli.get_command(ctx, name) for name in cli.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}


def test_every_command_has_a_section_and_every_section_a_command() -> None:
    sections_for_commands = {title.removeprefix("exchange ") for title in DOCUMENTED if title.startswith("exchange ")}
    assert sections_for_commands == set(commands())


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_options_of_each_command_are_documented(name: str) -> None:
    options, _ = DOCUMENTED[f"exchange {name}"]
    assert options == option_names(commands()[name])


def usages(block: str) -> list[str]:
    """The usage lines of a code block: each starts with ``exchange``; lines that do not continue
    the one before (a long usage line wraps)."""
    found: list[str] = []
    for line in block.splitlines():
        if line.startswith("exchange ") or not found:
            found.append(line)
        else:
            found[-1] += " " + line.strip()
    return found


def leaf_commands(name: str, command: click.Command) -> list[tuple[str, click.Command]]:
    """``(exchange NAME [SUB], command)`` for a command, or for each subcommand of a group."""
    if isinstance(command, click.Group):
        return [(f"exchange {name} {sub}", c) for sub, c in sorted(command.commands.items())]
    return [(f"exchange {name}", command)]


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_usage_line_names_the_arguments(name: str) -> None:
    _, body = DOCUMENTED[f"exchange {name}"]
    for prefix, command in leaf_commands(name, commands()[name]):
        # a command may have several usage lines (one per way of using it): together they show all
        found = [u for b in code_blocks(body) for u in usages(b.body) if u == prefix or u.startswith(prefix + " ")]
        assert found, f"{prefix}: no usage line"
        usage = " ".join(found)
        arguments = [p.human_readable_name for p in command.params if isinstance(p, click.Argument)]
        for argument in arguments:
            assert argument in usage, f"{prefix}: the usage line does not name {argument}"
        for option in option_names(command):
            assert option in usage, f"{prefix}: the usage line does not show {option}"


def test_the_global_options_are_documented() -> None:
    options, _ = DOCUMENTED[GLOBAL]
    assert options == option_names(cli, subcommands=False) | {"--help"}
