"""``exchange phases``: the config's equipment phases as their PLCs report them now.

Each ``[phases."UNIT/PHASE"]``: its unit, the state the PLC's state tag holds (named by the phase's
numbering, the number itself when the numbering has no name for it), the owner tag's value and whom
it names (``free`` for 0, ``exchange`` for the config's ``owner_id``, else ``other``), and the run
commanding it: the unfinished run whose ``phase.run`` is in progress on it, from the store (its id,
workflow, how far the call has got, the state it saw last and who holds the phase). A state or owner
that cannot be read shows ``-`` and its quality; the command ends with 3 then, as ``exchange tags
read`` does. Without a store yet (no gateway has run) the phases are shown with no run, and a line
on stderr says why.
"""

from __future__ import annotations

from typing import Any

import click

from exchange._cli.common import Context, print_json
from exchange._cli.render import printable
from exchange._cli.tag_view import open_service
from exchange._tags.phase_states import read_phases
from exchange.errors import StoreError

EXIT_NOT_GOOD = 3  # every phase was read, and at least one state or owner is not Good


def run_text(run: dict[str, Any] | None) -> str:
    """The RUN column: ``-``, or the run's id with how far its call has got (``abc123 running``,
    ``abc123 held by equipment``)."""
    if run is None:
        return "-"
    held = f" held by {run['held_by']}" if run.get("held_by") else ""
    return f"{run['run']} {run.get('stage') or '?'}{held}"


@click.command("phases")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of the phases.")
@click.pass_obj
def phases_command(obj: Context, as_json: bool) -> None:
    """The config's equipment phases: unit, the state their PLC reports now, owner, commanding run."""
    phases = list(obj.config.phases.values())
    if not phases:
        click.echo("no phases configured ([phases.\"UNIT/PHASE\"] in the config)", err=not as_json)
        if as_json:
            print_json([])
        return
    with open_service(obj) as service:
        readings = read_phases(service, phases, explicit=True)
    try:
        commanding = obj.runtime(load_apps=False).phase_runs()
    except StoreError as exc:  # no store yet (no gateway ran): the PLC's side is still worth seeing
        click.echo(f"the runs commanding the phases are unknown: {exc}", err=True)
        commanding = {}
    views: list[dict[str, Any]] = [{**reading, "run": commanding.get(reading["phase"])} for reading in readings]
    if as_json:
        print_json(views)
    else:
        width = max(len(v["phase"]) for v in views)
        click.echo(f"{'PHASE'.ljust(width)}  {'UNIT':<8} {'STATE':<12} {'OWNER':<12} RUN")
        for view in views:
            state = view["state"] or f"- ({view['state_quality']})"
            owner = "-" if view["owned_by"] is None else f"{view['owned_by']} ({view['owner']})"
            click.echo(f"{printable(view['phase']).ljust(width)}  {printable(view['unit'] or '-'):<8} "
                       f"{printable(state):<12} {owner:<12} {printable(run_text(view['run']))}")
    if any(r["state"] is None or r["owner_quality"] not in (None, "Good") for r in readings):
        raise SystemExit(EXIT_NOT_GOOD)


COMMANDS = [phases_command]
