"""What a table write costs the sessions index (DynamoDB's rules for a global secondary index)."""

from __future__ import annotations

from typing import Any

from benchmarks.meters import index_write_units


def state_item(
    *, owner: str | None = "p", last_active: str = "100.000", turns: str = "1", wid: str = "a"
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "pk": {"S": "SESSION#s"},
        "sk": {"S": "STATE"},
        "last_active": {"N": last_active},
        "turns": {"N": turns},
        "wid": {"S": wid},  # not projected
        "z": {"B": "eJwLAAAAAAE="},
    }
    if owner is not None:
        item["owner"] = {"S": owner}
    return item


def test_a_write_that_changes_nothing_the_index_holds_costs_it_nothing() -> None:
    assert index_write_units(state_item(wid="a"), state_item(wid="b")) == 0.0


def test_a_moved_sort_key_is_a_delete_and_a_put() -> None:
    assert index_write_units(state_item(), state_item(last_active="200.000", turns="2")) == 2.0


def test_a_changed_projected_attribute_is_one_write() -> None:
    assert index_write_units(state_item(), state_item(turns="2")) == 1.0


def test_entering_or_leaving_the_sparse_index_is_one_write() -> None:
    assert index_write_units(state_item(owner=None), state_item()) == 1.0
    assert index_write_units(state_item(), None) == 1.0
    assert index_write_units(None, state_item(owner=None)) == 0.0
