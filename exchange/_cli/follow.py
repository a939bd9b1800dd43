"""Following a run as it goes: ``exchange follow``, and the live view of ``run`` and ``start --wait``.

A follower polls the store (one read of the run's row and its last steps every
:data:`FOLLOW_POLL_SECONDS`; never every step of a long run) and prints on stderr, each line tagged
with the run id's first eight characters (a prefix every command accepts): the state the run reports,
its progress messages, each step once it has finished, its status, and when the gateway holding it
stops renewing its lease (and when one takes it over). It ends when the run does; the exit status
follows :func:`finish`. Ctrl-C stops following, not the run (exit :data:`EXIT_INTERRUPTED`).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from exchange._cli.common import Context, fail, print_json
from exchange._cli.render import printable, step_line

if TYPE_CHECKING:
    from exchange._engine import Runtime, RunView

FOLLOW_POLL_SECONDS = 0.2
BACKLOG_STEPS = 10  # finished steps shown when following a run that is already under way
STEPS_PER_POLL = 200  # steps read per poll; more finishing within one poll are counted, not printed
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C
_FINAL = ("SUCCESS", "ERROR", "CANCELLED")
_UNFINISHED_STEP = ("RETRYING", "STARTED", "HELD", "HELD_IN_DOUBT")  # held: RESUME runs it again


class _Printer:
    """What a live follower has shown so far, so each change is printed once."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.tag = f"[{run_id[:8]}]"
        self.steps_seen = 0  # steps printed or counted as not shown
        self.last_seq = -1
        self.state: Any = None
        self.progress: Any = None
        self.status: Any = None
        self.owner_alive: Any = True
        self.held_on: Any = None

    def say(self, text: str) -> None:
        click.echo(f"{self.tag} {text}", err=True)

    def show(self, view: RunView, *, first: bool) -> None:
        steps = [step for step in view["steps"] if step["seq"] > self.last_seq]
        not_shown = view["steps_total"] - self.steps_seen - len(steps)
        if not_shown > 0:
            self.say(f"{not_shown} earlier step(s) not shown (exchange show {self.run_id} --steps all)" if first
                     else f"{not_shown} step(s) finished between two looks, not shown")
            self.steps_seen += not_shown
        for step in steps:
            if step["status"] in _UNFINISHED_STEP:
                break  # printed once it has finished
            self.say(step_line(step))
            self.steps_seen += 1
            self.last_seq = step["seq"]
        if view["state"] and view["state"] != self.state:
            self.state = view["state"]
            self.say(f"state {printable(self.state)}")
        held = view.get("held_on")
        if held and held != self.held_on and held.get("cause") == "code":
            self.say(printable(f"held on its code: {held['error']['message']}"))
        elif held and held != self.held_on:
            self.say(printable(f"held on step {held['seq']} {held['step']}: {held['error']['type']}: "
                               f"{held['error']['message']} (RESUME runs it again, STOP raises the error)"))
        self.held_on = held
        if view["progress"] and view["progress"] != self.progress:
            self.progress = view["progress"]
            self.say(printable(self.progress["message"]))
        if view["status"] != self.status:
            self.status = view["status"]
            self.say(self.status)
        alive = view["owner_alive"]
        if alive is False and self.owner_alive is not False:
            self.say(f"stale: the lease of {printable(view['owner'])} expired (its gateway died or lost the "
                     f"store); nothing executes the run until a gateway takes it over")
        elif alive and self.owner_alive is False:
            self.say(f"taken over by {printable(view['owner'])}")
        self.owner_alive = alive


def follow(runtime: Runtime, run_id: str, *, live: bool) -> RunView:
    """Wait for the run (its whole id) to finish and return it as ``show --json`` has it; with
    ``live``, print its changes on stderr as they come (see the module docstring)."""
    printer = _Printer(run_id) if live else None
    first = True
    while True:
        if printer is not None:
            view = runtime.get_run(run_id, events=False, last_steps=BACKLOG_STEPS if first else STEPS_PER_POLL)
            printer.show(view, first=first)
            first = False
        else:
            view = runtime.get_run(run_id, steps=False, events=False)
        if view["status"] in _FINAL:
            return runtime.get_run(run_id)
        runtime.pause_for_finish(FOLLOW_POLL_SECONDS)


def finish(view: RunView, as_json: bool) -> NoReturn:
    """Print the outcome and exit: 0 with the result as JSON on the last line when it succeeded, 1
    with the error on stderr otherwise."""
    if as_json:
        print_json(view)
    elif view["status"] == "SUCCESS":
        print_json(view["result"])
    if view["status"] == "SUCCESS":
        sys.exit(0)
    error = view["error"]
    message = f"run {view['id']} {view['status']}"
    if error:
        message += f": {error['type']}: {error['message']}"
    fail(printable(message))


def stop_following(run_id: str) -> NoReturn:
    """Ctrl-C while following a run that executes elsewhere: say that it goes on, exit 130.

    The process ends at once (``os._exit``): following only reads, so there is nothing to finish,
    and an interrupt that landed inside the store's connection code must not leave the exit waiting
    on a lock that code held."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not end in a traceback
    click.echo(f"stopped following run {run_id}; it goes on (exchange follow {run_id[:8]} to follow it again)",
               err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def stop_following_on_interrupt(run_id: str) -> None:
    """From now on Ctrl-C ends following ``run_id`` wherever the process is: a KeyboardInterrupt
    raised inside a library could be caught and lost there, a handler cannot."""
    signal.signal(signal.SIGINT, lambda _signum, _frame: stop_following(run_id))


@click.command("follow")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print only the finished run, as one JSON object.")
@click.pass_obj
def follow_command(obj: Context, run_id: str, as_json: bool) -> None:
    """Follow a run live until it finishes: its state, progress, steps (on stderr).

    Exits as `start --wait` does: 0 with the result when the run succeeds, 1 otherwise. Ctrl-C
    stops following (exit 130); the run goes on."""
    try:
        runtime = obj.runtime(load_apps=False)
        view = runtime.get_run(run_id, steps=False, events=False)  # a prefix is resolved once, here
        run_id = view["id"]
        stop_following_on_interrupt(run_id)
        if not as_json:
            click.echo(f"following run {run_id} of {printable(view['workflow'])} (Ctrl-C stops following, "
                       f"not the run)", err=True)
        finished = follow(runtime, run_id, live=not as_json)
    except KeyboardInterrupt:
        stop_following(run_id)
    finish(finished, as_json)


COMMANDS = [follow_command]

__all__ = ["COMMANDS", "finish", "follow", "stop_following", "stop_following_on_interrupt"]
