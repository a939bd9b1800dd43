"""``[signatures] required_for = [...]``: the actions that need an electronic signature.

An action listed here is refused unless its person signs it: their Exchange user name and password
given at the action (the CLI's ``--user NAME``, an API body's ``signature: {password, meaning}``),
and a meaning (given, or the action's default, :data:`DEFAULT_MEANINGS`). The signature is stored
with the action, in its commit (docs/batch-record.md). The actions:

- ``verify``: verifying (or sending back) a prompt's answer;
- ``release``: ``exchange release`` (which always asks the password: listing it makes it no stricter,
  but says so);
- ``HOLD``, ``RESUME``, ``STOP``, ``ABORT``, ``RESET``: the operator commands of that name;
- ``cancel``: cancelling a run;
- ``answer:KEY``: answering the prompts of key ``KEY`` (in any workflow); ``answer:*`` every answer.

Checked when the config is loaded: an unknown entry is a ConfigError naming it. A leaf module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exchange._config_keys import closest, describe_value, refuse_unknown, section_table
from exchange.errors import ConfigError

SIGNATURES_KEYS = ("required_for",)
# The operator commands (exchange._engine.model.commands.COMMANDS; a test keeps the two equal).
COMMAND_ACTIONS = ("ABORT", "STOP", "HOLD", "RESUME", "RESET")
ANSWER_PREFIX = "answer:"
ACTIONS = ("verify", "release", *COMMAND_ACTIONS, "cancel")
DEFAULT_MEANINGS: Mapping[str, str] = {
    "verify": "verified", "release": "released", "cancel": "cancelled", "answer": "answered",
    **{cmd: f"ordered {cmd}" for cmd in COMMAND_ACTIONS},
}
KEY_MAX_CHARS = 200  # a prompt's key (the store's column)


@dataclass(frozen=True)
class SignaturesConfig:
    """``required_for``: the actions listed, as written (commands upper case)."""

    required_for: frozenset[str] = frozenset()

    def requires(self, action: str) -> bool:
        """Whether ``action`` (``verify``, ``release``, a command, ``cancel``, ``answer:KEY``) needs a signature."""
        if action.startswith(ANSWER_PREFIX):
            return action in self.required_for or f"{ANSWER_PREFIX}*" in self.required_for
        return action in self.required_for


def default_meaning(action: str) -> str:
    """The meaning a required signature gets when none is given."""
    return DEFAULT_MEANINGS["answer" if action.startswith(ANSWER_PREFIX) else action]


def signatures(raw: Mapping[str, Any], source: str) -> SignaturesConfig:
    table = section_table(raw, "signatures", source)
    where = f"{source}: signatures"
    refuse_unknown(table, SIGNATURES_KEYS, where)
    value = table.get("required_for", [])
    where += ".required_for"
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of actions, got {describe_value(value)}")
    found: set[str] = set()
    for entry in value:
        found.add(_action(entry, where))
    return SignaturesConfig(frozenset(found))


def _action(entry: Any, where: str) -> str:
    if not isinstance(entry, str):
        raise ConfigError(f"{where}: each action is a string, got {describe_value(entry)}")
    if entry.startswith(ANSWER_PREFIX):
        key = entry[len(ANSWER_PREFIX):]
        if not key.strip() or len(key) > KEY_MAX_CHARS:
            raise ConfigError(f"{where}: {entry!r} names no prompt key: write answer:KEY (a prompt's key, "
                              "or answer:* for every answer)")
        return entry
    if entry.upper() in COMMAND_ACTIONS:
        return entry.upper()
    if entry.lower() in ACTIONS:
        return entry.lower()
    match = closest(entry, ACTIONS)
    hint = f" (did you mean {match!r}?)" if match else ""
    raise ConfigError(f"{where}: unknown action {entry!r}{hint}; actions: {', '.join(ACTIONS)}, "
                      f"{ANSWER_PREFIX}KEY (answers to the prompts of that key), {ANSWER_PREFIX}*")
