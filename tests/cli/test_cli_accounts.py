"""``exchange users`` and ``exchange tokens`` through the real command: passwords from stdin or an
environment variable, never echoed nor stored in clear; bad names, roles and passwords refused with one
line; tokens printed once and stored hashed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from exchange._auth.accounts import Accounts
from exchange.errors import SignInRefused
from tests.forkserver import ForkServer
from tests.harness import ExchangeEnv


@pytest.fixture
def env(tmp_path: Path, exchange_zygote: ForkServer) -> ExchangeEnv:
    return ExchangeEnv.create(tmp_path / "plant", zygote=exchange_zygote)


def _stored(env: ExchangeEnv, sql: str) -> list[tuple[object, ...]]:
    assert env.sqlite_path is not None
    with sqlite3.connect(env.sqlite_path) as conn:
        return conn.execute(sql).fetchall()


def test_users_add_list_password_and_remove(env: ExchangeEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    added = env.cli("users", "add", "anna", "--role", "Operator", input_text="s3cret-pass\n").check()
    assert added.stdout.strip() == "user anna added (operator)" and "s3cret" not in added.stdout + added.stderr
    monkeypatch.setenv("PLANT_ADMIN_PASSWORD", "another-pass")
    env.cli("users", "add", "bert", "--role", "admin", "--password-env", "PLANT_ADMIN_PASSWORD").check()
    listed = env.cli("users", "list", "--json").check().json()
    assert [(u["name"], u["role"]) for u in listed] == [("anna", "operator"), ("bert", "admin")]
    assert "anna" in env.cli("users", "list").check().stdout
    (hashed,) = _stored(env, "SELECT password_hash FROM exchange_users WHERE name = 'anna'")
    assert str(hashed[0]).startswith("$argon2id$") and "s3cret-pass" not in str(hashed[0])

    accounts = Accounts(env.runtime().store.accounts)
    assert accounts.authenticate("anna", "s3cret-pass").role == "operator"
    env.cli("users", "password", "anna", input_text="new-pass-99\n").check()
    with pytest.raises(SignInRefused):
        accounts.authenticate("anna", "s3cret-pass")
    assert accounts.authenticate("anna", "new-pass-99").name == "anna"

    assert env.cli("users", "remove", "anna").check().stdout.strip() == "user anna removed"
    assert [u["name"] for u in env.cli("users", "list", "--json").check().json()] == ["bert"]


@pytest.mark.parametrize(
    ("args", "stdin", "code", "words"),
    [
        (("users", "add", "carl", "--role", "boss"), "long-enough\n", 2, "'boss' is not one of"),
        (("users", "add", "carl", "--role", "viewer"), "short\n", 1, "8 to 1024 characters"),
        (("users", "add", "carl", "--role", "viewer"), "", 1, "no password on stdin"),
        (("users", "add", "bad name", "--role", "viewer"), "long-enough\n", 1, "'bad name' is not allowed"),
        (("users", "add", "carl", "--role", "viewer", "--password-env", "NOT_SET_ANYWHERE"), None, 1,
         "NOT_SET_ANYWHERE"),
        (("users", "remove", "nobody"), None, 1, "no user named 'nobody'"),
        (("users", "password", "nobody"), "long-enough\n", 1, "no user named 'nobody'"),
        (("tokens", "create", "scada", "--role", "root"), None, 2, "'root' is not one of"),
        (("tokens", "revoke", "nothing"), None, 1, "no live token named 'nothing'"),
    ],
)
def test_bad_account_input_is_one_line_and_changes_nothing(
    env: ExchangeEnv, args: tuple[str, ...], stdin: str | None, code: int, words: str
) -> None:
    env.cli("users", "add", "keeper", "--role", "admin", input_text="keeper-pass\n").check()
    result = env.cli(*args, input_text=stdin)
    assert result.returncode == code, result
    assert words in result.stderr and "Traceback" not in result.stderr
    assert [u["name"] for u in env.cli("users", "list", "--json").check().json()] == ["keeper"]
    assert env.cli("tokens", "list", "--json").check().json() == []


def test_a_duplicate_user_is_refused_and_keeps_its_password(env: ExchangeEnv) -> None:
    env.cli("users", "add", "dora", "--role", "viewer", input_text="first-pass\n").check()
    again = env.cli("users", "add", "dora", "--role", "admin", input_text="second-pass\n")
    assert again.returncode == 1 and "already exists" in again.stderr
    accounts = Accounts(env.runtime().store.accounts)
    assert accounts.authenticate("dora", "first-pass").role == "viewer"


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
