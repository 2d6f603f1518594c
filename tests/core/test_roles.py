"""The roles table (``shared.core.roles``): every action a role allows is granted by some role,
no rule names a role but through the table, and the routing table of docs/protocol.md ("Which
device gets what") says what the code's ``ROUTING`` says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from shared.core.roles import PERMISSIONS, REFUSALS, ROUTING, Action, Route, may, roles_for
from shared.wire.protocol import DEVICE_ROLES

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL_DOC = ROOT / "docs" / "protocol.md"
ROLE_NAMES = {"VOICE", "DISPLAY", "TOOLS", *DEVICE_ROLES}
# Modules that read device roles: through shared.core.roles only.
ROLE_READERS = sorted((ROOT / "shared" / "core").glob("*.py"))


# ---- the permissions -------------------------------------------------------------------------------


def test_every_role_of_the_protocol_has_its_permissions() -> None:
    assert set(PERMISSIONS) == set(DEVICE_ROLES)


def test_every_action_is_granted_by_a_role() -> None:
    assert {action for action in Action if not roles_for(action)} == set()


def test_an_action_without_a_permission_is_caught() -> None:
    granted = set().union(*PERMISSIONS.values())
    assert set(Action) <= granted
    assert not may(DEVICE_ROLES, "an action nobody was given")  # type: ignore[arg-type]


def test_a_refusal_answers_an_action_a_role_grants() -> None:
    assert set(REFUSALS) <= set(Action)


@pytest.mark.parametrize(
    ("roles", "allowed"),
    [
        (("voice",), {Action.SPEAK, Action.SEE_PROGRESS, Action.HEAR_VOCABULARY}),
        (("display",), {Action.CONFIRM, Action.SHOW_PARTIALS, Action.SEE_PROGRESS, Action.SEE_PROJECT}),
        (("tools",), {Action.RUN_TOOLS}),
        (("voice", "display", "tools"), set(Action)),
        ((), set()),
    ],
)
def test_what_a_device_may_is_what_its_roles_allow(roles: tuple[str, ...], allowed: set[Action]) -> None:
    assert {action for action in Action if may(roles, action)} == allowed


def role_checks(path: Path, root: Path = ROOT) -> list[str]:
    """``X in ….roles`` and ``"voice" not in …``: a rule naming a role instead of asking the table."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            continue
        left = node.left
        named = (isinstance(left, ast.Name) and left.id in ROLE_NAMES) or (
            isinstance(left, ast.Constant) and left.value in ROLE_NAMES
        )
        if named:
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_rule_of_the_core_names_a_role_but_the_table() -> None:
    assert [check for path in ROLE_READERS if path.name != "roles.py" for check in role_checks(path)] == []


def test_a_rule_naming_a_role_is_caught(tmp_path: Path) -> None:
    (tmp_path / "rule.py").write_text("def f(entry):\n    return VOICE in entry.roles\n", encoding="utf-8")
    assert role_checks(tmp_path / "rule.py", tmp_path) == ["rule.py:2"]


# ---- the routing table of docs/protocol.md ----------------------------------------------------------


def documented_routing() -> list[tuple[str, str]]:
    """The rows of "Which device gets what": (event, goes to)."""
    text = PROTOCOL_DOC.read_text(encoding="utf-8")
    table = text.split("### Which device gets what", 1)[1].split("\n\n", 2)[1]
    rows = []
    for line in table.splitlines()[2:]:
        event, goes_to = (cell.strip() for cell in line.strip().strip("|").split("|"))
        rows.append((event, goes_to))
    return rows


def roles_named(text: str) -> set[str]:
    return {word for word in re.findall(r"`([^`]+)`", text) if word in DEVICE_ROLES}


def test_the_documented_routing_has_the_codes_rows_in_its_order() -> None:
    assert [event for event, _goes_to in documented_routing()] == [route.event for route in ROUTING]


@pytest.mark.parametrize("route", ROUTING, ids=lambda route: route.event)
def test_each_documented_route_names_the_codes_audience_and_roles(route: Route) -> None:
    goes_to = dict(documented_routing())[route.event]
    assert route.audience.value in goes_to.replace("`", "")
    assert roles_named(goes_to) == route.roles
