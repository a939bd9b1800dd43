"""``exchange units``: the config's units (``[units.NAME]``), who holds each and who waits for it.

One line a unit: its name, class, the run holding it and since when (``-`` when free), and the runs
waiting for it in the order they will be granted, then those held by a HOLD while they waited,
marked ``(held)``. ``--json``: ``[{"unit", "class", "holder", "since", "waiting": [run ids],
"held": [run ids]}]`` (the held runs are in ``waiting`` too, last).
"""

from __future__ import annotations

import click

from exchange._cli.common import Context, print_json
from exchange._cli.render import printable


@click.command("units")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of the units.")
@click.pass_obj
def units_command(obj: Context, as_json: bool) -> None:
    """The config's units: class, the run holding each one and since when, the runs waiting."""
    if not obj.config.units.units:
        click.echo("no units configured ([units.NAME] in the config)", err=not as_json)
        if as_json:
            print_json([])
        return
    views = obj.runtime(load_apps=False).units()
    if as_json:
        print_json(views)
        return
    width = max(len(v["unit"]) for v in views)
    click.echo(f"{'UNIT'.ljust(width)}  {'CLASS':<12} {'HOLDER':<36}  {'SINCE':<20} WAITING")
    for view in views:
        waiting = ", ".join(run + (" (held)" if run in view["held"] else "") for run in view["waiting"]) or "-"
        click.echo(f"{printable(view['unit']).ljust(width)}  {printable(view['class']):<12} "
                   f"{view['holder'] or '-':<36}  {view['since'] or '-':<20} {waiting}")


COMMANDS = [units_command]
