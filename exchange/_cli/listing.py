"""Commands that list and show runs. Text output goes through
:func:`~exchange._cli.render.printable`; ``--json`` output stays exact JSON.

A filter value that cannot be used (an unknown status, a ``--since`` that is neither a duration nor a
time, an empty state) is a usage error naming the option (exit 2), before the store is opened.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import click

from exchange._arguments import text as checked_text
from exchange._cli.common import Context, print_json
from exchange._cli.render import render_attention, render_run, render_runs
from exchange._engine import CODE_VERSION_MAX_CHARS, STATE_MAX_CHARS
from exchange._store import ALL_STATUSES
from exchange.errors import InvalidArgument

SHOWN_BY_DEFAULT = 20  # steps and events `show` prints without --steps/--events: a screenful
ALL = 1_000_000  # `--steps all`: as many as listRuns' largest limit
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str) -> timedelta | datetime:
    """``--since``: a duration ago (``90s``, ``10m``, ``2h``, ``1d``, ``1h30m``) or an ISO 8601 time
    (``2026-03-01``, ``2026-03-01T08:00``, with an offset or ``Z``; without one it is UTC, as
    Exchange prints times). ValueError naming the forms otherwise."""
    compact = text.strip().lower().replace(" ", "")
    if compact and _DURATION_PART.sub("", compact) == "":
        try:
            seconds = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(compact))
            return timedelta(seconds=seconds)
        except OverflowError:
            raise ValueError(f"{text!r} is too long a duration") from None
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a duration (90s, 10m, 2h, 1d, 1h30m) nor an ISO 8601 time "
            f"(2026-03-01T08:00, UTC unless it names an offset)"
        ) from None


def since_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> timedelta | datetime | None:
    """The ``--since`` option's callback (``runs``, ``check-replay``): :func:`parse_since`, its error a usage error."""
    if value is None:
        return None
    try:
        return parse_since(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _status(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    if value.strip().upper() not in ALL_STATUSES:
        raise click.BadParameter(f"{value!r} is not a run status ({', '.join(ALL_STATUSES)}; any case)")
    return value.strip().upper()


def _text_check(name: str, max_chars: int) -> Any:
    """A click callback refusing a value the store cannot hold (empty, too long, undecodable)."""

    def check(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return checked_text("runs", name, value, max_chars=max_chars)
        except InvalidArgument as exc:
            raise click.BadParameter(str(exc).removeprefix("runs: ")) from None

    return check


class Count(click.ParamType[int]):
    """A number of items to show: a whole number >= 0, or ``all``."""

    name = "N|all"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        if str(value).strip().lower() == "all":
            return ALL
        try:
            number = int(str(value))
        except ValueError:
            self.fail(f"{value!r} is neither a whole number nor 'all'", param, ctx)
        if not 0 <= number <= ALL:
            self.fail(f"{value!r} is not from 0 to {ALL} (or 'all')", param, ctx)
        return number


@click.command("runs")
@click.option("--status", default=None, callback=_status,
              help=f"Only runs with this status: {', '.join(ALL_STATUSES)}.")
@click.option("--state", default=None, callback=_text_check("state", STATE_MAX_CHARS),
              help="Only runs whose last reported ISA-88 state is this (HELD, RUNNING, ...; any case).")
@click.option("--workflow", default=None, help="Only runs of this workflow.")
@click.option("--code-version", default=None,
              callback=_text_check("code_version", CODE_VERSION_MAX_CHARS),
              help="Only runs created by this code version (see `exchange workflows --json`).")
@click.option("--since", default=None, callback=since_option, metavar="DURATION|TIME",
              help="Only runs created since: 10m, 2h, 1d ago, or an ISO 8601 time (UTC unless it has an offset).")
@click.option("--attention", is_flag=True,
              help="Only the runs that need someone, a line per reason (an open prompt, held on a failed step, "
                   "a write in doubt, ERROR lately), most urgent first; the other filters do not apply.")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def runs_command(obj: Context, status: str | None, state: str | None, workflow: str | None,
                 code_version: str | None, since: timedelta | datetime | None, attention: bool, limit: int,
                 as_json: bool) -> None:
    """List runs, newest first; the filters combine."""
    if attention:
        if any(value is not None for value in (status, state, workflow, code_version, since)):
            raise click.UsageError("--attention lists every run that needs someone: give it without other filters")
        rows = obj.runtime(load_apps=False).attention(limit=max(1, limit))
        if as_json:
            print_json(rows)
        else:
            click.echo(render_attention(rows))
        return
    runs = obj.runtime(load_apps=False).list_runs(status=status, workflow=workflow, limit=limit, state=state,
                                                 code_version=code_version, since=since)
    if as_json:
        print_json(runs)
    else:
        click.echo(render_runs(runs))


@click.command()
@click.argument("run_id")
@click.option("--steps", "last_steps", type=Count(), default=None,
              help=f"Show the last N steps, or all (text default {SHOWN_BY_DEFAULT}; --json default all).")
@click.option("--events", "last_events", type=Count(), default=None,
              help=f"Show the last N events, or all (text default {SHOWN_BY_DEFAULT}; --json default all).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def show(obj: Context, run_id: str, last_steps: int | None, last_events: int | None, as_json: bool) -> None:
    """One run with its steps and events (RUN_ID: the id or a unique prefix of it)."""
    runtime = obj.runtime(load_apps=False)
    if as_json:
        print_json(runtime.get_run(run_id, last_steps=last_steps, last_events=last_events))
        return
    view = runtime.get_run(
        run_id,
        last_steps=SHOWN_BY_DEFAULT if last_steps is None else last_steps,
        last_events=SHOWN_BY_DEFAULT if last_events is None else last_events,
        hide_progress=True,  # the latest progress has its own line
    )
    click.echo(render_run(view))


COMMANDS = [runs_command, show]

__all__ = ["COMMANDS", "parse_since", "since_option"]
