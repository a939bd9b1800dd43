"""``exchange schedules list|pause|resume|trigger``: the ``[schedules.NAME]`` of the config, as every
gateway on the store sees them (pausing is stored in the store)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from exchange._cli.common import Context, default_actor, fail, print_json

if TYPE_CHECKING:
    from exchange._plant.schedules import Scheduler

# The schedules' module (the cron parser, the runtime) is imported by the commands that use it, not by
# `exchange schedules --help`.


def _scheduler(obj: Context, *, load_apps: bool = False) -> Scheduler:
    from exchange._plant.schedules import Scheduler

    runtime = obj.runtime(load_apps=load_apps)
    return Scheduler(runtime, dict(runtime.config.schedules))


def _known(scheduler: Scheduler, name: str) -> None:
    if name not in scheduler.schedules:
        known = ", ".join(sorted(scheduler.schedules)) or "none configured"
        fail(f"no schedule named {name!r} ([schedules.NAME] in the config: {known})")


@click.group()
def schedules() -> None:
    """The config's schedules: list them, pause or resume one on every gateway, trigger one now."""


@schedules.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def list_schedules(obj: Context, as_json: bool) -> None:
    """Each schedule: workflow, cron and timezone, paused or not, last tick handled, next tick (none
    while paused: no gateway starts a run at it)."""
    from exchange._plant.schedules import KIND, next_tick, tick_id

    scheduler = _scheduler(obj)
    states = scheduler.state.all(KIND)
    now = scheduler.runtime.store.clock.now()
    rows = []
    for name, schedule in sorted(scheduler.schedules.items()):
        state = states.get(name)
        last = state.last_tick if state is not None else None
        paused = bool(state and state.paused)
        rows.append({"name": name, "workflow": schedule.workflow, "cron": schedule.cron, "timezone": schedule.timezone,
                     "catch_up": schedule.catch_up, "paused": paused,
                     "last_tick": None if last is None else tick_id(last),
                     "next_tick": None if paused else tick_id(next_tick(schedule, now))})
    if as_json:
        print_json(rows)
        return
    for row in rows:
        upcoming = f"next {row['next_tick']}" if row["next_tick"] else "PAUSED (no next tick)"
        click.echo(f"{row['name']:<20} {row['workflow']:<24} {row['cron']:<16} {row['timezone']:<16} "
                   f"{upcoming:<34}  last {row['last_tick'] or '-'}")
    if not rows:
        click.echo("no schedules ([schedules.NAME] in the config)", err=True)


def _pause(obj: Context, name: str, paused: bool) -> None:
    from exchange._plant.schedules import KIND

    scheduler = _scheduler(obj)
    _known(scheduler, name)
    if scheduler.state.get(KIND, name) is None:
        scheduler.state.create(KIND, name, last_tick=scheduler.runtime.store.clock.now())
    scheduler.state.set_paused(name, paused)
    click.echo(f"schedule {name} {'paused' if paused else 'resumed'} on every gateway")


@schedules.command("pause")
@click.argument("name")
@click.pass_obj
def pause(obj: Context, name: str) -> None:
    """No gateway starts the schedule's runs until resume (the ticks meanwhile are dropped)."""
    _pause(obj, name, True)


@schedules.command("resume")
@click.argument("name")
@click.pass_obj
def resume(obj: Context, name: str) -> None:
    """The schedule's next tick starts a run again."""
    _pause(obj, name, False)


@schedules.command("trigger")
@click.argument("name")
@click.pass_obj
def trigger(obj: Context, name: str) -> None:
    """Start one run of the schedule now (paused or not); prints its id."""
    scheduler = _scheduler(obj, load_apps=True)
    _known(scheduler, name)
    run_id = scheduler.trigger_now(name, default_actor())
    click.echo(run_id)
    click.echo(f"schedule {name}: run {run_id} started at {datetime.now(UTC).isoformat(timespec='seconds')}",
               err=True)


COMMANDS = [schedules]
