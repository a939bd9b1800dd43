"""Operator prompts from the command line: list the open ones, answer one, verify an answer.

An answer without ``--user`` is trusted as the store is (whoever runs it can read and write the
store): it is held to no role, and its actor is the operating-system account running it
(``account@host``, from the process's uid, never from ``$LOGNAME``/``$USER``), as for ``exchange
send``. With ``--user NAME`` the Exchange user acts, once their password is right, held to their
role. A verification always names its user (``--user``, with their password): it is refused at
once without one, before anything is asked or read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from exchange._cli.accounts import authenticated
from exchange._cli.common import Context, parse_key_values, print_json
from exchange._cli.render import printable

if TYPE_CHECKING:
    from exchange._engine import PromptView


def _field_summary(name: str, field: dict[str, Any]) -> str:
    kind = field["type"]
    parts = [kind]
    if kind == "choice":
        parts = ["|".join(map(str, field["choices"]))]
    if field.get("min") is not None or field.get("max") is not None:
        low = "" if field.get("min") is None else f"{field['min']:g}"
        high = "" if field.get("max") is None else f"{field['max']:g}"
        parts.append(f"{low}..{high}")
    if field.get("unit"):
        parts.append(str(field["unit"]))
    if field.get("pattern"):
        parts.append(f"matching {field['pattern']}")
    if not field.get("required", True):
        parts.append("optional")
    shown = f"{field['label']} [{name}]" if field.get("label") else name  # the name is what -v takes
    return f"{shown} ({', '.join(parts)})"


def render_prompt(view: PromptView) -> str:
    """A prompt in a few lines: its run and key, status, text (its own lines indented), fields (a
    field with a label shows it, its name in brackets), who answered. Each line is made printable
    on its own: the line breaks are the text's, anything else a terminal would act on is escaped."""
    lines = [f"{view['run']}  {view['key']}  {view['status']}  (role {view['role']}"
             + (f", verified by {view['verify_role']}" if view["verify_role"] else "") + ")"]
    lines += [f"  {line}" for line in view["text"].replace("\r\n", "\n").split("\n")]
    lines.append("  fields: " + ", ".join(_field_summary(name, field) for name, field in view["fields"].items()))
    if view["status"] == "AWAITING_VERIFICATION":
        lines.append(f"  answered by {view['answered_by']} at {view['answered_at']}: {view['values']}")
    if view["deadline_at"]:
        lines.append(f"  closes at {view['deadline_at']} unless answered")
    return "\n".join(printable(line) for line in lines)


@click.command()
@click.option("--run", "run_id", default=None, help="Only the prompt of this run (id or prefix).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def prompts(obj: Context, run_id: str | None, as_json: bool) -> None:
    """The prompts that wait for a person (open, or answered and waiting for verification), oldest
    first."""
    views = obj.runtime(load_apps=False).open_prompts(run_id=run_id)
    if as_json:
        print_json(views)
        return
    if not views:
        click.echo("no open prompts")
    for view in views:
        click.echo(render_prompt(view))


_USER_HELP = "The Exchange user who acts (`exchange users add`); their password is asked, hidden."
_PASSWORD_ENV_HELP = "Read the user's password from this environment variable instead of asking."
_MEANING_HELP = "What the signature means (kept with it in the batch record)."


@click.command()
@click.argument("run_id")
@click.argument("key")
@click.option("-v", "--value", "values", multiple=True, metavar="NAME=VALUE",
              help="A field's value, JSON where it parses (density=1.02, approved=true, grade=B).")
@click.option("--reason", default=None, help="Why (kept in the run's audit trail).")
@click.option("--user", "user", metavar="NAME", default=None,
              help=_USER_HELP + " Without it the operating-system account answers, held to no role.")
@click.option("--password-env", metavar="VAR", default=None, help=_PASSWORD_ENV_HELP)
@click.option("--meaning", default=None, help=_MEANING_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def answer(obj: Context, run_id: str, key: str, values: tuple[str, ...], reason: str | None, user: str | None,
           password_env: str | None, meaning: str | None, as_json: bool) -> None:
    """Answer the open prompt KEY of run RUN_ID. A value that breaks its field (type, min/max,
    choices, a missing required field, an unknown one) is refused naming it (exit 1) and the prompt
    stays open. A prompt that asks for verification then waits for a second person
    (``exchange verify``). The answer is recorded as given by --user (after their password, held to
    their role), else by this process's operating-system account (``account@host``). An answer
    ``[signatures] required_for`` lists (``answer:KEY``) is signed: it needs --user (refused at once
    without, exit 2) and has the meaning --meaning (default "answered")."""
    from exchange._cli.signatures import signing_for
    from exchange._roles import ANSWER

    given = parse_key_values(values, "-v")
    runtime = obj.runtime(load_apps=False)
    run_id = runtime.checked_run_id("answer_prompt", run_id)
    me, signing = signing_for(obj, f"answer:{key}", run_id, user, password_env, meaning, ANSWER)
    view = runtime.answer_prompt(
        run_id, key, given, reason=reason, actor=None if me is None else me.actor,
        role=None if me is None else me.role, signing=signing)
    if as_json:
        print_json(view)
    elif view["status"] == "AWAITING_VERIFICATION":
        click.echo(printable(f"answered prompt {view['key']} of run {view['run']}; it waits for verification by "
                             f"a second person ({view['verify_role']} or above)"))
    else:
        click.echo(printable(f"answered prompt {view['key']} of run {view['run']}"))


@click.command()
@click.argument("run_id")
@click.argument("key")
@click.option("--user", "user", metavar="NAME", default=None, help=_USER_HELP + " Required.")
@click.option("--password-env", metavar="VAR", default=None, help=_PASSWORD_ENV_HELP)
@click.option("--reject", is_flag=True, help="Send the answer back: the prompt opens again.")
@click.option("--reason", default=None, help="Why (kept in the run's audit trail).")
@click.option("--meaning", default=None, help=_MEANING_HELP + " Default: \"verified\" (\"sent back\" with --reject).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def verify(obj: Context, run_id: str, key: str, user: str | None, password_env: str | None, reject: bool,
           reason: str | None, meaning: str | None, as_json: bool) -> None:
    """Verify the answer of prompt KEY of run RUN_ID as the Exchange user --user NAME, with their
    password (a different person from who answered, with at least the prompt's verify role); with
    --reject, send it back instead. Without --user: refused at once (exit 2), nothing asked. The
    verification is an electronic signature (--meaning), kept with the sha256 of the record."""
    from exchange._engine import Signing

    if user is None:
        raise click.UsageError("a verification is signed by an Exchange user with their password: "
                               "give --user NAME (and --password-env VAR, or type the password when asked)")
    me = authenticated(obj, user, password_env)
    meaning = meaning if meaning is not None else "sent back" if reject else "verified"
    signing = Signing(me.name, meaning, name=me.full_name)
    view = obj.runtime(load_apps=False).verify_prompt(run_id, key, actor=me.actor, role=me.role, reason=reason,
                                                      reject=reject, signing=signing)
    if as_json:
        print_json(view)
    elif reject:
        click.echo(printable(f"sent the answer of prompt {view['key']} of run {view['run']} back; it is open again"))
    else:
        click.echo(printable(f"verified the answer of prompt {view['key']} of run {view['run']} "
                             f"(given by {view['answered_by']})"))


COMMANDS = [prompts, answer, verify]
