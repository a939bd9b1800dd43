"""The ``exchange`` command. Every subcommand goes through the public runtime API.

Errors Exchange raises on purpose (bad input, unknown names) print one line on stderr and exit 1;
usage errors exit 2 (click's convention).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from typing import Any, NoReturn

import click

from exchange.config import Config, load_config
from exchange.errors import ExchangeError
from exchange.workflows.engine.runtime import Runtime

log = logging.getLogger(__name__)


class Context:
    def __init__(self, config_path: str | None) -> None:
        self.config_path = config_path
        self._config: Config | None = None
        self._runtime: Runtime | None = None

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_path)
        return self._config

    def runtime(self, *, load_apps: bool = True) -> Runtime:
        if self._runtime is None:
            from exchange.workflows import apps
            from exchange.workflows.engine.instance import set_runtime

            self._runtime = Runtime(self.config)
            set_runtime(self._runtime)
            if load_apps:
                apps.load(self.config)
        return self._runtime


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, default=str))


def parse_params(items: tuple[str, ...]) -> dict[str, Any]:
    """``-p key=value``: the value is JSON where it parses (``n=3`` → 3), else the string."""
    params: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="-p")
        try:
            params[key.strip()] = json.loads(text)
        except ValueError:
            params[key.strip()] = text
    return params


class ExchangeGroup(click.Group):
    """Turns ExchangeError into a one-line error without a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ExchangeError as exc:
            fail(str(exc))


@click.group(cls=ExchangeGroup)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Config file (default: $EXCHANGE_CONFIG or ./exchange.toml).")
@click.option("--log-level", default=os.environ.get("EXCHANGE_LOG_LEVEL", "WARNING"), show_default=True)
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, log_level: str) -> None:
    """Exchange: durable workflows for plants."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ctx.obj = Context(config_path)


@cli.command()
@click.option("--workers", type=int, default=None, help="Worker threads (default: engine.workers).")
@click.option("--queue", "queues", multiple=True, help="Serve only these queues (default: all).")
@click.pass_obj
def gateway(obj: Context, workers: int | None, queues: tuple[str, ...]) -> None:
    """Run the service in the foreground: recovery, dispatcher, workers."""
    from exchange.workflows.engine.dispatcher import Dispatcher

    runtime = obj.runtime()
    dispatcher = Dispatcher(runtime, workers=workers, queues=queues or None)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    recovered = dispatcher.start()
    click.echo(
        f"gateway {dispatcher.owner} ready: store {runtime.store.url}, {len(runtime.registry.names())} "
        f"workflow(s), {dispatcher.workers} worker(s), recovered {len(recovered)} run(s)",
        err=True,
    )
    stop.wait()
    click.echo("gateway stopping", err=True)
    dispatcher.stop()
    runtime.close()


def _register_commands() -> None:
    from exchange.cli import runs as runs_commands

    for command in runs_commands.COMMANDS:
        cli.add_command(command)
    try:
        from exchange.cli.simulate import simulate
    except ImportError as exc:  # the simulators are an optional part of an install
        log.debug("simulate command unavailable: %s", exc)
    else:
        cli.add_command(simulate)


_register_commands()


def main() -> None:
    cli(prog_name="exchange")


if __name__ == "__main__":
    main()
