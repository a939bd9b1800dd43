"""Who acts when nobody is named: the operating-system account of the process's uid, whatever the
environment says (``LOGNAME=eve`` is anyone's to set); and when two actors are one person."""

from __future__ import annotations

import os
import platform
import pwd

import pytest

from exchange import _actors
from exchange._engine.operator.runtime import default_actor


def test_the_local_actor_is_the_uid_s_account_never_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):  # what getpass.getuser() reads, in its order
        monkeypatch.setenv(name, "eve<script>\x1b")
    clear = getattr(default_actor, "cache_clear", None)  # a cache filled before the variables were set
    for cached in (_actors.local_actor.cache_clear, clear):
        if cached is not None:
            cached()
    try:
        assert default_actor() == f"{pwd.getpwuid(os.getuid()).pw_name}@{platform.node() or 'localhost'}"
    finally:
        _actors.local_actor.cache_clear()


def test_an_account_without_a_name_is_its_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", unknown)  # a container's uid with no entry in /etc/passwd
    monkeypatch.setenv("LOGNAME", "eve")
    assert _actors.os_account() == f"uid{os.getuid()}"


@pytest.mark.parametrize(("a", "b", "same"), [
    ("anna", "anna", True),
    ("anna", "Anna", True),  # Exchange user names are unique whatever their case
    ("olga@vm", "olga", True),  # the OS account olga on vm is taken to be the Exchange user olga
    ("olga@vm", "OLGA@hmi-2", True),
    ("anna", "eve", False),
    ("anna@vm", "eve@vm", False),
    ("token:t-opr", "t-opr@vm", False),  # a token is no person: refused elsewhere, never matched by name
])
def test_same_person(a: str, b: str, same: bool) -> None:
    assert _actors.same_person(a, b) is same
    assert _actors.same_person(b, a) is same
