"""Rights and roles: the built-in roles hold exactly what their rank allowed before rights existed
(a table written out by hand, so a right moved by mistake fails here), ``[roles.NAME]`` is checked
when the config loads, and a prompt's role is a floor for built-in roles only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exchange._config import config_from_dict
from exchange._roles import BUILT_IN, RIGHTS, ROLES, Roles
from exchange.errors import AccessError, ConfigError

# What each built-in role could do before issue 44, route by route (docs/http-api.md's table then):
# viewer reads; operator sends commands, starts from a template, answers and verifies prompts of
# its rank; engineer starts any workflow, cancels, retries and forks, saves and activates
# templates (and now signs); admin does everything. x: holds it.
TABLE = """
right           viewer operator engineer admin
read            x      x        x        x
start           .      x        x        x
start_free      .      .        x        x
command         .      x        x        x
answer          .      x        x        x
verify          .      x        x        x
cancel          .      .        x        x
rerun           .      .        x        x
edit_templates  .      .        x        x
sign            .      .        x        x
release         .      .        .        x
admin           .      .        .        x
"""


def test_the_built_in_roles_keep_the_rights_their_rank_gave_them() -> None:
    rows = [line.split() for line in TABLE.strip().splitlines()]
    assert tuple(rows[0][1:]) == ROLES
    assert [row[0] for row in rows[1:]] == list(RIGHTS)  # every right, in the documented order
    for row in rows[1:]:
        for role, mark in zip(ROLES, row[1:], strict=True):
            assert (row[0] in BUILT_IN[role]) == (mark == "x"), (row[0], role)
    for lower, higher in zip(ROLES, ROLES[1:], strict=False):
        assert BUILT_IN[lower] < BUILT_IN[higher]  # each has the rights of the ones before


def test_a_prompts_role_is_a_floor_for_built_in_roles_and_custom_roles_go_by_their_rights() -> None:
    roles = Roles({"supervisor": frozenset({"read", "verify"}), "head": frozenset({"verify", "admin"})})
    assert roles.may("operator", "verify", "operator") and not roles.may("operator", "verify", "engineer")
    assert roles.may("engineer", "verify", "engineer") and not roles.may("engineer", "verify", "admin")
    assert roles.may("supervisor", "verify", "engineer") and not roles.may("supervisor", "verify", "admin")
    assert roles.may("head", "verify", "admin")
    assert not roles.may("supervisor", "answer", "operator") and not roles.may("viewer", "answer")
    assert not roles.may("supervisor", "start") and not roles.may("supervisor", "cancel")
    assert roles.may(None, "answer", "admin")  # the trusted local caller (the CLI without --user)
    assert roles.rights_of("gone") == frozenset() and not roles.may("gone", "read")
    assert roles.checked(" Supervisor ") == "supervisor"
    with pytest.raises(AccessError, match=r"unknown role 'qa'; roles: viewer, operator, engineer, admin, head, "
                                          r"supervisor \(a role of your own"):
        roles.checked("qa")
    assert roles.refusal("supervisor", "cancel", "token:s", "cancelling a run") == (
        "token:s has role supervisor; cancelling a run needs the right 'cancel' (roles with it: engineer, admin)")


def test_custom_roles_load_from_the_config() -> None:
    config = config_from_dict({"roles": {"qa": {"rights": ["read", "sign", "release"]},
                                         "supervisor": {"rights": ["read", "verify", "verify"]}}}, env={})
    assert config.roles == {"qa": frozenset({"read", "sign", "release"}), "supervisor": frozenset({"read", "verify"})}
    assert config_from_dict({}, env={}).roles == {}


@pytest.mark.parametrize(("roles", "message"), [
    ({"qa": {"rights": ["read", "relese"]}},
     "roles.qa.rights: unknown right 'relese' (did you mean 'release'?); rights: read, start,"),
    ({"qa": {"rights": []}}, "roles.qa.rights is empty: a role needs at least one right"),
    ({"qa": {}}, "roles.qa.rights is missing: list the role's rights"),
    ({"qa": {"rights": "read"}}, "roles.qa.rights must be a list of rights, got a string 'read'"),
    ({"qa": {"rights": [1]}}, "roles.qa.rights: each right is a string, got an integer 1"),
    ({"qa": {"rigths": ["read"]}}, "roles.qa: unknown key 'rigths' (did you mean 'rights'?)"),
    ({"engineer": {"rights": ["read"]}}, "roles.engineer: 'engineer' is a built-in role, whose rights are fixed"),
    ({"QA": {"rights": ["read"]}}, "roles.QA: a role name is 1 to 16 lowercase letters"),
    ({"quality-assurance-lead": {"rights": ["read"]}}, "roles.quality-assurance-lead: a role name is 1 to 16"),
    ({"qa": "read"}, "roles.qa must be a table ([roles.qa])"),
])
def test_a_bad_role_is_one_line_naming_the_key(roles: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        config_from_dict({"roles": roles}, source="plant.toml", env={})
    text = str(refused.value)
    assert text.startswith("plant.toml: " + message) and "\n" not in text, text


def test_the_configuration_page_lists_every_right_and_its_built_in_roles() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \*\*([a-z_]+)\*\* \| [^|]+ \| ([a-z, ]+) \|$", page, flags=re.MULTILINE)
    assert [right for right, _ in rows] == list(RIGHTS)
    for right, holders in rows:
        assert holders.split(", ") == Roles().holders(right), right
