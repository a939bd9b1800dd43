"""``exchange audit verify [RUN ...]``: the check of runs' tamper-evident audit chains
(``Runtime.verify_audit``). It writes nothing; it exits 1 when a run's chain is not intact."""

from __future__ import annotations

import click

from exchange._cli.common import Context, print_json
from exchange._cli.render import printable


@click.group("audit")
def audit() -> None:
    """The tamper-evident audit trail of runs: check that no event or step was changed or deleted."""


@audit.command("verify")
@click.argument("run_ids", nargs=-1, metavar="[RUN_ID]...")
@click.option("--json", "as_json", is_flag=True, help="Print one object a run (run, state, links, head, problem).")
@click.pass_obj
def verify(obj: Context, run_ids: tuple[str, ...], as_json: bool) -> None:
    """Check runs' audit chains (no RUN: every run); writes nothing.

    RUN_ID: an id or a unique prefix. Each run is `ok`, `unchained` (written before the chain
    existed: not a failure) or `TAMPERED RUN: ...`, naming the first event or step changed or deleted outside Exchange.
    Exits 1 when any run is tampered with."""
    runtime = obj.runtime(load_apps=False)
    found = runtime.verify_audit(run_ids)
    if as_json:
        print_json(found)
    else:
        for check in found:
            if check["state"] == "tampered":
                click.echo(printable(f"TAMPERED {check['run']}: {check['problem']}"))
            else:
                click.echo(f"{check['state']:<9} {check['run']}  ({check['links']} entries)")
    if any(check["state"] == "tampered" for check in found):
        raise SystemExit(1)


COMMANDS = [audit]

__all__ = ["COMMANDS"]
