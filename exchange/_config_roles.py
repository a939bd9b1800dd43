"""``[roles.NAME] rights = [...]``: a plant's own roles, each a set of rights from
:data:`exchange._roles.RIGHTS`, given to users and tokens like the built-in ones
(``exchange users add NAME --role NAME``).

Checked when the config is loaded, like every other section, each refusal one line naming the key:
an unknown right (with the closest known one), a name that is a built-in role's (their rights are
fixed), a name the store cannot hold, an empty or missing list.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from exchange._config_keys import closest, describe_value, named_tables, toml_key
from exchange._roles import RIGHTS, ROLE_NAME_MAX_CHARS, ROLES
from exchange.errors import ConfigError

ROLE_KEYS = ("rights",)
_NAME = re.compile(rf"[a-z][a-z0-9_-]{{0,{ROLE_NAME_MAX_CHARS - 1}}}")


def roles(raw: Mapping[str, Any], source: str) -> dict[str, frozenset[str]]:
    """Every ``[roles.NAME]`` table as name -> rights."""
    found: dict[str, frozenset[str]] = {}
    for name, table in named_tables(raw, "roles", source, ROLE_KEYS).items():
        where = f"{source}: roles.{toml_key(name)}"
        if name in ROLES:
            raise ConfigError(f"{where}: {name!r} is a built-in role, whose rights are fixed; give your role "
                              f"another name (built-in roles: {', '.join(ROLES)})")
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: a role name is 1 to {ROLE_NAME_MAX_CHARS} lowercase letters, digits, "
                              "'_' and '-', starting with a letter")
        found[name] = _rights(table.get("rights"), f"{where}.rights")
    return found


def _rights(value: Any, where: str) -> frozenset[str]:
    if value is None:
        raise ConfigError(f"{where} is missing: list the role's rights ({', '.join(RIGHTS)})")
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be a list of rights, got {describe_value(value)}")
    if not value:
        raise ConfigError(f"{where} is empty: a role needs at least one right ({', '.join(RIGHTS)})")
    for right in value:
        if not isinstance(right, str):
            raise ConfigError(f"{where}: each right is a string, got {describe_value(right)}")
        if right not in RIGHTS:
            match = closest(right, RIGHTS)
            hint = f" (did you mean {match!r}?)" if match else ""
            raise ConfigError(f"{where}: unknown right {right!r}{hint}; rights: {', '.join(RIGHTS)}")
    return frozenset(value)
