"""``exchange phases``: the config's equipment phases as their PLCs report them now.

Each ``[phases."UNIT/PHASE"]``: its unit, the state the PLC's state tag holds (named by the phase's
numbering, the number itself when the numbering has no name for it), the owner tag's value and whom
it names (``free`` for 0, ``exchange`` for the config's ``owner_id``, else ``other``), and the run
commanding it (none until ``phase.run`` commands phases: issue 42). A state or owner that cannot be
read shows ``-`` and its quality; the command ends with 3 then, as ``exchange tags read`` does.
"""

from __future__ import annotations

from typing import Any

import click

from exchange._cli.common import Context, print_json
from exchange._cli.render import printable
from exchange._cli.tag_view import open_service
from exchange._config_phases import PhaseConfig
from exchange._phase_numbering import NUMBERINGS
from exchange._values import QualifiedValue, Quality

EXIT_NOT_GOOD = 3  # every phase was read, and at least one state or owner is not Good


def owner_of(phase: PhaseConfig, value: Any) -> str | None:
    """Whom the owner tag's ``value`` names: free, exchange or other (None: no owner tag)."""
    if phase.owner is None:
        return None
    if value == 0:
        return "free"
    return "exchange" if value == phase.owner_id else "other"


def phase_view(phase: PhaseConfig, state: QualifiedValue, owner: QualifiedValue | None) -> dict[str, Any]:
    """One phase as ``--json`` prints it."""
    good = state.quality is Quality.GOOD and isinstance(state.value, int)
    owner_value = owner.value if owner is not None and owner.quality is Quality.GOOD else None
    return {
        "phase": phase.name,
        "unit": phase.unit,
        "state": NUMBERINGS[phase.numbering].state_name(state.value) if good else None,
        "state_number": state.value if good else None,
        "state_quality": state.quality.value,
        "owner": owner_value,
        "owned_by": None if owner_value is None else owner_of(phase, owner_value),
        "run": None,
    }


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
        tags = [service.tag(p.state) for p in phases] + [service.tag(p.owner) for p in phases if p.owner]
        readings = iter(service.read_tags(tags, explicit=True))
        states = [next(readings) for _ in phases]
        owners = [next(readings) if p.owner else None for p in phases]
    views = [phase_view(p, s, o) for p, s, o in zip(phases, states, owners, strict=True)]
    if as_json:
        print_json(views)
    else:
        width = max(len(v["phase"]) for v in views)
        click.echo(f"{'PHASE'.ljust(width)}  {'UNIT':<8} {'STATE':<12} {'OWNER':<12} RUN")
        for view in views:
            state = view["state"] or f"- ({view['state_quality']})"
            owner = "-" if view["owned_by"] is None else f"{view['owned_by']} ({view['owner']})"
            click.echo(f"{printable(view['phase']).ljust(width)}  {printable(view['unit'] or '-'):<8} "
                       f"{printable(state):<12} {owner:<12} {view['run'] or '-'}")
    if any(view["state"] is None for view in views) or any(
            o is not None and o.quality is not Quality.GOOD for o in owners):
        raise SystemExit(EXIT_NOT_GOOD)


COMMANDS = [phases_command]
