"""The ``exchange`` command. Every subcommand goes through the public runtime API.

Errors Exchange raises on purpose (bad input, unknown names, a finished run that cannot be cancelled
or sent a command) print one line on stderr and exit 1; usage errors exit 2 (click's convention).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from exchange._cli.common import Context, collector_paused, fail
from exchange._cli.render import printable
from exchange._engine import PREFIX_MIN_CHARS, RUN_ID_CHARS
from exchange.errors import ExchangeError, StoreError, UnknownRun

# Nothing above imports the engine, the store or SQLAlchemy: `exchange --help`, a usage error and the
# command's own options answer without them (tests/cli/test_cli_lazy.py). A command imports them when
# it opens the store (Context.runtime), the gateway below when it starts.
if TYPE_CHECKING:
    from exchange._cli.surfaces import Surfaces
    from exchange._engine import Dispatcher, Runtime

log = logging.getLogger(__name__)


# Subcommand -> the module of exchange._cli that defines it (in its COMMANDS, or ``simulate``). They
# are imported when named or listed, not at start: `exchange gateway` (and a gateway's restart after
# a crash) does not pay for the tag browser, the schedules' cron parser or the simulators.
LAZY_COMMANDS: dict[str, str] = {
    "run": "runs", "start": "runs", "workflows": "runs",
    "runs": "listing", "show": "listing",
    "follow": "follow",
    "send": "steer", "cancel": "steer",
    "retry": "rerun", "fork": "rerun",
    "prompts": "prompts", "answer": "prompts", "verify": "prompts",
    "users": "accounts", "tokens": "accounts",
    "tags": "tags",
    "maintenance": "maintenance", "retention": "maintenance",
    "schedules": "schedules",
    "phases": "phases",
    "units": "units",
    "check-replay": "replay", "export-run": "replay",
    "record": "record", "audit": "audit",
    "sign": "signatures", "release": "signatures", "review": "signatures",
    "simulate": "simulate",
}


# What `exchange --help` says of each lazy command: the first sentence of its docstring, so that the
# list does not import every command's module (and the engine, the store, the tag service with
# them). tests/cli/test_cli_lazy.py checks each against the command's own help.
COMMAND_HELP: dict[str, str] = {
    "answer": "Answer the open prompt KEY of run RUN_ID.",
    "audit": "The tamper-evident audit trail of runs: check that no event or step was changed or deleted.",
    "cancel": "Cancel a run (it stops at its next cancellation point).",
    "check-replay": "Replay runs' recorded histories against the workflow code on disk now, executing nothing.",
    "export-run": "Print a run's recorded history as JSON: a fixture for exchange.workflows.testing.replay_history.",
    "follow": "Follow a run live until it finishes: its state, progress, steps (on stderr).",
    "fork": "Start a new run of the run's workflow and parameters whose steps before --from-step are copied "
            "(replayed, not executed again); the run itself is untouched.",
    "maintenance": "Drain every gateway before an update (start nothing new, let runs finish), and back.",
    "phases": "The config's equipment phases: unit, the state their PLC reports now, owner, commanding run.",
    "prompts": "The prompts that wait for a person (open, or answered and waiting for verification), oldest first.",
    "release": "Release the batch of the finished run RUN_ID: a signature meaning \"released\" by the Exchange "
               "user --user NAME, with their password (always asked).",
    "review": "Finished runs for review by exception: each with its exceptions counted by kind, its signatures "
              "and its release (`exchange record RUN` shows one whole).",
    "sign": "Sign the batch record of run RUN_ID as the Exchange user --user NAME, with their password (asked "
            "again at each signing) and a --meaning; the signature keeps the sha256 of the record as signed.",
    "record": "The batch record of a run for review and release: steps, commands, prompts, tag writes, exceptions.",
    "retention": "Delete finished runs as [retention] says (gateways do it every interval_minutes).",
    "retry": "Execute an ERROR or CANCELLED run again from where it stopped, with the same id.",
    "run": "Execute one run in this process, showing its progress.",
    "runs": "List runs, newest first; the filters combine.",
    "schedules": "The config's schedules: list them, pause or resume one on every gateway, trigger one now.",
    "send": "Post a mailbox command (HOLD, RESUME, STOP, ABORT, RESET).",
    "show": "One run with its steps and events (RUN_ID: the id or a unique prefix of it).",
    "simulate": "Serve a simulated plant: your config's devices (--from-config), or the demo line.",
    "start": "Enqueue a run for a gateway; --wait follows it.",
    "tags": "The configured tags: list, read, watch, write and call a method (audited), and the audit of both.",
    "tokens": "API tokens for programs (Authorization: Bearer TOKEN).",
    "units": "The config's units: class, the run holding each one and since when, the runs waiting.",
    "users": "Users of the HTTP API and the console (roles: viewer < operator < engineer < admin, and the "
             "config's [roles.NAME]).",
    "verify": "Verify the answer of prompt KEY of run RUN_ID as the Exchange user --user NAME, with their password "
              "(a different person from who answered, with at least the prompt's verify role); with --reject, "
              "send it back instead.",
    "workflows": "The registered workflows (read from the apps; the store is not opened, nor created).",
}


def load_command(name: str) -> click.Command | None:
    """The subcommand ``name`` of :data:`LAZY_COMMANDS`, imported now; None when its module cannot
    be imported (the simulators are an optional part of an install)."""
    try:
        module = importlib.import_module(f"exchange._cli.{LAZY_COMMANDS[name]}")
    except ImportError as exc:
        log.debug("command %s unavailable: %s", name, exc)
        return None
    found: list[click.Command] = [*getattr(module, "COMMANDS", ()), *([module.simulate] if name == "simulate" else [])]
    return next(command for command in found if command.name == name)


class ExchangeGroup(click.Group):
    """Loads its subcommands when they are named (:data:`LAZY_COMMANDS`); turns ExchangeError into a
    one-line error without a traceback; the line is made printable (no control character or
    undecodable byte of the input reaches the terminal as such)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | {name for name in LAZY_COMMANDS if self.get_command(ctx, name)})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of ``--help`` as click writes it, with each lazy command not loaded yet described
        by :data:`COMMAND_HELP` (listed when its module is installed), not imported."""
        listed: dict[str, click.Command] = {name: command for name, command in self.commands.items()
                                            if not command.hidden}
        for name in LAZY_COMMANDS.keys() - self.commands.keys():
            if importlib.util.find_spec(f"exchange._cli.{LAZY_COMMANDS[name]}") is not None:
                listed[name] = click.Command(name, help=COMMAND_HELP[name])
        if not listed:
            return
        limit = formatter.width - 6 - max(len(name) for name in listed)  # click's own spacing
        with formatter.section("Commands"):
            formatter.write_dl([(name, listed[name].get_short_help_str(limit)) for name in sorted(listed)])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            command = load_command(cmd_name)
            if command is None:
                return None
            self.add_command(command)
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ExchangeError as exc:
            message = str(exc)
            if isinstance(exc, UnknownRun) and len(exc.run_id) < PREFIX_MIN_CHARS:
                message += " (`exchange runs` lists them)"  # the error says how many characters it takes
            elif isinstance(exc, UnknownRun) and len(exc.run_id) < RUN_ID_CHARS:
                message += " (no run id starts with it; `exchange runs` lists them)"
            fail(printable(message))


@click.group(cls=ExchangeGroup)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Config file (default: $EXCHANGE_CONFIG or ./exchange.toml).")
@click.option("--log-level", default=os.environ.get("EXCHANGE_LOG_LEVEL", "WARNING"), show_default=True)
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, log_level: str) -> None:
    """Exchange: durable workflows for plants."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx.obj = Context(config_path)


def _check_address(parse: Callable[[Any, str], object], value: str | None, option: str) -> None:
    """Refuse a bad ``option`` address as click does a bad option (``parse`` raises ConfigError)."""
    if value is None:
        return
    try:
        parse(value, option)
    except ExchangeError as exc:
        raise click.BadParameter(str(exc).removeprefix(option + " "), param_hint=option) from None


@cli.command()
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker threads (default: engine.workers).")
@click.option("--queue", "queues", multiple=True, help="Serve only these queues (default: all).")
@click.option("--standby", is_flag=True,
              help="Load everything, then wait until the active gateway of this node dies and take over.")
@click.option("--api", "api_listen", default=None, metavar="HOST:PORT",
              help="Serve the HTTP API here (overrides [api] listen; port 0: a free port, printed).")
@click.option("--opcua-server", "opcua_listen", default=None, metavar="URL",
              help="Serve the runs over OPC UA here, opc.tcp://HOST:PORT/PATH (overrides [opcua_server] listen).")
@click.pass_obj
def gateway(obj: Context, workers: int | None, queues: tuple[str, ...], standby: bool, api_listen: str | None,
            opcua_listen: str | None) -> None:
    """Run the service in the foreground: recovery, dispatcher, workers, the HTTP API when
    [api] listen or --api says where, the OPC UA server of runs when [opcua_server] listen or
    --opcua-server does."""
    with collector_paused():
        from exchange._cli.startup import Phases
        from exchange._cli.surfaces import Surfaces
        from exchange._config import parse_listen, parse_opcua_listen
        from exchange._engine import Dispatcher, RetentionKeeper
        from exchange.workflows import apps
        from exchange.workflows._services import preflight

    phases = Phases()
    _check_address(parse_listen, api_listen, "--api")
    _check_address(parse_opcua_listen, opcua_listen, "--opcua-server")
    config = obj.config
    phases.mark("config")
    runtime = obj.runtime(load_apps=False, create=True)
    phases.mark("store")
    apps.load(config)
    phases.mark("apps")
    preflight(runtime)
    phases.mark("services")
    # What could stop the API or the OPC UA server is checked before anything runs; they are served
    # after the recovered runs are resumed (a standby: before it waits). See exchange._cli.surfaces.
    surfaces = Surfaces(runtime, api_listen or config.api.listen, opcua_listen or config.opcua_server.listen)
    surfaces.check()
    dispatcher = Dispatcher(runtime, workers=workers, queues=queues or None)
    housekeeping = RetentionKeeper(runtime, dispatcher.owner)  # [retention] archive_dir checked now
    if standby:
        surfaces.start()
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
        dispatcher.request_stop()  # also ends a standby's wait

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if standby:
        click.echo(f"gateway {dispatcher.owner} standby: waiting for the active gateway of this node to stop",
                   err=True)
    try:
        recovered = dispatcher.start(standby=standby)
    except StoreError:
        if not (standby and stop.is_set()):
            raise
        click.echo("gateway standby stopped", err=True)
        surfaces.stop()
        runtime.close()
        return
    phases.mark("recovery")
    log.info("start-up: %s", phases)
    try:
        surfaces.start()
    except ExchangeError as exc:  # what surfaces.check() could not foresee: stop as at SIGTERM, exit 1
        click.echo("error: " + " ".join(printable(str(exc)).split()), err=True)
        _shut_down(runtime, dispatcher, surfaces, exit_code=1)
        sys.exit(1)
    click.echo(
        f"gateway {dispatcher.owner} ready: store {runtime.store.url}, {len(runtime.registry.names())} "
        f"workflow(s), {dispatcher.workers} worker(s), recovered {len(recovered)} run(s)",
        err=True,
    )
    from exchange._plant.attention_hook import AttentionWebhook

    housekeeping.start()
    webhook = AttentionWebhook(runtime, dispatcher.owner)
    webhook.start()
    plant = _plant_features(runtime)
    watchdog = _watchdog(runtime)
    from exchange._plant.record_values import start_sampler

    sampler = start_sampler(runtime)  # the [record] tags of the runs executing here
    wait_for_signal(stop)
    click.echo("gateway stopping", err=True)
    if sampler is not None:
        sampler.stop()
    if watchdog is not None:
        watchdog.stop()
    if plant is not None:
        plant.stop()
    webhook.stop()
    housekeeping.stop()
    _shut_down(runtime, dispatcher, surfaces)


# How long the main thread sleeps at a time while it waits for SIGTERM or SIGINT: the most a stop can
# be late when the kernel delivers the signal to another thread (see wait_for_signal).
SIGNAL_CHECK_SECONDS = 0.25


def wait_for_signal(stop: threading.Event) -> None:
    """Wait until ``stop`` is set by a signal handler.

    Python runs signal handlers in the main thread only, between two bytecodes. The kernel delivers a
    signal sent to the process to any one of its threads: when it is not the main thread (the main
    thread was not on a CPU and had a signal pending already, or is being traced), a main thread
    asleep in ``Event.wait()`` without a timeout is never woken to run the handler, and the gateway
    goes on as if it had not been asked to stop. Waking up every SIGNAL_CHECK_SECONDS lets the
    handler run wherever the signal landed."""
    while not stop.wait(SIGNAL_CHECK_SECONDS):
        pass


def _shut_down(runtime: Runtime, dispatcher: Dispatcher, surfaces: Surfaces, *, exit_code: int = 0) -> None:
    """Stop serving and executing, then close the store; a run still inside a step ends the process
    (with ``exit_code``)."""
    surfaces.stop()
    busy = dispatcher.stop(runtime.config.engine.stop_timeout_seconds, abandon=False)
    if busy:
        # A step body cannot be stopped from outside its thread, and releasing the node lock or the
        # store under it would let a standby run the same step at the same time. Ending the process
        # stops the body and frees the lock in one go; the run resumes where its record ends.
        click.echo(
            f"gateway stopped with {len(busy)} run(s) still inside a step; they resume on the next start",
            err=True,
        )
        sys.stderr.flush()
        os._exit(exit_code)
    runtime.close()


def _watchdog(runtime: Any) -> Any:
    """The heartbeat of [watchdog], when configured (started here, once this gateway is active)."""
    if runtime.config.watchdog.tag is None:
        return None
    from exchange._plant.watchdog import Watchdog
    from exchange.workflows._services import TAGS

    watchdog = Watchdog(runtime.services.get(TAGS), runtime.config.watchdog)
    watchdog.start()
    return watchdog


def _plant_features(runtime: Any) -> Any:
    """Schedules, triggers and command tags, when the config has any (started here)."""
    config = runtime.config
    if not (config.schedules or config.triggers or config.command_tags):
        return None
    from exchange._plant.runner import PlantFeatures
    from exchange.workflows._services import TAGS

    plant = PlantFeatures(runtime, runtime.services.get(TAGS))
    plant.start()
    return plant


def main() -> None:
    cli(prog_name="exchange")


if __name__ == "__main__":
    main()
