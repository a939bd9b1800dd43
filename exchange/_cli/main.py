"""The ``exchange`` command. Every subcommand goes through the public runtime API.

Errors Exchange raises on purpose (bad input, unknown names, a finished run that cannot be cancelled
or sent a command) print one line on stderr and exit 1; usage errors exit 2 (click's convention).
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

# The imports below make some 77,000 objects that the cyclic collector tracks and that live as long
# as the process, SQLAlchemy's most of all. Collecting while they are made walks them again and again
# and frees next to nothing: 40-60 ms of a gateway's start here, a tenth of its imports. So the collector
# pauses for them, then freezes them (no later collection walks them either: the pre-fork advice of
# the gc module's docs, which suits the test suite's zygote too) and is as it was before.
_collecting = gc.isenabled()
gc.disable()

import click  # noqa: E402

from exchange._cli.common import Context, fail  # noqa: E402
from exchange._cli.render import printable  # noqa: E402
from exchange._engine import PREFIX_MIN_CHARS, RUN_ID_CHARS  # noqa: E402
from exchange.errors import ExchangeError, StoreError, UnknownRun  # noqa: E402
from exchange.workflows._services import preflight  # noqa: E402

gc.freeze()
if _collecting:
    gc.enable()

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
    "simulate": "simulate",
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
    from exchange._cli.startup import Phases
    from exchange._cli.surfaces import Surfaces
    from exchange._config import parse_listen, parse_opcua_listen
    from exchange._engine import Dispatcher
    from exchange.workflows import apps

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
    if standby:
        surfaces.start()
    dispatcher = Dispatcher(runtime, workers=workers, queues=queues or None)
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
    from exchange._engine import RetentionKeeper
    from exchange._plant.attention_hook import AttentionWebhook

    housekeeping = RetentionKeeper(runtime, dispatcher.owner)
    housekeeping.start()
    webhook = AttentionWebhook(runtime, dispatcher.owner)
    webhook.start()
    plant = _plant_features(runtime)
    watchdog = _watchdog(runtime)
    wait_for_signal(stop)
    click.echo("gateway stopping", err=True)
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
