"""What a user name, a token name and a password must be (checked where they are set: the CLI,
the console's admin page; a sign-in checks only the password against its hash)."""

from __future__ import annotations

import re

from exchange.errors import AccessError

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")
TOKEN_ID_SHAPE = re.compile(r"[0-9a-f]{12}")  # a token's public id (secrets.new_token): no name looks like one
PASSWORD_MIN_CHARS = 12  # the default of [api] password_min_chars
PASSWORD_MIN_CHARS_FLOOR = 8  # what the setting may lower it to
PASSWORD_MAX_CHARS = 1024  # argon2 takes any length; a bound keeps a huge body from costing much


def checked_name(name: object, noun: str = "user") -> str:
    """``name`` when it is 1 to 100 letters, digits and ``. _ @ -`` starting with a letter or
    digit; AccessError naming it otherwise."""
    if isinstance(name, str) and NAME_PATTERN.fullmatch(name):
        return name
    shown = repr(name) if isinstance(name, str) and len(name) <= 60 else type(name).__name__
    raise AccessError(f"{noun} name {shown} is not allowed: 1 to 100 letters, digits and . _ @ -, "
                      "starting with a letter or digit")


def checked_token_name(name: object) -> str:
    """A user-style name that cannot be taken for a token's id (``tokens revoke`` takes either)."""
    text = checked_name(name, "token")
    if TOKEN_ID_SHAPE.fullmatch(text):
        raise AccessError(f"token name {text!r} is not allowed: 12 hexadecimal digits are how token ids look "
                          "(`exchange tokens revoke` takes a name or an id)")
    return text


def encodable(text: str) -> bool:
    """False for text that is not valid Unicode (lone surrogates: bytes that were not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


FULL_NAME_MAX_CHARS = 200  # the store's column


def checked_full_name(full_name: object) -> str:
    """A user's printed name (what their electronic signatures show): text of 1 to 200 characters,
    without control characters; AccessError otherwise. Surrounding spaces are dropped."""
    if not isinstance(full_name, str) or not encodable(full_name):
        raise AccessError("a full name must be text (valid UTF-8)")
    shown = full_name.strip()
    if not 1 <= len(shown) <= FULL_NAME_MAX_CHARS:
        raise AccessError(f"a full name has 1 to {FULL_NAME_MAX_CHARS} characters, got {len(shown)}")
    if any(ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029" for c in shown):
        raise AccessError("a full name must not hold control characters (line breaks, escapes)")
    return shown


def checked_password(password: object, user: str, min_chars: int = PASSWORD_MIN_CHARS) -> str:
    """``password`` when it is good enough for ``user``: ``min_chars`` to 1024 characters, not only
    whitespace, not the user's name (in any case); AccessError saying which rule it breaks."""
    if not isinstance(password, str) or not encodable(password):
        raise AccessError("a password must be text (valid UTF-8)")
    if not min_chars <= len(password) <= PASSWORD_MAX_CHARS:
        raise AccessError(f"a password has {min_chars} to {PASSWORD_MAX_CHARS} characters "
                          f"([api] password_min_chars), got {len(password)}")
    if not password.strip():
        raise AccessError("a password must not be only spaces or other whitespace")
    if password.strip().casefold() == user.casefold():
        raise AccessError(f"a password must not be the user's name ({user!r})")
    return password
