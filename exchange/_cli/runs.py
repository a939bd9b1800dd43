"""Commands that start runs (and follow them, see :mod:`exchange._cli.follow`), and list the workflows.

Bad input never ends in a traceback: the runtime refuses it naming the parameter (one line on stderr,
exit 1; a ``-p`` that is no ``key=value`` or gives a key twice is a usage error, exit 2), and
whatever is printed from the store in text form goes through
:func:`~exchange._cli.render.printable`, so a reason, parameter, error or progress message cannot
send escape sequences to the terminal. ``--json`` output stays exact JSON.
"""

from __future__ import annotations

from typing import Any

import click

from exchange._cli.common import Context, fail, parse_key_values, print_json
from exchange._cli.follow import finish, follow, stop_following, stop_following_on_interrupt
from exchange.errors import WorkflowError


def _start_options(queue: str | None, partition_key: str | None, priority: int | None,
                   dedup_id: str | None, timeout_seconds: float | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if queue:
        options["queue"] = queue
    if partition_key:
        options["partitionKey"] = partition_key
    if priority is not None:
        options["priority"] = priority
    if dedup_id:
        options["deduplicationId"] = dedup_id
    if timeout_seconds is not None:
        options["timeoutSeconds"] = timeout_seconds
    return options


def _params(items: tuple[str, ...]) -> dict[str, Any]:
    """``-p key=value`` items as parameters (see :func:`~exchange._cli.common.parse_key_values`).
    Whether the values fit the workflow is the runtime's check, as for every start."""
    return parse_key_values(items, "-p")


@click.command()
@click.argument("name")
@click.option("-p", "params", multiple=True, metavar="KEY=VALUE", help="A parameter (JSON where it parses).")
@click.option("--json", "as_json", is_flag=True, help="Print the finished run as one JSON object.")
@click.option("--timeout-seconds", type=float, default=None, help="Cancel the run past this time.")
@click.pass_obj
def run(obj: Context, name: str, params: tuple[str, ...], as_json: bool, timeout_seconds: float | None) -> None:
    """Execute one run in this process, showing its progress."""
    from exchange._engine import Dispatcher
    from exchange._plant.record_values import start_sampler
    from exchange.workflows._services import preflight

    runtime = obj.runtime()
    preflight(runtime)
    dispatcher = Dispatcher(runtime, workers=1, claim=False)
    run_id = dispatcher.create_and_submit(name, _params(params),
                                          **_start_options(None, None, None, None, timeout_seconds))
    dispatcher.start()
    sampler = start_sampler(runtime)  # the run's [record] tags
    if not as_json:
        click.echo(f"run {run_id} of {name}", err=True)
    try:
        view = follow(runtime, run_id, live=not as_json)
    except KeyboardInterrupt:
        try:
            runtime.cancel(run_id, "interrupted from the terminal")
        except WorkflowError:
            pass  # it finished just now: nothing to cancel
        view = runtime.wait_for(run_id, 10)
    if sampler is not None:
        sampler.stop()
    dispatcher.stop()
    finish(view, as_json)


@click.command()
@click.argument("name")
@click.option("-p", "params", multiple=True, metavar="KEY=VALUE", help="A parameter (JSON where it parses).")
@click.option("--wait", is_flag=True, help="Follow the run until it finishes.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--queue", default=None)
@click.option("--partition-key", default=None, help="At most one active run per key.")
@click.option("--priority", type=int, default=None, help="Higher runs first (default 0).")
@click.option("--dedup-id", default=None, help="A second start with the same id returns the first run.")
@click.option("--timeout-seconds", type=float, default=None, help="Cancel the run past this time.")
@click.pass_obj
def start(obj: Context, name: str, params: tuple[str, ...], wait: bool, as_json: bool, queue: str | None,
          partition_key: str | None, priority: int | None, dedup_id: str | None,
          timeout_seconds: float | None) -> None:
    """Enqueue a run for a gateway; --wait follows it."""
    runtime = obj.runtime()
    run_id = runtime.start(name, _params(params),
                           **_start_options(queue, partition_key, priority, dedup_id, timeout_seconds))
    if not wait:
        if as_json:
            print_json({"id": run_id})
        else:
            click.echo(run_id)
        return
    stop_following_on_interrupt(run_id)
    if not as_json:
        click.echo(f"run {run_id} of {name} enqueued", err=True)
    try:
        view = follow(runtime, run_id, live=not as_json)
    except KeyboardInterrupt:  # the run belongs to a gateway: stop watching it, not the run
        stop_following(run_id)
    finish(view, as_json)


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def workflows(obj: Context, as_json: bool) -> None:
    """The registered workflows (read from the apps; the store is not opened, nor created)."""
    from exchange._engine import REGISTRY
    from exchange.workflows import apps

    apps.load(obj.config)
    registry = REGISTRY
    items = [
        {"name": d.name, "module": d.module, "parameters": d.parameters(), "description": d.description,
         "code_version": d.code_version}
        for d in registry.all()
    ]
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo("no workflows registered (check [apps] paths)")
    for item in items:
        params = ", ".join(item["parameters"])
        click.echo(f"{item['name']}({params})  {item['module']}  {item['description']}".rstrip())


COMMANDS = [run, start, workflows]

__all__ = ["COMMANDS", "fail"]
