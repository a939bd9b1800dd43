"""``exchange check-replay`` and ``exchange export-run``: prove the workflow code on disk replays the
runs in flight before it is deployed, and keep a run's history as a test fixture.

Both go through the runtime (``Runtime.check_replay``, ``Runtime.export_run``); the JSON fields are
documented in docs/cli.md.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from exchange._cli.common import Context, print_json
from exchange._cli.listing import since_option
from exchange._cli.render import printable

if TYPE_CHECKING:
    from exchange._engine import ReplayOutcome



def describe(outcome: ReplayOutcome) -> str:
    """One run's line: what replayed, or where and how the code leaves the history."""
    if outcome.ok:
        end = ("the workflow returns there" if outcome.next_call == "return"
               else f"the code goes on live with {outcome.next_call}")
        return f"replays {outcome.steps_replayed} recorded step(s) to sequence {outcome.ends_at}, where {end}"
    if outcome.divergence is None:
        return f"not checked: {outcome.error}"
    found = outcome.divergence
    where = f"at sequence {found.seq}: " if found.seq is not None else ""
    recorded = ""
    if found.recorded is not None:
        shape = f", output {found.recorded['output']}" if found.recorded.get("output") else ""
        recorded = f"recorded {found.recorded['name']} ({found.recorded['status']}{shape}); "
    return f"{where}{recorded}now {found.now} [{found.kind}]"


@click.command("check-replay")
@click.argument("run_ids", nargs=-1, metavar="RUN_ID")
@click.option("--all-active", is_flag=True, help="Every unfinished run (the default when no RUN is named).")
@click.option("--since", default=None, callback=since_option, metavar="DURATION|TIME",
              help="Only runs created since: 10m, 2h, 7d ago, or an ISO 8601 time.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object per run (fields: docs/cli.md).")
@click.pass_obj
def check_replay(obj: Context, run_ids: tuple[str, ...], all_active: bool, since: Any, as_json: bool) -> None:
    """Replay runs' recorded histories against the workflow code on disk now, executing nothing.

    Loads the apps as a gateway does and replays each run (RUN: an id or a unique prefix; by default
    every unfinished run) up to where its history ends, without executing a step, receiving, waiting
    or writing anything. Prints ok or DIVERGES per run, with the sequence number, the recorded step and
    what the code does now; exits 1 when any run diverges (or could not be checked)."""
    runtime = obj.runtime(load_apps=True, create=False)
    outcomes = runtime.check_replay(run_ids, all_active=all_active, since=since)
    if as_json:
        print_json([outcome.as_dict() for outcome in outcomes])
    else:
        for outcome in outcomes:
            label = "ok" if outcome.ok else outcome.status.upper()
            click.echo(printable(f"{label:<9} {outcome.run_id}  {outcome.workflow}  {describe(outcome)}"))
        diverging = sum(1 for outcome in outcomes if not outcome.ok)
        click.echo(f"{len(outcomes)} run(s) checked: {len(outcomes) - diverging} ok, {diverging} not", err=True)
    if any(not outcome.ok for outcome in outcomes):
        raise SystemExit(1)


@click.command("export-run")
@click.argument("run_id")
@click.pass_obj
def export_run(obj: Context, run_id: str) -> None:
    """Print a run's recorded history as JSON: a fixture for exchange.workflows.testing.replay_history.

    The run's workflow, parameters, code version, recorded steps with their outputs and errors, its
    patched decisions and idle operations (format exchange-run-history, version 1: docs/cli.md)."""
    runtime = obj.runtime(load_apps=False)
    click.echo(json.dumps(runtime.export_run(run_id), ensure_ascii=False, indent=2))


COMMANDS = [check_replay, export_run]

__all__ = ["COMMANDS"]
