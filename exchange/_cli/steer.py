"""Commands that steer runs: mailbox commands and cancellation."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from exchange._cli.common import Context, print_json
from exchange._cli.render import printable


def _signer_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--user``, ``--password-env`` and ``--meaning``: who acts, and signs when the action needs it."""
    for option in reversed((
        click.option("--user", "user", metavar="NAME", default=None,
                     help="The Exchange user who acts (their password is asked, hidden), held to their role; "
                          "needed when [signatures] required_for lists the action."),
        click.option("--password-env", metavar="VAR", default=None,
                     help="Read the user's password from this environment variable instead of asking."),
        click.option("--meaning", default=None, help="What the signature means (default: the action's)."),
    )):
        command = option(command)
    return command


WAIT_TIMEOUT_SECONDS = 30.0
EXIT_DROPPED = 1  # like every refusal
EXIT_WAIT_TIMED_OUT = 3  # the command is still in the mailbox: the run has not received it yet


@click.command()
@click.argument("run_id")
@click.argument("cmd")
@click.option("--reason", default=None)
@click.option("--strict", is_flag=True, help="Refuse (exit 1, nothing sent) a command the run's state will not accept.")
@click.option("--wait", is_flag=True, help="Wait until the run consumed or dropped the command; say which.")
@click.option("--timeout-seconds", type=click.FloatRange(min=0), default=None,
              help=f"How long --wait waits (default {WAIT_TIMEOUT_SECONDS:g}).")
@_signer_options
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def send(obj: Context, run_id: str, cmd: str, reason: str | None, strict: bool, wait: bool,
         timeout_seconds: float | None, user: str | None, password_env: str | None, meaning: str | None,
         as_json: bool) -> None:
    """Post a mailbox command (HOLD, RESUME, STOP, ABORT, RESET).

    Warns on stderr when the run's state will not accept it (--strict: refuses, exit 1). With
    --wait, exit 0 when the run consumed it, 1 when it dropped it, 3 when the wait timed out. A
    command ``[signatures] required_for`` lists is signed by --user NAME with their password
    (refused at once without, exit 2)."""
    from exchange._cli.signatures import signing_for
    from exchange._roles import COMMAND

    if timeout_seconds is not None and not wait:
        raise click.UsageError("--timeout-seconds is the limit of --wait: give --wait too")
    if timeout_seconds is not None and not math.isfinite(timeout_seconds):  # checked before anything is sent
        raise click.BadParameter(f"{timeout_seconds} is not a finite number of seconds",
                                 param_hint="--timeout-seconds")
    runtime = obj.runtime(load_apps=False)
    run_id = runtime.checked_run_id("send", run_id)  # a prefix becomes the whole id, once
    name = cmd.strip().upper()
    me, signing = signing_for(obj, name, run_id, user, password_env, meaning, COMMAND)
    problem = None if strict else runtime.judge_command(run_id, cmd)
    message_id = runtime.send_command(run_id, cmd, reason, strict=strict, actor=None if me is None else me.actor,
                                      signing=signing)
    shown_problem = None if problem is None else printable(problem)
    if shown_problem is not None and not as_json:
        click.echo(f"warning: {shown_problem}: run {run_id} will drop {name} when it receives it "
                   f"(--strict refuses to send such a command)", err=True)
    result: dict[str, Any] = {"run": run_id, "cmd": name, "message_id": message_id, "warning": problem}
    if not as_json:
        click.echo(f"sent {name} to run {run_id} (message {message_id})")
    if not wait:
        if as_json:
            print_json(result)
        return
    limit = WAIT_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds
    view = runtime.wait_for_command(run_id, message_id, limit)
    result.update({key: value for key, value in view.items() if key not in result})
    if as_json:
        print_json(result)
    else:
        _say_outcome(run_id, name, view, limit)
    if view["outcome"] == "DROPPED":
        sys.exit(EXIT_DROPPED)
    if view["outcome"] == "WAITING":
        sys.exit(EXIT_WAIT_TIMED_OUT)


def _say_outcome(run_id: str, name: str, view: dict[str, Any], limit: float) -> None:
    note = printable(view["note"] or "")
    if view["outcome"] == "DROPPED":
        click.echo(f"error: {name} dropped by run {run_id}: {note}", err=True)
    elif view["outcome"] == "WAITING":
        click.echo(f"error: {name} still waiting in the mailbox of run {run_id} after {limit:g} s "
                   f"(the run has not received it; status {view['status']}, state {view['state']})", err=True)
    elif view["state_after"] is not None:
        click.echo(f"{name} consumed by run {run_id} ({note}); state now {printable(view['state_after'])}")
    else:
        click.echo(f"{name} consumed by run {run_id} ({note}); no new state reported within {limit:g} s "
                   f"(status {view['status']}, state {printable(str(view['state']))})")


@click.command()
@click.argument("run_id")
@click.option("--reason", default=None)
@click.option("--wait", is_flag=True, help="Wait until the run has stopped.")
@_signer_options
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def cancel(obj: Context, run_id: str, reason: str | None, wait: bool, user: str | None, password_env: str | None,
           meaning: str | None, as_json: bool) -> None:
    """Cancel a run (it stops at its next cancellation point).

    A run that already finished is not touched: one line on stderr (``run X already finished
    (SUCCESS); nothing cancelled``) and exit status 1. When ``[signatures] required_for`` lists
    cancel, it is signed by --user NAME with their password (refused at once without, exit 2)."""
    from exchange._cli.signatures import signing_for
    from exchange._roles import CANCEL

    runtime = obj.runtime(load_apps=False)
    run_id = runtime.checked_run_id("cancel", run_id)  # a prefix becomes the whole id, once
    me, signing = signing_for(obj, "cancel", run_id, user, password_env, meaning, CANCEL)
    status = runtime.cancel(run_id, reason, actor=None if me is None else me.actor, signing=signing)
    if wait:
        deadline = time.monotonic() + 60
        while status not in ("CANCELLED", "SUCCESS", "ERROR") and time.monotonic() < deadline:
            status = runtime.wait_for(run_id, 1.0)["status"]
    if as_json:
        print_json({"run": run_id, "status": status})
    else:
        click.echo(f"cancel requested for run {run_id} (status {status})")


COMMANDS = [send, cancel]

__all__ = ["COMMANDS"]
