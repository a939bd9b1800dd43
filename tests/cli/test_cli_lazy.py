"""The ``exchange`` command loads its subcommands when they are named: a gateway (and its restart
after a crash) does not import the tag browser, the cron parser or the simulators; every command of
``exchange._cli`` is still reachable and listed."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import click

import exchange._cli
from exchange._cli.main import LAZY_COMMANDS, cli

# What the gateway command does not need: the other commands' own modules.
NOT_FOR_A_GATEWAY = ("exchange._cli.tags", "exchange._cli.tag_browse", "exchange._cli.schedules",
                     "exchange._cli.simulate", "exchange._cli.accounts", "simulators")


def test_every_command_of_the_cli_package_is_in_the_lazy_map() -> None:
    defined: dict[click.Command, str] = {}
    for info in pkgutil.iter_modules(exchange._cli.__path__):
        module = importlib.import_module(f"exchange._cli.{info.name}")
        for command in getattr(module, "COMMANDS", ()):
            defined[command] = info.name
    # a group's subcommands (exchange tags list, ...) come with their group
    groups = [command for command in defined if isinstance(command, click.Group)]
    inside_groups = {sub for group in groups for sub in group.commands.values()}
    top_level = {command.name: module for command, module in defined.items() if command not in inside_groups}
    assert {**top_level, "simulate": "simulate"} == LAZY_COMMANDS


def test_help_lists_every_command_and_an_unknown_one_is_a_usage_error() -> None:
    ctx = click.Context(cli)
    assert set(cli.list_commands(ctx)) >= set(LAZY_COMMANDS) | {"gateway"}
    result = subprocess.run([sys.executable, "-m", "exchange._cli.main", "--help"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0
    listed = {line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == set(LAZY_COMMANDS) | {"gateway"}
    wrong = subprocess.run([sys.executable, "-m", "exchange._cli.main", "shwo"], capture_output=True, text=True,
                           timeout=60)
    assert wrong.returncode == 2 and "No such command 'shwo'" in wrong.stderr


def test_the_gateway_command_does_not_import_the_other_commands() -> None:
    probe = ("import sys, click\n"
             "from exchange._cli.main import cli\n"
             "cli.get_command(click.Context(cli), 'gateway')\n"
             "print('\\n'.join(sorted(sys.modules)))\n")
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                                check=True).stdout.split())
    assert not [name for name in loaded if name.startswith(NOT_FOR_A_GATEWAY)]
    assert "exchange._cli.main" in loaded
