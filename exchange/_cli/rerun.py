"""``exchange retry`` and ``exchange fork``: a failed run executed again, or a new run that takes
over a run's first steps."""

from __future__ import annotations

import click

from exchange._cli.common import Context, print_json


@click.command()
@click.argument("run_id")
@click.option("--reason", default=None, help="Why; recorded with the retry and shown in `exchange show`.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def retry(obj: Context, run_id: str, reason: str | None, as_json: bool) -> None:
    """Execute an ERROR or CANCELLED run again from where it stopped, with the same id.

    Its recorded steps return their outputs; the failed step runs again with fresh attempts. A run
    in any other status is refused (exit 1, nothing changed)."""
    runtime = obj.runtime(load_apps=False)
    whole_id = runtime.retry(run_id, reason)
    if as_json:
        print_json({"run": whole_id, "status": "ENQUEUED"})
    else:
        click.echo(f"run {whole_id} queued again (ENQUEUED): a gateway executes it from where it stopped")


@click.command()
@click.argument("run_id")
@click.option("--from-step", "from_step", type=int, required=True,
              help="The first step the new run executes; the steps before it are copied.")
@click.option("--reason", default=None, help="Why; recorded in the new run and shown in `exchange show`.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def fork(obj: Context, run_id: str, from_step: int, reason: str | None, as_json: bool) -> None:
    """Start a new run of the run's workflow and parameters whose steps before --from-step are copied
    (replayed, not executed again); the run itself is untouched. Prints the new run's id."""
    runtime = obj.runtime(load_apps=False)
    whole_id = runtime.checked_run_id("fork", run_id)
    new_id = runtime.fork(whole_id, from_step, reason)
    if as_json:
        print_json({"id": new_id, "forked_from": whole_id, "from_step": from_step})
    else:
        click.echo(f"run {new_id} forked from step {from_step} of run {whole_id} (ENQUEUED)")


COMMANDS = [retry, fork]

__all__ = ["COMMANDS"]
