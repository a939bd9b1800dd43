"""Electronic signatures from the command line: ``exchange sign``, ``exchange release`` and
``exchange review``, and :func:`signing_for`, the signature an action ``[signatures] required_for``
lists needs (``exchange verify``, ``answer``, ``send``, ``cancel``).

The signer is always an Exchange user named with ``--user``, whose password is asked at each
signing (or read from ``--password-env``): never the operating-system account. A wrong password
signs nothing and counts in the sign-in throttle as a failed sign-in does; an unknown user gets the
same answer. A required signature without ``--user`` is refused at once (exit 2), before anything
is asked or done.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from exchange._cli.accounts import authenticated
from exchange._cli.common import Context, print_json
from exchange._cli.render import printable

if TYPE_CHECKING:
    from exchange._auth.accounts import Identity
    from exchange._engine import Signing

_USER_HELP = "The Exchange user who signs (`exchange users add`); their password is asked, hidden."
_PASSWORD_ENV_HELP = "Read the user's password from this environment variable instead of asking."


def signing_for(obj: Context, action: str, run_id: str, user: str | None, password_env: str | None,
                meaning: str | None, right: str) -> tuple[Identity | None, Signing | None]:
    """Who acts and how the action ``action`` of ``run_id`` is signed: ``(None, None)`` for an
    action that needs no signature given without ``--user``; a usage error (exit 2, nothing asked)
    for one ``[signatures] required_for`` lists given without it; else the user once their password
    is right, held to ``right`` (NotAllowed), with a signature of ``meaning`` (or the action's
    default) when the action needs one or ``meaning`` is given."""
    from exchange._engine import Signing

    if password_env is not None and user is None:
        raise click.UsageError("--password-env is the password of --user NAME: name the user too")
    runtime = obj.runtime(load_apps=False)
    required = runtime.signature_required(action)
    if user is None:
        if required is not None:
            raise click.UsageError(f"{action} needs an electronic signature ([signatures] required_for lists it): "
                                   "give --user NAME (and --password-env VAR, or type the password when asked)")
        if meaning is not None:
            raise click.UsageError("--meaning is the meaning of a signature: give --user NAME too")
        return None, None
    me = authenticated(obj, user, password_env)
    if not me.may(right):
        from exchange.errors import NotAllowed

        raise NotAllowed(me.refusal(right, f"{action} of run {run_id}"))
    if required is None and meaning is None:
        return me, None
    return me, Signing(me.name, meaning if meaning is not None else required, name=me.full_name)


def _say(view: dict[str, Any], what: str, run_id: str) -> None:
    click.echo(printable(f"{what} run {run_id} as {view['user']} ({view['name']}), meaning {view['meaning']!r}, "
                         f"at {view['at']}; record sha256 {view['record_hash']}"))


@click.command()
@click.argument("run_id")
@click.option("--meaning", required=True, help="What the signature means: reviewed, approved, responsible for ...")
@click.option("--user", "user", metavar="NAME", required=True, help=_USER_HELP)
@click.option("--password-env", metavar="VAR", default=None, help=_PASSWORD_ENV_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def sign(obj: Context, run_id: str, meaning: str, user: str, password_env: str | None, as_json: bool) -> None:
    """Sign the batch record of run RUN_ID as the Exchange user --user NAME, with their password
    (asked again at each signing) and a --meaning; the signature keeps the sha256 of the record as
    signed. Needs the `sign` right."""
    from exchange._engine import Signing

    runtime = obj.runtime(load_apps=False)
    run_id = runtime.checked_run_id("sign", run_id)
    me = authenticated(obj, user, password_env)
    view = runtime.sign(run_id, Signing(me.name, meaning, name=me.full_name), role=me.role)
    if as_json:
        print_json(view)
    else:
        _say(view, "signed", run_id)


@click.command()
@click.argument("run_id")
@click.option("--user", "user", metavar="NAME", required=True, help=_USER_HELP)
@click.option("--password-env", metavar="VAR", default=None, help=_PASSWORD_ENV_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def release(obj: Context, run_id: str, user: str, password_env: str | None, as_json: bool) -> None:
    """Release the batch of the finished run RUN_ID: a signature meaning "released" by the Exchange
    user --user NAME, with their password (always asked). Needs the `release` right; a run is
    released once."""
    from exchange._engine import Signing

    runtime = obj.runtime(load_apps=False)
    run_id = runtime.checked_run_id("release", run_id)
    me = authenticated(obj, user, password_env)
    view = runtime.release(run_id, Signing(me.name, name=me.full_name), role=me.role)
    if as_json:
        print_json(view)
    else:
        _say(view, "released", run_id)


@click.command()
@click.option("--pending/--all", "pending", default=True,
              help="Only the finished runs not released yet, oldest first (the default); --all: every "
                   "finished run, newest first.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def review(obj: Context, pending: bool, limit: int, as_json: bool) -> None:
    """Finished runs for review by exception: each with its exceptions counted by kind, its
    signatures and its release (`exchange record RUN` shows one whole)."""
    items = obj.runtime(load_apps=False).review(pending=pending, limit=limit)
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo("no finished run waits for release" if pending else "no finished runs")
    for item in items:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(item["exception_kinds"].items()))
        released = ("released by " + item["released"]["user"] + " at " + item["released"]["at"]
                    if item["released"] else "not released")
        click.echo(printable(f"{item['run']}  {item['workflow']}  {item['status']}  finished {item['finished_at']}  "
                             f"exceptions {item['exceptions']}" + (f" ({kinds})" if kinds else "")
                             + f"  signatures {item['signatures']}  {released}"))


COMMANDS = [sign, release, review]
