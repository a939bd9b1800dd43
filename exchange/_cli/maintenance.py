"""``exchange maintenance drain|cancel|exit|status`` and ``exchange retention apply``.

The maintenance mode is stored in the store, so every gateway on it obeys (see
:mod:`exchange._engine.gateway.maintenance`); retention applies ``[retention]`` now (see
:mod:`exchange._engine.gateway.retention`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from exchange._cli.common import Context, default_actor, print_json

if TYPE_CHECKING:
    from exchange._engine import Maintenance

_REASON = click.option("--reason", default=None, help="Why (kept in the audit log).")
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")


def _maintenance(obj: Context) -> Maintenance:
    from exchange._engine import Maintenance

    return Maintenance(obj.runtime(load_apps=False))


def _print_status(status: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(status)
        return
    mode = status["mode"]
    since = f" since {status['set_at']} by {status['set_by']}" if status["set_by"] else ""
    why = f" ({status['reason']})" if status["reason"] else ""
    click.echo(f"maintenance: {mode}{since}{why}")
    if mode != "normal":
        click.echo("  new runs do not start on any gateway; running runs go on until they finish")
    click.echo(f"  {status['active']} run(s) executing, {status['queued']} queued")
    for node, active in sorted(status["running_by_node"].items()):
        click.echo(f"  on {node}: {len(active)}")
        for run in active:
            click.echo(f"    {run['id'][:8]}  {run['workflow']}  {run['status']}  {run['state'] or ''}".rstrip())
    if status.get("cancelled") is not None:
        click.echo(f"  cancelled {len(status['cancelled'])} queued run(s)")


@click.group()
def maintenance() -> None:
    """Drain every gateway before an update (start nothing new, let runs finish), and back."""


@maintenance.command("drain")
@_REASON
@_JSON
@click.pass_obj
def drain(obj: Context, reason: str | None, as_json: bool) -> None:
    """Start nothing new on any gateway (schedules and triggers included); running runs finish."""
    _print_status(_maintenance(obj).drain(actor=default_actor(), reason=reason), as_json)


@maintenance.command("cancel")
@click.option("--queue", default=None, help="Cancel the runs queued in this queue only (default: all).")
@_REASON
@_JSON
@click.pass_obj
def cancel(obj: Context, queue: str | None, reason: str | None, as_json: bool) -> None:
    """Drain, and cancel the runs waiting in the queues."""
    _print_status(_maintenance(obj).cancel(actor=default_actor(), reason=reason, queue=queue), as_json)


@maintenance.command("exit")
@_REASON
@_JSON
@click.pass_obj
def exit_maintenance(obj: Context, reason: str | None, as_json: bool) -> None:
    """Back to normal: queued runs start again."""
    _print_status(_maintenance(obj).exit(actor=default_actor(), reason=reason), as_json)


@maintenance.command("status")
@_JSON
@click.pass_obj
def status(obj: Context, as_json: bool) -> None:
    """The mode, who set it and why, and what is still running on which gateway."""
    _print_status(_maintenance(obj).status(), as_json)


@click.group()
def retention() -> None:
    """Delete finished runs as [retention] says (gateways do it every interval_minutes)."""


@retention.command("apply")
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@_JSON
@click.pass_obj
def apply(obj: Context, dry_run: bool, as_json: bool) -> None:
    """Apply [retention] now: finished runs older than finished_runs_days, the oldest beyond
    max_finished_runs, and audit entries older than finished_runs_days. Unfinished runs are never
    deleted. With archive_dir, each run's record is written there first; exit 1 when a run was kept
    because its record could not be."""
    from exchange._engine import Retention

    runner = Retention(obj.runtime(load_apps=False))
    if not runner.configured:
        click.echo("retention: nothing configured ([retention] finished_runs_days or max_finished_runs)", err=True)
    report = runner.apply(dry_run=dry_run)
    if as_json:
        print_json(report.as_dict())
        if report.unarchived:
            sys.exit(1)
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"retention: {verb} {report.by_age} run(s) by age, {report.by_count} beyond the count limit, "
               f"{report.audit_entries} audit entr{'y' if report.audit_entries == 1 else 'ies'} "
               f"({report.seconds:.1f} s)")
    if report.archived:
        click.echo(f"retention: {report.archived} record(s) archived to {runner.settings.archive_dir}")
    if report.unarchived:
        click.echo(f"retention: {report.unarchived} run(s) kept: their record could not be archived to "
                   f"{runner.settings.archive_dir} (see the warnings above)", err=True)
        sys.exit(1)


COMMANDS = [maintenance, retention]
