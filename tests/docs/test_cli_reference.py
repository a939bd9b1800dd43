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


def option_names(command: click.Command) -> set[str]:
    """The options of ``command`` as the page names them: the long form, else the short one."""
    names: set[str] = set()
    for param in command.params:
        if isinstance(param, click.Option):
            longs = [o for o in param.opts if o.startswith("--")]
            names.add(longs[0] if longs else param.opts[0])
    return names


def commands() -> dict[str, click.Command]:
    return dict(cli.commands)


def test_every_command_has_a_section_and_every_section_a_command() -> None:
    sections_for_commands = {title.removeprefix("exchange ") for title in DOCUMENTED if title.startswith("exchange ")}
    assert sections_for_commands == set(commands())


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_options_of_each_command_are_documented(name: str) -> None:
    options, _ = DOCUMENTED[f"exchange {name}"]
    assert options == option_names(commands()[name])


@pytest.mark.parametrize("name", sorted(commands()))
def test_the_usage_line_names_the_arguments(name: str) -> None:
    _, body = DOCUMENTED[f"exchange {name}"]
    usage = next(b.body for b in code_blocks(body) if b.body.startswith(f"exchange {name}"))
    arguments = [p.human_readable_name for p in commands()[name].params if isinstance(p, click.Argument)]
    for argument in arguments:
        assert argument in usage, f"exchange {name}: the usage line does not name {argument}"
    for option in option_names(commands()[name]):
        assert option in usage, f"exchange {name}: the usage line does not show {option}"


def test_the_global_options_are_documented() -> None:
    options, _ = DOCUMENTED[GLOBAL]
    assert options == option_names(cli) | {"--help"}
