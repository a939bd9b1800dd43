"""Commands that steer runs: mailbox commands and cancellation."""

from __future__ import annotations

import time

import click

from exchange._cli.common import Context, print_json


@click.command()
@click.argument("run_id")
@click.argument("cmd")
@click.option("--reason", default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def send(obj: Context, run_id: str, cmd: str, reason: str | None, as_json: bool) -> None:
    """Post a mailbox command (HOLD, RESUME, STOP, RESET)."""
    message_id = obj.runtime(load_apps=False).sendCommand(run_id, cmd, reason)
    if as_json:
        print_json({"run": run_id, "cmd": cmd.strip().upper(), "message_id": message_id})
    else:
        click.echo(f"sent {cmd.strip().upper()} to run {run_id} (message {message_id})")


@click.command()
@click.argument("run_id")
@click.option("--reason", default=None)
@click.option("--wait", is_flag=True, help="Wait until the run has stopped.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def cancel(obj: Context, run_id: str, reason: str | None, wait: bool, as_json: bool) -> None:
    """Cancel a run (it stops at its next cancellation point).

    A run that already finished is not touched: one line on stderr (``run X already finished
    (SUCCESS); nothing cancelled``) and exit status 1."""
    runtime = obj.runtime(load_apps=False)
    status = runtime.cancel(run_id, reason)
    if wait:
        deadline = time.monotonic() + 60
        while status not in ("CANCELLED", "SUCCESS", "ERROR") and time.monotonic() < deadline:
            status = runtime.waitFor(run_id, 1.0)["status"]
    if as_json:
        print_json({"run": run_id, "status": status})
    else:
        click.echo(f"cancel requested for run {run_id} (status {status})")


COMMANDS = [send, cancel]

__all__ = ["COMMANDS"]
