"""``exchange sign``, ``release``, ``review`` and a STOP that ``[signatures] required_for`` lists, as
QA and an operator run them on a SQLite store: a wrong password or an unknown user signs nothing
(the same answer), a role without the right is refused, QA's custom role signs and releases once;
an unsigned STOP is refused at once (exit 2, nothing asked, nothing sent), a signed one is kept with
its signature; ``audit verify`` stays intact. Wrong passwords are counted across commands (each its
own process) and make the signer wait, as sign-ins do."""

from __future__ import annotations

from pathlib import Path

from exchange._auth.throttle import StoredThrottle
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv

APP = '''
from exchange.workflows.bootstrap import step, workflow


@step(name="sign.weigh")
def weigh(kg):
    return {"kg": kg}


@workflow(name="sign.batch")
def batch(kg: int = 5):
    weigh(kg)
    return "done"
'''

CONFIG = '''
[roles.qa]
rights = ["read", "sign", "release"]

[signatures]
required_for = ["STOP"]
'''
PASSWORDS = {"QUINN_PW": "quinn's long password", "OLGA_PW": "olga's long password", "BAD_PW": "not it at all"}


def test_qa_signs_and_releases_once_and_a_required_stop_needs_its_signer(tmp_path: Path,
                                                                        exchange_zygote: ForkServer) -> None:
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write(CONFIG)
    env.write_app("sign_app", APP)
    env.cli("users", "add", "quinn", "--role", "qa", "--full-name", "Quinn Q. Assurance",
            input_text=PASSWORDS["QUINN_PW"] + "\n").check()
    env.cli("users", "add", "olga", "--role", "operator", input_text=PASSWORDS["OLGA_PW"] + "\n").check()
    run_id = env.cli("run", "sign.batch", "--json").check().json()["id"]

    def cli(*args: str) -> tuple[int, str, str]:
        done = env.cli(*args, extra_env=PASSWORDS)
        return done.returncode, done.stdout, done.stderr

    for user in ("quinn", "nobody"):  # a wrong password and an unknown user: one answer, nothing signed
        code, _out, err = cli("sign", run_id, "--meaning", "reviewed", "--user", user, "--password-env", "BAD_PW")
        assert code == 1 and "wrong user name or password" in err, err
    code, _out, err = cli("sign", run_id, "--meaning", "reviewed", "--user", "olga", "--password-env", "OLGA_PW")
    assert code == 1 and "right 'sign'" in err, err
    assert env.cli("record", run_id, "--json").check().json()["signatures"] == []

    signed = env.cli("sign", run_id[:8], "--meaning", "reviewed", "--user", "quinn", "--password-env", "QUINN_PW",
                     "--json", extra_env=PASSWORDS).check().json()
    assert (signed["user"], signed["name"], signed["meaning"], signed["action"]) == (
        "quinn", "Quinn Q. Assurance", "reviewed", "sign")
    pending = env.cli("review", "--json").check().json()
    assert [(item["run"], item["released"]) for item in pending] == [(run_id, None)]
    released = env.cli("release", run_id, "--user", "quinn", "--password-env", "QUINN_PW",
                       extra_env=PASSWORDS).check().stdout
    assert f"released run {run_id} as quinn (Quinn Q. Assurance)" in released and "meaning 'released'" in released
    code, _out, err = cli("release", run_id, "--user", "quinn", "--password-env", "QUINN_PW")
    assert code == 1 and "released already, by quinn" in err, err
    assert "no finished run waits for release" in env.cli("review").check().stdout
    record = env.cli("record", run_id, "--json").check().json()
    assert [(s["user"], s["meaning"]) for s in record["signatures"]] == [("quinn", "reviewed"), ("quinn", "released")]

    (waiting,) = env.start_runs("sign.batch", [{}])  # no gateway: it waits in the queue, unfinished
    code, _out, err = cli("send", waiting, "STOP", "--reason", "leak")  # nothing asked: stdin is not read
    assert code == 2 and "STOP needs an electronic signature" in err, err
    assert env.cli("record", waiting, "--json").check().json()["commands"] == []
    assert env.cli("users", "full-name", "olga", " Olga Ops ").check().stdout.strip() == "user olga signs as Olga Ops"
    env.cli("send", waiting, "stop", "--reason", "leak", "--user", "olga", "--password-env", "OLGA_PW",
            "--meaning", "stopped for the leak", extra_env=PASSWORDS).check()
    record = env.cli("record", waiting, "--json").check().json()
    assert [(c["cmd"], c["actor"], c["reason"]) for c in record["commands"]] == [("STOP", "olga", "leak")]
    assert [(s["user"], s["name"], s["meaning"], s["action"]) for s in record["signatures"]] == [
        ("olga", "Olga Ops", "stopped for the leak", "STOP")]
    assert env.cli("audit", "verify").check().stdout.count("ok ") == 2


def test_wrong_passwords_are_counted_across_commands_and_then_make_the_signer_wait(
        tmp_path: Path, exchange_zygote: ForkServer) -> None:
    """Each ``exchange`` command is a process of its own: the command line's failed passwords are
    kept in the store (StoredThrottle), so the sixth attempt in a row waits, even with the right
    password, as a sign-in does; nothing is signed meanwhile."""
    env = ExchangeEnv.create(tmp_path, zygote=exchange_zygote)
    env.write_app("sign_app", APP)
    env.cli("users", "add", "quinn", "--role", "engineer", input_text=PASSWORDS["QUINN_PW"] + "\n").check()
    run_id = env.cli("run", "sign.batch", "--json").check().json()["id"]
    sign = ("sign", run_id, "--meaning", "reviewed", "--user", "quinn", "--password-env")
    for _ in range(2):
        wrong = env.cli(*sign, "BAD_PW", extra_env=PASSWORDS)
        assert wrong.returncode == 1 and "wrong user name or password" in wrong.stderr, wrong
    runtime = env.runtime()
    try:
        throttle = StoredThrottle(runtime.store.accounts)
        row = runtime.store.accounts.sign_in_failure("quinn", "the command line")
        assert row is not None and row.failures == 2 and row.wait_seconds == 0  # two processes, one count
        waits = [throttle.failed("Quinn", "the command line") for _ in range(3)]  # names compare without case
        assert waits == [0.0, 0.0, 5.0]
        waiting = env.cli(*sign, "QUINN_PW", extra_env=PASSWORDS)
        assert waiting.returncode == 1 and "too many failed sign-ins; try again in" in waiting.stderr, waiting
        assert runtime.signatures(run_id) == []
        assert throttle.retry_after("quinn", "elsewhere") is None  # counted per client, as sign-ins are
        throttle.succeeded("quinn", "the command line")
        assert throttle.retry_after("quinn", "the command line") is None
    finally:
        runtime.close()
    env.cli(*sign, "QUINN_PW", extra_env=PASSWORDS).check()
