"""``exchange tags write`` and ``exchange tags audit``: a tag written by hand, and the record of it
(and of the methods called by hand, :mod:`exchange._cli.tag_call`).

A write by hand makes the checks a workflow's write makes, asks before it sends (unless ``--yes``),
is sent at most once and leaves an audit entry in the store (who, why, the tag, its old and new
value, the outcome): see :mod:`exchange._tags.manual`. Exit statuses: 0 written (and, with
``--confirm``, read back), 1 not written (refused, or the device could not be reached or refused
it), :data:`EXIT_NOT_CONFIRMED`, :data:`EXIT_IN_DOUBT`.
"""

from __future__ import annotations

import json
import math
import sys
from typing import TYPE_CHECKING, Any

import click

from exchange._arguments import text as checked_text
from exchange._cli.common import Context, confirmed, default_actor, fail, print_json
from exchange._cli.render import printable
from exchange._cli.tag_view import open_service, value_text
from exchange._tags import manual
from exchange._tags.results import WriteOutcome
from exchange._tags.service import TagService
from exchange._tags.table import TagTable, TagWrite
from exchange._timefmt import iso_utc
from exchange._values import QualifiedValue
from exchange.errors import ConfirmTimeout, TagError, WriteInDoubt

if TYPE_CHECKING:
    from exchange._store import AuditEntry, AuditLog

EXIT_NOT_CONFIRMED = 3  # written, but --confirm did not read the value back in time
EXIT_IN_DOUBT = 4  # its answer was lost: it may have been applied; not sent again
ACTION = "tag_write"
CALL_ACTION = "tag_call"  # exchange tags call (exchange._cli.tag_call)
CONFIRM_TIMEOUT_SECONDS = 10.0
_AFTER_DASHES = "exchange.tags_write.after_dashes"


class _StoreAudit:
    """:class:`exchange._tags.manual.WriteAudit` over the store's audit log."""

    def __init__(self, log: AuditLog, actor: str, reason: str | None, text: str) -> None:
        self.log = log
        self.actor = actor
        self.reason = reason
        self.text = text
        self.entry_id: int | None = None

    def begin(self, item: TagWrite, old: QualifiedValue) -> None:
        tag = item.tag
        details = {"device": tag.device, "address": tag.address, "type": tag.type_name,
                   "value": item.value, "typed": self.text, "old_value": old.value,
                   "old_quality": old.quality.value, "old_timestamp": iso_utc(old.timestamp)}
        self.entry_id = self.log.begin(ACTION, tag.path, actor=self.actor, reason=self.reason, details=details)

    def finish(self, outcome: str, note: str) -> None:
        assert self.entry_id is not None, "finish() before begin()"
        self.log.finish(self.entry_id, outcome, note)


def _ask(item: TagWrite, old: QualifiedValue) -> None:
    tag = item.tag
    now = f"now {value_text(tag, old.value)}" if old.quality.is_good else f"now {old.quality.value}"
    if not confirmed(f"write {value_text(tag, item.value)} to {tag.path} (device {tag.device}, address "
                     f"{tag.address}; {now})?"):
        fail(f"not confirmed; nothing written to {tag.path} (--yes writes without asking)")


def _waiting(device: str, reason: str, waited_s: float, timeout_s: float) -> None:
    click.echo(printable(f"waiting for device {device!r} ({waited_s:.0f} of {timeout_s:g} s) to read back the "
                         f"write in doubt: {reason}"), err=True)


def _result(item: TagWrite, old: QualifiedValue, audit: _StoreAudit, outcome: str, note: str) -> WriteOutcome:
    return {"path": item.tag.path, "device": item.tag.device, "address": item.tag.address, "value": item.value,
            "old": old.to_dict(), "outcome": outcome, "note": note, "audit_id": audit.entry_id,
            "confirmed": None}


class ValueCommand(click.Command):
    """A command whose values may be negative numbers (``-5``), which click would take for options
    (``write``'s VALUE, ``call``'s ARGS); see :func:`checked_value`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_AFTER_DASHES] = "--" in args  # what follows -- is a VALUE, whatever it looks like
        return super().parse_args(ctx, args)


def checked_value(ctx: click.Context, value: str, usage: str = "exchange tags write PATH --") -> str:
    """A value that starts with - is a negative number, or an option click did not know (a typo),
    unless it came after -- (``usage``: the command line up to the --, for the hint)."""
    if value.startswith("-") and not ctx.meta.get(_AFTER_DASHES):
        try:
            float(value)
        except ValueError:
            raise click.UsageError(f"no such option: {value} (a value that starts with - goes after --: "
                                   f"{usage} {value})") from None
    return value


@click.command("write", cls=ValueCommand, context_settings={"ignore_unknown_options": True})
@click.argument("path")
@click.argument("value")
@click.option("--reason", default=None, help="Why; kept in the audit entry.")
@click.option("--yes", is_flag=True, help="Write without asking.")
@click.option("--confirm", is_flag=True, help="Then wait until the tag reads the value (exit 3 if it does not).")
@click.option("--timeout-seconds", type=click.FloatRange(min=0, max=3600), default=None,
              help=f"How long --confirm waits (default {CONFIRM_TIMEOUT_SECONDS:g}).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def write_tag(ctx: click.Context, path: str, value: str, reason: str | None, yes: bool, confirm: bool,
              timeout_seconds: float | None, as_json: bool) -> None:
    """Write VALUE (read for the tag's type) to a tag, once, with an audit entry.

    The same checks as a workflow's write (access, type, min/max): a refused value sends nothing
    (exit 1). Exit 3: written, not confirmed (--confirm); exit 4: in doubt, not sent again."""
    obj: Context = ctx.obj
    value = checked_value(ctx, value)
    if timeout_seconds is not None and not confirm:
        raise click.UsageError("--timeout-seconds is the limit of --confirm: give --confirm too")
    if timeout_seconds is not None and not math.isfinite(timeout_seconds):  # FloatRange lets NaN through
        raise click.BadParameter(f"{timeout_seconds} is not a number of seconds", param_hint="--timeout-seconds")
    if reason is not None:
        reason = checked_text("tags write", "reason", reason, max_chars=obj.config.engine.reason_max_chars,
                              empty=True)
    with open_service(obj) as service:
        item = manual.plan_write(service, path, value)  # every check before anything is sent
        store = obj.runtime(load_apps=False, create=True).store  # the audit's place, opened before the PLC
        old = service.read_tags([item.tag])[0]
        if not yes:
            _ask(item, old)
        audit = _StoreAudit(store.audit, default_actor(), reason, value)
        try:
            done = manual.write_once(service, item, old, audit, waiting=_waiting)
        except WriteInDoubt as exc:
            _in_doubt(item, old, audit, str(exc), as_json)
        except KeyboardInterrupt:
            if audit.entry_id is None:
                raise  # interrupted before anything was sent
            _in_doubt(item, old, audit, "interrupted while sending; it may have been applied", as_json)
        except Exception as exc:
            if audit.entry_id is not None and as_json:
                print_json(_result(item, old, audit, manual.NOT_WRITTEN, str(exc)))
            raise
        result = _result(item, old, audit, done.outcome, done.note)
        was = value_text(item.tag, old.value) if old.quality.is_good else old.quality.value
        if not as_json:
            click.echo(printable(f"wrote {value_text(item.tag, item.value)} to {item.tag.path} (was {was}): "
                                 f"{done.note} (audit entry {audit.entry_id})"))
        if confirm:
            _confirm(service, item, audit, result, timeout_seconds, as_json)
        elif as_json:
            print_json(result)


def _in_doubt(item: TagWrite, old: QualifiedValue, audit: _StoreAudit, message: str, as_json: bool) -> None:
    if as_json:
        print_json(_result(item, old, audit, manual.IN_DOUBT, message))
    click.echo(printable(f"error: IN DOUBT (audit entry {audit.entry_id}): {message}"), err=True)
    sys.exit(EXIT_IN_DOUBT)


def _confirm(service: TagService, item: TagWrite, audit: _StoreAudit, result: WriteOutcome,
             timeout_seconds: float | None, as_json: bool) -> None:
    limit = CONFIRM_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds
    try:
        seen, took_s = manual.confirm(service, item, limit)
    except ConfirmTimeout as exc:
        result["confirmed"] = False
        audit.finish(manual.WRITTEN, f"{result['note']}; not confirmed: {exc}")
        if as_json:
            print_json(result)
        click.echo(printable(f"error: written but not confirmed: {exc}"), err=True)
        sys.exit(EXIT_NOT_CONFIRMED)
    result["confirmed"] = True
    audit.finish(manual.WRITTEN, f"{result['note']}; confirmed: read back after {took_s * 1000:.0f} ms")
    if as_json:
        print_json(result)
    else:
        click.echo(printable(f"confirmed: {item.tag.path} reads {value_text(item.tag, seen.value)} "
                             f"after {took_s * 1000:.0f} ms"))


def _audit_line(entry: AuditEntry) -> str:
    details = entry.details if isinstance(entry.details, dict) else {}
    if entry.action == CALL_ACTION:
        given = details.get("typed")  # the arguments as typed
        typed: list[Any] = given if isinstance(given, list) else []
        change = f"call {details.get('method')}({', '.join(str(a) for a in typed)})"
    else:
        old = details.get("old_value") if details.get("old_quality") == "Good" else details.get("old_quality")
        change = f"{_plain(old)} -> {_plain(details.get('value'))}"
    why = f"  ({entry.reason})" if entry.reason else ""
    return printable(f"{entry.id:>5}  {iso_utc(entry.at)}  {entry.actor}  {entry.target}  {change}  "
                     f"{entry.outcome}{why}")


def _plain(value: Any) -> str:
    return "-" if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _entry_dict(entry: AuditEntry) -> dict[str, Any]:
    return {"id": entry.id, "at": iso_utc(entry.at), "actor": entry.actor, "action": entry.action,
            "path": entry.target, "reason": entry.reason, "details": entry.details, "outcome": entry.outcome,
            "note": entry.outcome_note,
            "finished_at": None if entry.finished_at is None else iso_utc(entry.finished_at)}


@click.command("audit")
@click.argument("path", required=False)
@click.option("--limit", type=click.IntRange(min=1, max=100_000), default=20, show_default=True,
              help="Show the newest N entries.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def audit_tags(obj: Context, path: str | None, limit: int, as_json: bool) -> None:
    """The audit of tags written (and methods called) by hand, all tags or PATH: who, when, old -> new
    value (or the call), outcome, why."""
    target = None
    if path is not None:
        try:
            target = TagTable.from_config(obj.config).get(path).path  # the configured spelling
        except TagError:
            target = path  # a tag no longer configured: as typed
    entries = obj.runtime(load_apps=False).store.audit.entries(action=(ACTION, CALL_ACTION), target=target,
                                                               limit=limit)
    if as_json:
        print_json([_entry_dict(e) for e in entries])
        return
    if not entries:
        click.echo("no tag writes or calls by hand recorded" + (f" for {printable(target)}" if target else ""))
    for entry in entries:
        click.echo(_audit_line(entry))
        if entry.outcome != manual.WRITTEN and entry.outcome_note:  # a call: its outputs
            click.echo(printable(f"       {entry.outcome_note}"))


COMMANDS = [write_tag, audit_tags]

__all__ = ["COMMANDS", "EXIT_IN_DOUBT", "EXIT_NOT_CONFIRMED", "ValueCommand", "checked_value"]
