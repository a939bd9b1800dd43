"""Commands that list and show runs. Text output goes through
:func:`~exchange._cli.render.printable`; ``--json`` output stays exact JSON."""

from __future__ import annotations

import click

from exchange._cli.common import Context, print_json
from exchange._cli.render import render_run, render_runs


@click.command("runs")
@click.option("--status", default=None, help="ENQUEUED, PENDING, RUNNING, SUCCESS, ERROR or CANCELLED.")
@click.option("--workflow", default=None)
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def runs_command(obj: Context, status: str | None, workflow: str | None, limit: int, as_json: bool) -> None:
    """List runs, newest first."""
    runs = obj.runtime(load_apps=False).listRuns(status=status, workflow=workflow, limit=limit)
    if as_json:
        print_json(runs)
    else:
        click.echo(render_runs(runs))


@click.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def show(obj: Context, run_id: str, as_json: bool) -> None:
    """One run with its steps and events."""
    view = obj.runtime(load_apps=False).getRun(run_id)
    if as_json:
        print_json(view)
    else:
        click.echo(render_run(view))


COMMANDS = [runs_command, show]

__all__ = ["COMMANDS"]
