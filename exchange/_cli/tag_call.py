"""``exchange tags call``: a device method called by hand (commissioning an OPC UA method), audited.

The call makes the checks a workflow's ``tags.call`` makes (the tag's ``access``, the method on its
object, the arguments against the method's declared InputArguments), asks before it sends (unless
``--yes``), is made at most once and leaves an entry in the store's audit log, listed by ``exchange
tags audit``: see :mod:`exchange._tags.manual_call`. Exit statuses: 0 called, 1 not called (refused
before sending, not confirmed, the device could not be reached or refused the call),
:data:`~exchange._cli.tag_write.EXIT_IN_DOUBT` (its answer was lost: it may have run).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from exchange._arguments import text as checked_text
from exchange._cli.common import Context, confirmed, default_actor, fail, print_json
from exchange._cli.render import printable
from exchange._cli.tag_view import open_service
from exchange._cli.tag_write import CALL_ACTION, EXIT_IN_DOUBT, ValueCommand, checked_value
from exchange._tags import manual, manual_call
from exchange._tags.table import TagDef
from exchange.errors import WriteInDoubt

if TYPE_CHECKING:
    from exchange._store import AuditLog


class _NotConfirmed(Exception):
    """The person did not answer yes: nothing is recorded or sent."""


class _StoreAudit:
    """:class:`exchange._tags.manual_call.CallAudit` over the store's audit log, opened (created when
    it does not exist yet) when the first record is made: once every check of the call passed, before
    it is sent. A call refused before that leaves no store behind."""

    def __init__(self, log: Callable[[], AuditLog], actor: str, reason: str | None, typed: Sequence[str]) -> None:
        self.log = log
        self.actor = actor
        self.reason = reason
        self.typed = list(typed)
        self.entry_id: int | None = None

    def begin(self, tag: TagDef, method: str, args: Sequence[Any]) -> None:
        details = {"device": tag.device, "address": tag.address, "method": method, "args": list(args),
                   "typed": self.typed}
        self.entry_id = self.log().begin(CALL_ACTION, tag.path, actor=self.actor, reason=self.reason,
                                         details=details)

    def finish(self, outcome: str, note: str) -> None:
        assert self.entry_id is not None, "finish() before begin()"
        self.log().finish(self.entry_id, outcome, note)


def _shown_call(method: str, typed: Sequence[str]) -> str:
    return f"{method}({', '.join(typed)})"


def _asker(method: str, typed: Sequence[str]) -> Any:
    def ask(tag: TagDef) -> None:
        if not confirmed(f"call {_shown_call(method, typed)} on {tag.path} (device {tag.device}, address "
                         f"{tag.address})?"):
            raise _NotConfirmed(f"not confirmed; {method} was not called on {tag.path} (--yes calls without asking)")

    return ask


def _result(tag: TagDef | None, path: str, method: str, args: Sequence[Any], outputs: list[Any] | None,
            outcome: str, note: str, audit: _StoreAudit) -> dict[str, Any]:
    return {"path": tag.path if tag is not None else path, "device": tag.device if tag is not None else None,
            "address": tag.address if tag is not None else None, "method": method, "args": list(args),
            "outputs": outputs, "outcome": outcome, "note": note, "audit_id": audit.entry_id}


@click.command("call", cls=ValueCommand, context_settings={"ignore_unknown_options": True})
@click.argument("path")
@click.argument("method")
@click.argument("args", nargs=-1)
@click.option("--reason", default=None, help="Why; kept in the audit entry.")
@click.option("--yes", is_flag=True, help="Call without asking.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def call_method(ctx: click.Context, path: str, method: str, args: tuple[str, ...], reason: str | None, yes: bool,
                as_json: bool) -> None:
    """Call METHOD (its browse name or NodeId) of the object tag PATH names, once, with an audit entry.

    Each ARG is read for the method's declared argument type (600, 2.5, true, text); a JSON list
    ([1, 2.5]) for an array argument. The same checks as a workflow's tags.call, against the
    method's declared arguments: a refused call sends nothing (exit 1). Exit 4: in doubt, not made
    again."""
    obj: Context = ctx.obj
    typed = [checked_value(ctx, arg, f"exchange tags call PATH {method} --") for arg in args]
    if reason is not None:
        reason = checked_text("tags call", "reason", reason, max_chars=obj.config.engine.reason_max_chars,
                              empty=True)
    values = manual_call.arguments_from_text(typed)
    with open_service(obj) as service:
        tag = service.tag(path)
        audit = _StoreAudit(lambda: obj.runtime(load_apps=False, create=True).store.audit, default_actor(), reason,
                            typed)
        try:
            done = manual_call.call_once(service, tag.path, method, values, audit,
                                         before_send=None if yes else _asker(method, typed))
        except _NotConfirmed as exc:
            fail(printable(str(exc)))
        except WriteInDoubt as exc:
            if as_json:
                print_json(_result(tag, path, method, values, None, manual.IN_DOUBT, str(exc), audit))
            click.echo(printable(f"error: IN DOUBT (audit entry {audit.entry_id}): {exc}"), err=True)
            sys.exit(EXIT_IN_DOUBT)
        except KeyboardInterrupt:
            if audit.entry_id is None:
                raise  # interrupted before anything was sent
            if as_json:
                print_json(_result(tag, path, method, values, None, manual.IN_DOUBT,
                                   "interrupted while calling; it may have run", audit))
            click.echo(printable(f"error: IN DOUBT (audit entry {audit.entry_id}): interrupted while calling; it "
                                 "may have run"), err=True)
            sys.exit(EXIT_IN_DOUBT)
        except Exception as exc:
            if audit.entry_id is not None and as_json:
                print_json(_result(tag, path, method, values, None, manual_call.NOT_CALLED, str(exc), audit))
            raise
        if as_json:
            print_json(_result(tag, path, method, values, done.outputs, done.outcome, done.note, audit))
        else:
            said = done.note.removeprefix("called; ")
            click.echo(printable(f"called {_shown_call(method, typed)} on {tag.path}: {said} "
                                 f"(audit entry {audit.entry_id})"))


COMMANDS = [call_method]

__all__ = ["COMMANDS"]
