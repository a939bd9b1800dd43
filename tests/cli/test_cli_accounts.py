"""``exchange users`` and ``exchange tokens`` through the real command: passwords from stdin or an
environment variable, never echoed nor stored in clear; bad names, roles and passwords refused with one
line; tokens printed once and stored hashed."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from exchange._auth.accounts import Accounts
from exchange.errors import SignInRefused
from tests.api.conftest import add_roles
from tests.forkserver import ForkServer
from tests.harness import EXCHANGE_CMD, ExchangeEnv


@pytest.fixture
def env(tmp_path: Path, exchange_zygote: ForkServer) -> ExchangeEnv:
    return ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)


def _stored(env: ExchangeEnv, sql: str) -> list[tuple[object, ...]]:
    assert env.sqlite_path is not None
    with sqlite3.connect(env.sqlite_path) as conn:
        return conn.execute(sql).fetchall()


def test_users_add_list_password_and_remove(env: ExchangeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    added = env.cli("users", "add", "anna", "--role", "Operator", input_text="s3cret-pass-1\n").check()
    assert added.stdout.strip() == "user anna added (operator)" and "s3cret" not in added.stdout + added.stderr
    monkeypatch.setenv("PLANT_ADMIN_PASSWORD", "another-pass-1")
    env.cli("users", "add", "bert", "--role", "admin", "--password-env", "PLANT_ADMIN_PASSWORD").check()
    listed = env.cli("users", "list", "--json").check().json()
    assert [(u["name"], u["role"]) for u in listed] == [("anna", "operator"), ("bert", "admin")]
    assert "anna" in env.cli("users", "list").check().stdout
    (hashed,) = _stored(env, "SELECT password_hash FROM exchange_users WHERE name = 'anna'")
    assert str(hashed[0]).startswith("$argon2id$") and "s3cret-pass-1" not in str(hashed[0])

    accounts = Accounts(env.runtime().store.accounts)
    assert accounts.authenticate("anna", "s3cret-pass-1").role == "operator"
    env.cli("users", "password", "anna", input_text="new-pass-99-x\n").check()
    with pytest.raises(SignInRefused):
        accounts.authenticate("anna", "s3cret-pass-1")
    assert accounts.authenticate("anna", "new-pass-99-x").name == "anna"

    assert env.cli("users", "remove", "anna").check().stdout.strip() == "user anna removed"
    assert [u["name"] for u in env.cli("users", "list", "--json").check().json()] == ["bert"]


@pytest.mark.parametrize(
    ("args", "stdin", "code", "words"),
    [
        (("users", "add", "carl", "--role", "boss"), "long-enough-pw\n", 2, "'boss' is not one of"),
        (("users", "add", "carl", "--role", "viewer"), "short\n", 1, "12 to 1024 characters"),
        (("users", "add", "carl", "--role", "viewer"), "", 1, "no password on stdin"),
        (("users", "add", "bad name", "--role", "viewer"), "long-enough-pw\n", 1, "'bad name' is not allowed"),
        (("users", "add", "carl", "--role", "viewer", "--password-env", "NOT_SET_ANYWHERE"), None, 1,
         "NOT_SET_ANYWHERE"),
        (("users", "remove", "nobody"), None, 1, "no user named 'nobody'"),
        (("users", "password", "nobody"), "long-enough-pw\n", 1, "no user named 'nobody'"),
        (("tokens", "create", "scada", "--role", "root"), None, 2, "'root' is not one of"),
        (("tokens", "revoke", "nothing"), None, 1, "no live token named 'nothing'"),
        # the password policy: 12 characters at least, not only whitespace, not the user's name
        (("users", "add", "carl", "--role", "admin"), "password\n", 1,
         "12 to 1024 characters ([api] password_min_chars), got 8"),
        (("users", "add", "carl", "--role", "admin"), " " * 12 + "\n", 1, "must not be only spaces"),
        (("users", "add", "carl-the-operator", "--role", "viewer"), "Carl-The-Operator\n", 1,
         "must not be the user's name ('carl-the-operator')"),
        (("users", "password", "keeper"), "keeper\t\t\t\t\t\t\n", 1, "must not be the user's name"),
        # names are unique whatever their case
        (("users", "add", "KEEPER", "--role", "viewer"), "long-enough-pw\n", 1,
         "user 'keeper' already exists (user names are compared without case)"),
        # the last admin stays an admin
        (("users", "remove", "keeper"), None, 1, "user 'keeper' is the last admin and cannot be removed"),
        (("users", "role", "keeper", "--role", "engineer"), None, 1, "is the last admin and cannot be given the role"),
        (("users", "role", "nobody", "--role", "engineer"), None, 1, "no user named 'nobody'"),
        # a token's name never looks like a token's id
        (("tokens", "create", "0123456789ab", "--role", "viewer"), None, 1, "12 hexadecimal digits"),
    ],
)
def test_bad_account_input_is_one_line_and_changes_nothing(
    env: ExchangeEnv, args: tuple[str, ...], stdin: str | None, code: int, words: str
) -> None:
    runtime = env.runtime()  # the setting-up and the checks in this process: only the command under test forks
    try:
        accounts = Accounts(runtime.store.accounts)
        accounts.add_user("keeper", "admin", "keeper-pass-1", actor="test")
        result = env.cli(*args, input_text=stdin)
        assert result.returncode == code, result
        assert words in result.stderr and "Traceback" not in result.stderr
        assert [(u.name, u.role) for u in runtime.store.accounts.list_users()] == [("keeper", "admin")]
        assert runtime.store.accounts.list_tokens() == []
        accounts.authenticate("keeper", "keeper-pass-1")  # its password unchanged
    finally:
        runtime.close()


def test_a_duplicate_user_is_refused_and_keeps_its_password(env: ExchangeEnv) -> None:
    env.cli("users", "add", "dora", "--role", "viewer", input_text="first-pass-12\n").check()
    again = env.cli("users", "add", "dora", "--role", "admin", input_text="second-pass-1\n")
    assert again.returncode == 1 and "already exists" in again.stderr
    accounts = Accounts(env.runtime().store.accounts)
    assert accounts.authenticate("dora", "first-pass-12").role == "viewer"


def test_tokens_are_printed_once_and_stored_hashed(env: ExchangeEnv) -> None:
    token = env.cli("tokens", "create", "scada", "--role", "operator").check().stdout.strip()
    assert token.startswith("exch_") and len(token) > 40
    listed = env.cli("tokens", "list", "--json").check().json()
    assert [(t["name"], t["role"], t["revoked_at"]) for t in listed] == [("scada", "operator", None)]
    text = env.cli("tokens", "list").check().stdout
    secret = token.split("_", 2)[2]
    assert "scada" in text and secret not in text
    rows = _stored(env, "SELECT id, secret_hash FROM exchange_tokens")
    assert rows and all(secret not in str(value) for row in rows for value in row)
    accounts = Accounts(env.runtime().store.accounts)
    identity = accounts.token_identity(token)
    assert identity is not None and identity.actor == "token:scada" and identity.role == "operator"
    assert accounts.token_identity(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    env.cli("tokens", "revoke", listed[0]["id"]).check()
    assert accounts.token_identity(token) is None
    assert "REVOKED" in env.cli("tokens", "list").check().stdout


def _cli_bytes(env: ExchangeEnv, *args: str, stdin: bytes = b"",
               extra_env: dict[bytes, bytes] | None = None) -> subprocess.CompletedProcess[bytes]:
    """The real command in its own process, with bytes on stdin and in the environment (what a
    shell can hand it: not necessarily UTF-8)."""
    environ = {k.encode(): v.encode() for k, v in env.process_env().items()} | (extra_env or {})
    return subprocess.run([*EXCHANGE_CMD, "--config", str(env.config_path), *args], cwd=env.root, env=environ,
                          input=stdin, capture_output=True, timeout=60)


def test_a_password_that_is_not_utf8_is_one_line_naming_where_it_came_from(
    tmp_path: Path, exchange_zygote: ForkServer
) -> None:
    env = ExchangeEnv.create(tmp_path / "new", zygote=exchange_zygote, seeded=False)  # no store yet
    piped = _cli_bytes(env, "users", "add", "carl", "--role", "viewer", stdin=b"caf\xe9-au-lait-1234\n")
    assert piped.returncode == 1, piped
    assert piped.stderr.decode() == ("error: the password on stdin is not valid UTF-8 text (byte 0xe9 at position 3): "
                                     "write the password in UTF-8\n")
    named = _cli_bytes(env, "users", "add", "carl", "--role", "viewer", "--password-env", "CARL_PW",
                       extra_env={b"CARL_PW": b"\xff\xfe-long-enough-pw"})
    assert named.returncode == 1, named
    assert named.stderr.decode().startswith("error: --password-env CARL_PW is not valid UTF-8 text (byte 0xff at "
                                            "position 0)")
    assert env.sqlite_path is not None and not env.sqlite_path.exists()  # refused before the store was opened
    good = _cli_bytes(env, "users", "add", "carl", "--role", "viewer", stdin="café-au-lait-1234\n".encode())
    assert good.returncode == 0, good
    assert [u["name"] for u in env.cli("users", "list", "--json").check().json()] == ["carl"]
    assert Accounts(env.runtime().store.accounts).authenticate("carl", "café-au-lait-1234").name == "carl"


def test_the_shortest_password_is_a_setting(env: ExchangeEnv) -> None:
    with env.config_path.open("a", encoding="utf-8") as config:
        config.write("\n[api]\npassword_min_chars = 16\n")
    short = env.cli("users", "add", "dora", "--role", "viewer", input_text="fifteen-chars-x\n")
    assert short.returncode == 1 and "16 to 1024 characters ([api] password_min_chars), got 15" in short.stderr
    env.cli("users", "add", "dora", "--role", "viewer", input_text="sixteen-chars-xy\n").check()


def test_the_last_admin_stays_until_another_admin_is_added(env: ExchangeEnv) -> None:
    for name, role in (("ada", "admin"), ("bob", "admin"), ("cy", "operator")):
        env.cli("users", "add", name, "--role", role, input_text="long-enough-pw\n").check()
    env.cli("users", "role", "bob", "--role", "engineer").check()  # another admin is left: ada
    refused = env.cli("users", "remove", "ada")
    assert refused.returncode == 1 and "'ada' is the last admin" in refused.stderr
    assert env.cli("users", "role", "cy", "--role", "admin").check().stdout.strip() == "user cy has the role admin"
    env.cli("users", "remove", "ada").check()
    roles = {u["name"]: u["role"] for u in env.cli("users", "list", "--json").check().json()}
    assert roles == {"bob": "engineer", "cy": "admin"}


def test_a_live_token_name_is_not_taken_twice_and_an_id_revokes_only_its_token(env: ExchangeEnv) -> None:
    env.cli("tokens", "create", "scada", "--role", "operator").check()
    again = env.cli("tokens", "create", "scada", "--role", "admin")
    assert again.returncode == 1 and "a live token named 'scada' exists already" in again.stderr
    (first,) = env.cli("tokens", "list", "--json").check().json()
    mes = env.cli("tokens", "create", "mes", "--role", "viewer").check().stdout.strip()
    # the old store could hold a token named like another's id: the id wins, the name is not revoked with it
    with sqlite3.connect(str(env.sqlite_path)) as conn:
        conn.execute("UPDATE exchange_tokens SET name = ? WHERE name = 'mes'", (first["id"],))
    assert env.cli("tokens", "revoke", first["id"]).check().stdout.strip() == "1 token(s) revoked"
    listed = {t["id"]: t for t in env.cli("tokens", "list", "--json").check().json()}
    assert listed[first["id"]]["revoked_at"] is not None
    (other,) = [t for t in listed.values() if t["id"] != first["id"]]
    assert other["name"] == first["id"] and other["revoked_at"] is None
    assert Accounts(env.runtime().store.accounts).token_identity(mes) is not None
    env.cli("tokens", "create", "scada", "--role", "admin").check()  # the first one is revoked: the name is free


def test_a_role_of_the_config_is_given_listed_and_an_unknown_one_names_the_roles(env: ExchangeEnv) -> None:
    add_roles(env, {"qa": ["read", "sign", "release"]})
    env.cli("users", "add", "quinn", "--role", "QA", input_text="quality-pass-1\n").check()
    refused = env.cli("users", "add", "carl", "--role", "boss", input_text="long-enough-pw\n")
    assert refused.returncode == 2 and "'boss' is not one of viewer, operator, engineer, admin, qa" in refused.stderr
    listed = env.cli("users", "list", "--json").check().json()
    assert listed[0]["role"] == "qa" and listed[0]["rights"] == ["read", "sign", "release"]
    roles = {r["role"]: r for r in env.cli("users", "roles", "--json").check().json()}
    assert list(roles) == ["viewer", "operator", "engineer", "admin", "qa"] and not roles["qa"]["built_in"]
    assert roles["engineer"]["rights"] == ["read", "start", "start_free", "command", "answer", "verify", "cancel",
                                           "rerun", "edit_templates", "sign"]
    env.config_path.write_text(env.config_path.read_text(encoding="utf-8").split("[roles.qa]")[0], encoding="utf-8")
    lost = env.cli("users", "list").check().stdout  # quinn is kept, with no rights, and it says so
    assert "quinn" in lost and "role not configured: no rights" in lost
