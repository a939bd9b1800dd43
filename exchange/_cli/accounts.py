"""``exchange users`` and ``exchange tokens``: who may use the HTTP API and the console.

Passwords come from stdin (asked twice, hidden, on a terminal; the first line otherwise) or from an
environment variable (``--password-env``), never from the command line, where ``ps`` would show it.
The same goes for the password of a user who acts from the command line (``exchange verify --user
NAME``, :func:`authenticated`), asked once.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from exchange._cli.common import Context, default_actor, fail, print_json
from exchange._cli.render import printable

if TYPE_CHECKING:
    from exchange._auth.accounts import Accounts, Identity

_ROLE_HELP = "viewer, operator, engineer, admin, or a role of the config's [roles.NAME] (any case)"


def _role(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """``--role`` as one of the built-in roles or the config's ``[roles.NAME]`` (lowercased): a usage
    error naming the roles there are otherwise, before any password is asked. The config's roles
    are not known when the options are built, so click's Choice cannot check it."""
    from exchange._roles import Roles

    obj: Context = ctx.obj
    roles = Roles(obj.config.roles)
    if value.strip().lower() not in roles.names():
        raise click.BadParameter(f"{value!r} is not one of {', '.join(roles.names())} (a role of your own: "
                                 "[roles.NAME] rights = [...] in the config)")
    return value.strip().lower()


def _accounts(obj: Context, *, create: bool = False) -> Accounts:
    from exchange._auth.accounts import Accounts
    from exchange._auth.throttle import StoredThrottle

    runtime = obj.runtime(load_apps=False, create=create)
    # Each command is a process of its own: its failed passwords are counted in the store, where
    # the next command finds them (a wrong password signs nothing and is throttled as a sign-in).
    return Accounts(runtime.store.accounts, roles=runtime.roles, password_min_chars=obj.config.api.password_min_chars,
                    throttle=StoredThrottle(runtime.store.accounts))


def _text(raw: bytes, where: str) -> str:
    """``raw`` as UTF-8; a one-line error naming ``where`` and the first bad byte otherwise."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"{where} is not valid UTF-8 text (byte 0x{raw[exc.start]:02x} at position {exc.start}): "
             "write the password in UTF-8")


def read_password(password_env: str | None, *, confirm: bool = True, prompt: str = "Password") -> str:
    """The password, from the variable ``password_env`` names, else stdin (asked, hidden, on a
    terminal: twice with ``confirm``; else its first line). Read as bytes and decoded here, so that
    bytes that are not UTF-8 are one line naming where they came from, not a traceback."""
    if password_env is not None:
        raw = os.environb.get(os.fsencode(password_env))
        if raw is None:
            fail(f"--password-env {password_env}: the variable is not set")
        return _text(raw, f"--password-env {password_env}")
    if sys.stdin.isatty():
        return str(click.prompt(prompt, hide_input=True, confirmation_prompt=confirm))
    line = sys.stdin.buffer.readline()
    if not line:
        fail("no password on stdin (pipe it in, or use --password-env VAR)")
    return _text(line, "the password on stdin").rstrip("\r\n")


def authenticated(obj: Context, name: str, password_env: str | None) -> Identity:
    """The Exchange user ``name``, once their password (:func:`read_password`, asked once) is
    right; SignInRefused otherwise, the same for an unknown name, counted by the sign-in throttle
    and logged as a failed sign-in (:meth:`Accounts.authenticate`)."""
    password = read_password(password_env, confirm=False, prompt=f"Password of {name}")
    return _accounts(obj).authenticate(name, password, client="the command line")


@click.group()
def users() -> None:
    """Users of the HTTP API and the console (roles: viewer < operator < engineer < admin, and the
    config's [roles.NAME])."""


@users.command("add")
@click.argument("name")
@click.option("--role", required=True, callback=_role,
              help=f"What the user may do: {_ROLE_HELP}. Each built-in role has the rights of the ones before.")
@click.option("--password-env", metavar="VAR", default=None, help="Read the password from this environment variable.")
@click.option("--full-name", default=None, help="The printed name the user's electronic signatures show.")
@click.pass_obj
def users_add(obj: Context, name: str, role: str, password_env: str | None, full_name: str | None) -> None:
    """Add a user; the password comes from stdin or --password-env (at least 12 characters, see [api]
    password_min_chars; not only spaces, not the name). Names are unique whatever their case."""
    from exchange._auth.policy import checked_full_name

    if full_name is not None:
        checked_full_name(full_name)  # before the password is asked
    password = read_password(password_env)
    _accounts(obj, create=True).add_user(name, role.lower(), password, actor=default_actor(), full_name=full_name)
    click.echo(f"user {name} added ({role.lower()})")


@users.command("password")
@click.argument("name")
@click.option("--password-env", metavar="VAR", default=None, help="Read the password from this environment variable.")
@click.pass_obj
def users_password(obj: Context, name: str, password_env: str | None) -> None:
    """Set a user's password (its console sessions end, its OPC UA sessions may write no more)."""
    password = read_password(password_env)
    _accounts(obj).set_password(name, password, actor=default_actor())
    click.echo(f"password of {name} changed")


@users.command("full-name")
@click.argument("name")
@click.argument("full_name", required=False)
@click.pass_obj
def users_full_name(obj: Context, name: str, full_name: str | None) -> None:
    """Set the printed name the user's electronic signatures show from now on (without FULL_NAME:
    none, the user name is shown)."""
    stored = _accounts(obj).set_full_name(name, full_name, actor=default_actor())
    click.echo(printable(f"user {name} signs as {stored or name}"))


@users.command("role")
@click.argument("name")
@click.option("--role", required=True, callback=_role, help=f"The user's new role: {_ROLE_HELP}.")
@click.pass_obj
def users_role(obj: Context, name: str, role: str) -> None:
    """Give a user another role, at once in its open sessions (console and OPC UA); the last admin
    keeps its role."""
    _accounts(obj).set_role(name, role.lower(), actor=default_actor())
    click.echo(f"user {name} has the role {role.lower()}")


@users.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def users_list(obj: Context, as_json: bool) -> None:
    """The users and their roles."""
    items = _accounts(obj).list_users()
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo("no users (`exchange users add NAME --role ROLE`)")
    for item in items:
        lost = "" if item["rights"] else "  (role not configured: no rights)"
        full = f" ({item['full_name']})" if item["full_name"] else ""
        click.echo(printable(f"{item['name']:<24} {item['role']:<9} added {item['created_at']} by "
                             f"{item['created_by']}{lost}{full}"))


@users.command("roles")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def users_roles(obj: Context, as_json: bool) -> None:
    """The roles users and tokens may be given (built-in, then the config's [roles.NAME]), each with its
    rights."""
    from exchange._roles import RIGHTS, Roles

    roles = Roles(obj.config.roles)
    rights = {name: [right for right in RIGHTS if right in roles.rights_of(name)] for name in roles.names()}
    if as_json:
        print_json([{"role": name, "built_in": name not in roles.custom, "rights": held}
                    for name, held in rights.items()])
        return
    for name, held in rights.items():
        click.echo(f"{name:<16} {', '.join(held)}")


@users.command("remove")
@click.argument("name")
@click.pass_obj
def users_remove(obj: Context, name: str) -> None:
    """Remove a user: its console sessions end at once, its OPC UA sessions may write no more; the
    last admin stays."""
    _accounts(obj).remove_user(name, actor=default_actor())
    click.echo(f"user {name} removed")


@click.group()
def tokens() -> None:
    """API tokens for programs (Authorization: Bearer TOKEN)."""


@tokens.command("create")
@click.argument("name")
@click.option("--role", required=True, callback=_role, help=f"What the token may do: {_ROLE_HELP}.")
@click.pass_obj
def tokens_create(obj: Context, name: str, role: str) -> None:
    """Create a token and print it once (only its hash is stored: keep it somewhere safe). A live
    token's name is not taken twice."""
    click.echo(_accounts(obj, create=True).create_token(name, role.lower(), actor=default_actor()))


@tokens.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def tokens_list(obj: Context, as_json: bool) -> None:
    """The tokens (never their secret): id, name, role, created, revoked."""
    items = _accounts(obj).list_tokens()
    if as_json:
        print_json(items)
        return
    if not items:
        click.echo("no tokens (`exchange tokens create NAME --role ROLE`)")
    for item in items:
        revoked = f"  REVOKED {item['revoked_at']}" if item["revoked_at"] else ""
        click.echo(f"{item['id']}  {item['name']:<24} {item['role']:<9} created {item['created_at']}{revoked}")


@tokens.command("revoke")
@click.argument("name_or_id", metavar="NAME|ID")
@click.pass_obj
def tokens_revoke(obj: Context, name_or_id: str) -> None:
    """Revoke the live token with that id, else the live tokens of NAME: they stop working at once."""
    count = _accounts(obj).revoke_token(name_or_id, actor=default_actor())
    click.echo(f"{count} token(s) revoked")


COMMANDS = [users, tokens]
