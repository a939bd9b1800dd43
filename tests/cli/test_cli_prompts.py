"""``exchange prompts``, ``exchange answer`` and ``exchange verify`` against a real gateway process on
a SQLite file: the open prompts listed (a text's own lines as lines, labels and patterns shown), an
answer refused naming the field (exit 1, the prompt still open: blank text, a pattern missed, a
control character), answered, verified by a second person (the one who answered cannot), sent
back. Who acts is an Exchange user with their password (``--user``), or for an answer without it
the operating-system account from the uid: never ``$LOGNAME``/``$USER``, which anyone sets."""

from __future__ import annotations

import os
import platform
import pwd
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exchange._auth.policy import NAME_PATTERN
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv, Gateway, wait_until

APP = '''
from exchange.workflows.bootstrap import workflow
from exchange.workflows.steps import operator


@workflow(name="cli.lab")
def lab(verify_role=None):
    return operator.prompt("lab", "Enter the density of batch B-3",
                           fields={"density": {"type": "float", "min": 0.9, "max": 1.2, "unit": "g/cm3"},
                                   "grade": {"type": "choice", "choices": ["A", "B"]}},
                           verify_role=verify_role)


@workflow(name="cli.lot")
def lot():
    return operator.prompt("lot", "Weigh the sample\\nthen enter its lot \\x1b[2J number",
                           fields={"lot": {"type": "text", "label": "Lot number", "pattern": r"^L-\\d{6}$"},
                                   "note": {"type": "text", "required": False}})
'''


PASSWORDS = {"anna": "anna's long password", "eve": "eve's long password"}
ROLES = {"anna": "operator", "eve": "engineer"}
ME = pwd.getpwuid(os.getuid()).pw_name  # the account running the tests: what an answer without --user records
ME_AT_HOST = f"{ME}@{platform.node() or 'localhost'}"
SPOOF = {"LOGNAME": "eve", "USER": "eve", "USERNAME": "eve", "LNAME": "eve"}  # what anyone can set


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, exchange_zygote: ForkServer) -> Iterator[ExchangeEnv]:
    env = ExchangeEnv.create(Path(tmp_path_factory.mktemp("cli-prompts")), zygote=exchange_zygote)
    env.write_app("lab_app", APP)
    for name, role in ROLES.items():
        env.cli("users", "add", name, "--role", role, input_text=PASSWORDS[name] + "\n").check()
    if NAME_PATTERN.fullmatch(ME) and ME.casefold() not in ROLES:  # the OS account as an Exchange user too
        env.cli("users", "add", ME, "--role", "admin", input_text=f"{ME}'s long password\n").check()
    gateway: Gateway
    with env.gateway() as gateway:
        gateway.start()
        yield env


def open_lab(env: ExchangeEnv, **params: Any) -> str:
    (run_id,) = env.start_runs("cli.lab", [params])
    wait_until(lambda: env.show(run_id)["prompt"], 20, message="the prompt to open")
    return run_id


def done(env: ExchangeEnv, run_id: str) -> dict[str, Any]:
    view: dict[str, Any] = wait_until(lambda: (v := env.show(run_id))["status"] == "SUCCESS" and v, 20,
                                      message="SUCCESS")
    return view


def test_prompts_lists_show_says_how_and_answer_refuses_then_takes(env: ExchangeEnv) -> None:
    run_id = open_lab(env)
    listed = env.cli("prompts").check().stdout
    assert run_id in listed and "Enter the density of batch B-3" in listed
    assert "density (float, 0.9..1.2, g/cm3)" in listed and "grade (A|B)" in listed
    needing = env.cli("runs", "--attention").check().stdout
    assert needing.splitlines()[0].split()[:3] == ["REASON", "RUN", "WORKFLOW"]
    assert any(line.split()[:3] == ["prompt", run_id[:8], "cli.lab"] for line in needing.splitlines()), needing
    rows = env.cli("runs", "--attention", "--json").check().json()
    assert [(row["run"], row["reason"]) for row in rows if row["run"] == run_id] == [(run_id, "prompt")]
    mixed = env.cli("runs", "--attention", "--status", "ERROR")
    assert mixed.returncode == 2 and "without other filters" in mixed.stderr, mixed.stderr
    shown = env.cli("show", run_id).check().stdout
    assert "prompt    lab: Enter the density of batch B-3" in shown and "exchange answer" in shown
    for values, field in ((["density=1.5", "grade=A"], "density"), (["density=1.0", "grade=C"], "grade"),
                          (["density=1.0"], "grade"), (["density=1.0", "grade=A", "colour=red"], "colour")):
        refused = env.cli("answer", run_id, "lab", *[arg for v in values for arg in ("-v", v)])
        assert refused.returncode == 1 and f"field {field!r}" in refused.stderr, refused.stderr
    twice = env.cli("answer", run_id, "lab", "-v", "density=1", "-v", "density=2")
    assert twice.returncode == 2 and "'density' is given twice" in twice.stderr, twice.stderr
    assert env.show(run_id)["prompt"]["status"] == "OPEN"
    answered = env.cli("answer", run_id[:8], "lab", "-v", "density=1.05", "-v", "grade=B", "--reason", "lab 7")
    assert answered.check().stdout.strip() == f"answered prompt lab of run {run_id}"
    result = done(env, run_id)["result"]
    assert result["values"] == {"density": 1.05, "grade": "B"} and result["reason"] == "lab 7"
    assert run_id not in env.cli("runs", "--attention").check().stdout
    again = env.cli("answer", run_id, "lab", "-v", "density=1.05", "-v", "grade=B")
    assert again.returncode == 1 and "the run is SUCCESS" in again.stderr, again.stderr
    assert run_id not in env.cli("prompts").check().stdout


def as_user(name: str, password: str | None = None) -> tuple[list[str], dict[str, str]]:
    """``--user NAME --password-env VAR`` and the variable, for ``env.cli(..., extra_env=...)``."""
    return ["--user", name, "--password-env", "TEST_PASSWORD"], {"TEST_PASSWORD": password or PASSWORDS[name]}


def audit(env: ExchangeEnv, run_id: str) -> list[tuple[str, str]]:
    return [(e["kind"], e["actor"]) for e in env.show(run_id)["events"] if e["kind"].startswith("prompt_")]


def test_an_answer_without_user_is_the_os_account_whatever_logname_says(env: ExchangeEnv) -> None:
    run_id = open_lab(env)
    env.cli("answer", run_id, "lab", "-v", "density=1.0", "-v", "grade=A", extra_env=SPOOF).check()
    result = done(env, run_id)["result"]
    assert result["by"] == ME_AT_HOST, result  # not eve@...: $LOGNAME and $USER are anyone's to set
    assert audit(env, run_id)[-1] == ("prompt_answered", ME_AT_HOST)
    password_alone = env.cli("answer", run_id, "lab", "-v", "density=1.0", "--password-env", "X")
    assert password_alone.returncode == 2 and "--user" in password_alone.stderr, password_alone.stderr


def test_verify_needs_user_and_password_and_a_second_person(env: ExchangeEnv) -> None:
    run_id = open_lab(env, verify_role="engineer")
    env.cli("answer", run_id, "lab", "-v", "density=1.1", "-v", "grade=A", extra_env=SPOOF).check()
    listed = env.cli("prompts", "--json").check().json()
    (mine,) = [p for p in listed if p["run"] == run_id]
    assert mine["status"] == "AWAITING_VERIFICATION" and mine["values"] == {"density": 1.1, "grade": "A"}
    assert mine["answered_by"] == ME_AT_HOST
    before = env.show(run_id)["events"]
    # no --user: refused at once whatever the environment says, nothing asked, nothing done
    bare = env.cli("verify", run_id, "lab", extra_env=SPOOF, input_text="eve's long password\n")
    assert bare.returncode == 2 and "--user NAME" in bare.stderr, bare.stderr
    assert "Password" not in bare.stdout + bare.stderr
    args, password = as_user("eve", "not eve's password")
    wrong = env.cli("verify", run_id, "lab", *args, extra_env={**SPOOF, **password})
    assert wrong.returncode == 1 and "wrong user name or password" in wrong.stderr, wrong.stderr
    args, password = as_user("anna")
    operator = env.cli("verify", run_id, "lab", *args, extra_env=password)
    assert operator.returncode == 1 and "needs the engineer role" in operator.stderr, operator.stderr
    if NAME_PATTERN.fullmatch(ME) and ME.casefold() not in ROLES:  # who answered as the OS account, now by name
        args, password = as_user(ME, f"{ME}'s long password")
        same = env.cli("verify", run_id, "lab", *args, extra_env=password)
        assert same.returncode == 1 and "second, different person" in same.stderr, same.stderr
    assert env.show(run_id)["events"] == before and env.show(run_id)["prompt"]["status"] == "AWAITING_VERIFICATION"
    verified = env.cli("verify", run_id, "lab", "--user", "eve", "--reason", "checked the sheet",
                       "--meaning", "density checked", input_text=PASSWORDS["eve"] + "\n", extra_env=SPOOF).check()
    assert f"verified the answer of prompt lab of run {run_id} (given by {ME_AT_HOST})" in verified.stdout
    result = done(env, run_id)["result"]
    assert (result["by"], result["verified_by"]) == (ME_AT_HOST, "eve")
    assert audit(env, run_id)[-2:] == [("prompt_answered", ME_AT_HOST), ("prompt_verified", "eve")]
    (signature,) = env.cli("record", run_id, "--json").check().json()["signatures"]  # the verification signed
    assert (signature["user"], signature["meaning"], signature["prompt"]) == ("eve", "density checked", "lab")


def test_a_user_answers_by_name_and_cannot_verify_under_another_case_and_reject_sends_back(
        env: ExchangeEnv) -> None:
    run_id = open_lab(env, verify_role="engineer")
    args, password = as_user("anna")
    env.cli("answer", run_id, "lab", "-v", "density=1.1", "-v", "grade=A", *args, extra_env=password).check()
    assert env.show(run_id)["prompt"]["answered_by"] == "anna"
    runtime = env.runtime()
    try:  # anna again, under the name of her OS account on another machine: one person
        with pytest.raises(Exception, match="second, different person"):
            runtime.verify_prompt(run_id, "lab", actor="Anna@hmi-2", role="admin")
    finally:
        runtime.close()
    args, password = as_user("eve")
    back = env.cli("verify", run_id, "lab", "--reject", "--reason", "re-weigh", *args, extra_env=password).check()
    assert "it is open again" in back.stdout
    assert env.show(run_id)["prompt"]["status"] == "OPEN"
    runtime = env.runtime()
    try:  # anna answers again, through the runtime (as the console and the API do, once she is signed in)
        runtime.answer_prompt(run_id, "lab", {"density": 1.0, "grade": "B"}, actor="anna", role="operator")
    finally:
        runtime.close()
    verified = env.cli("verify", run_id, "lab", "--reason", "checked the sheet", *args, extra_env=password).check()
    assert "verified the answer of prompt lab" in verified.stdout and "(given by anna)" in verified.stdout
    result = done(env, run_id)["result"]
    assert (result["values"], result["by"], result["verified_by"]) == ({"density": 1.0, "grade": "B"}, "anna", "eve")
    assert audit(env, run_id)[1:] == [("prompt_answered", "anna"), ("prompt_rejected", "eve"),
                                      ("prompt_answered", "anna"), ("prompt_verified", "eve")]


def test_prompts_prints_the_texts_lines_labels_and_patterns_and_answer_refuses_what_text_may_not_be(
    env: ExchangeEnv,
) -> None:
    (run_id,) = env.start_runs("cli.lot", [{}])
    wait_until(lambda: env.show(run_id)["prompt"], 20, message="the prompt to open")
    listed = env.cli("prompts", "--run", run_id).check().stdout
    assert listed.splitlines()[1:3] == ["  Weigh the sample", "  then enter its lot \\x1b[2J number"], listed
    assert "\\x0a" not in listed and "\x1b" not in listed
    assert "fields: Lot number [lot] (text, matching ^L-\\d{6}$), note (text, optional)" in listed, listed
    shown = env.cli("show", run_id).check().stdout  # the run's line: the text's first line, and a mark
    assert "prompt    lot: Weigh the sample …  waits for an answer" in shown and "\\x0a" not in shown, shown
    for value, words in (("   ", "a value is required (blank text is no value)"),
                         ("\t", "a value is required (blank text is no value)"),
                         ("", "a value is required (blank text is no value)"),
                         ("L-12345", "'L-12345' does not match the pattern ^L-\\d{6}$")):
        refused = env.cli("answer", run_id, "lot", "-v", f"lot={value}")
        assert refused.returncode == 1 and f"field 'lot' (Lot number): {words}" in refused.stderr, refused.stderr
    for note, words in (("ok\x1b[31m", "a control character U+001B at position 2"),
                        ("a\u202eb", "a bidirectional override U+202E at position 1")):
        refused = env.cli("answer", run_id, "lot", "-v", "lot=L-123456", "-v", f"note={note}")
        assert refused.returncode == 1 and f"field 'note': holds {words}" in refused.stderr, refused.stderr
    assert env.show(run_id)["prompt"]["status"] == "OPEN"
    env.cli("answer", run_id, "lot", "-v", "lot=L-123456", "-v", "note=scale 2\n\tre-zeroed").check()
    assert done(env, run_id)["result"]["values"] == {"lot": "L-123456", "note": "scale 2\n\tre-zeroed"}
