"""The ``exchange`` command loads its subcommands when they are named: a gateway (and its restart
after a crash) does not import the tag browser, the cron parser or the simulators; every command of
``exchange._cli`` is still reachable and listed. ``exchange --help``, every command's ``--help`` and a
usage error answer without the engine, the store's SQLAlchemy or a driver (their list comes from
``COMMAND_HELP``, which must say what each command says of itself); a command that reads the store
imports it, and still no driver, nor the HTTP API, nor the OPC UA server of runs. Each is checked in
the ``sys.modules`` of a fresh process."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

import exchange._cli
from exchange._cli.main import COMMAND_HELP, LAZY_COMMANDS, cli, load_command
from tests.harness import ExchangeEnv

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


def test_the_help_of_a_command_not_loaded_is_its_own() -> None:
    assert COMMAND_HELP.keys() == LAZY_COMMANDS.keys()
    for name, text in COMMAND_HELP.items():
        command = load_command(name)
        assert command is not None
        for limit in (30, 45, 60, 10_000):
            assert click.Command(name, help=text).get_short_help_str(limit) == command.get_short_help_str(limit), name


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


# Devices of every protocol in the config: a read command still opens none of them.
PLANT_DEVICES = """
[devices.line]
driver = "opcua"
url = "opc.tcp://127.0.0.1:1/line/"

[devices.skid]
driver = "modbus"
host = "127.0.0.1"
port = 1

[devices.press]
driver = "enip"
host = "127.0.0.1"
"""

# What an answer of the CLI's own (help, a usage error) must not import: the store's SQL library,
# the drivers, the API. A read command needs the store, never the drivers, the API or the OPC UA server.
NOT_FOR_HELP = ("sqlalchemy", "asyncua", "pymodbus", "pycomm3", "fastapi", "exchange._engine.operator.runtime")
NOT_FOR_READING = ("asyncua", "pymodbus", "pycomm3", "fastapi", "uvicorn", "exchange._api", "exchange._opcua_server")
LOADED_MARK = "--- modules ---"
# The entry point as `exchange` calls it, then the modules the process holds (after a mark, since the
# command prints too). A usage error is raised, not printed, without click's standalone mode.
PROBE = ("import sys, click\n"
         "from exchange._cli.main import cli\n"
         "try:\n"
         "    cli.main(args=sys.argv[1:], prog_name='exchange', standalone_mode=False)\n"
         "except (SystemExit, click.UsageError):\n"
         "    pass\n"
         f"print({LOADED_MARK!r})\n"
         "print('\\n'.join(sorted(sys.modules)))\n")


def modules_after(*args: str, cwd: Path | None = None) -> set[str]:
    """The modules a fresh ``exchange ARGS`` process has imported once the command returned."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd, check=True)
    return set(done.stdout.split(LOADED_MARK)[1].split())


def among(loaded: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(name for name in loaded if name.split(".")[0] in packages or name.startswith(packages))


USAGE_ERRORS = {"show-no-run": ["show"], "bad-status": ["runs", "--status", "NOPE"], "unknown-command": ["shwo"],
                "bad-option": ["tags", "write", "--nope"]}


@pytest.mark.parametrize("args", [["--help"], *([name, "--help"] for name in sorted({*LAZY_COMMANDS, "gateway"})),
                                  *USAGE_ERRORS.values()],
                         ids=["help", *(f"{name}-help" for name in sorted({*LAZY_COMMANDS, "gateway"})), *USAGE_ERRORS])
def test_help_and_usage_errors_import_neither_the_engine_nor_sqlalchemy_nor_a_driver(args: list[str]) -> None:
    loaded = modules_after(*args)
    assert f"exchange._cli.{LAZY_COMMANDS.get(args[0], 'main')}" in loaded  # the command was found
    assert among(loaded, NOT_FOR_HELP) == []


@pytest.mark.parametrize("command", ["runs", "prompts"])
def test_a_read_command_imports_the_store_but_no_driver_nor_the_api(tmp_path: Path, command: str) -> None:
    env = ExchangeEnv.create(tmp_path)
    env.config_path.write_text(env.config_path.read_text(encoding="utf-8") + PLANT_DEVICES, encoding="utf-8")
    loaded = modules_after("--config", str(env.config_path), command, cwd=tmp_path)
    assert "exchange._store.store" in loaded  # it did read the store
    assert among(loaded, NOT_FOR_READING) == []
