"""Hashing and random secrets.

Passwords are hashed with argon2id (argon2-cffi's defaults, RFC 9106's low-memory profile: 64 MiB,
3 passes), so a stolen store does not give them away cheaply. Tokens and session ids are 256 random
bits: a fast SHA-256 of them is enough (nothing to guess), and lets each request be checked at once.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_HASHER = PasswordHasher()

TOKEN_PREFIX = "exch"
_TOKEN_ID_BYTES = 6  # the public part names the row: 12 hex characters
_SECRET_BYTES = 32


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def dummy_verify(password: str) -> None:
    """Spend what a verification costs, for an unknown user: the answer's timing does not tell
    which user names exist."""
    verify_password(_dummy_hash(), password)


@functools.cache
def _dummy_hash() -> str:
    # Made on first use, not at import: an argon2 hash costs tens of milliseconds, and every
    # `exchange` command (a gateway's cold start among them) imports this module.
    return _HASHER.hash(secrets.token_urlsafe(16))


def digest(secret: str) -> str:
    """SHA-256 of a random secret, as hex."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def new_token() -> tuple[str, str, str]:
    """``(token_id, secret, token)``: the token is ``exch_<id>_<secret>``, shown once; the store
    keeps the id and the secret's digest."""
    token_id = secrets.token_hex(_TOKEN_ID_BYTES)
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    return token_id, secret, f"{TOKEN_PREFIX}_{token_id}_{secret}"


def split_token(token: str) -> tuple[str, str] | None:
    """``(token_id, secret)`` of a token's text, or None when it is not shaped like one."""
    prefix, sep, rest = token.partition("_")
    token_id, sep2, secret = rest.partition("_")
    if prefix != TOKEN_PREFIX or not sep or not sep2 or len(token_id) != 2 * _TOKEN_ID_BYTES or not secret:
        return None
    return token_id, secret


def new_session() -> tuple[str, str]:
    """``(session_id, csrf_token)``: random, URL-safe."""
    return secrets.token_urlsafe(_SECRET_BYTES), secrets.token_urlsafe(_SECRET_BYTES)
