"""Lakekeeper's permission model as icelog evaluates it (domain/permissions.py)."""

from __future__ import annotations

from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from icelog.domain.permissions import (
    ACTIONS,
    KINDS,
    NAVIGATION,
    RELATIONS,
    Kind,
    ObjectRef,
    PrincipalRef,
    allowed_actions,
    allows,
    capabilities,
    check_relation,
    data_rights_from,
    role_closure,
)

SERVER = ObjectRef("server", "s")
PROJECT = ObjectRef("project", "p")
WAREHOUSE = ObjectRef("warehouse", "w")
NS = ObjectRef("namespace", "n1")
CHILD_NS = ObjectRef("namespace", "n2")
TABLE = ObjectRef("table", "t")
# A table in a nested namespace, and its ancestors up to the server.
CHAIN = [TABLE, CHILD_NS, NS, WAREHOUSE, PROJECT, SERVER]


def caps_on(target: ObjectRef, held: dict[ObjectRef, set[str]]) -> frozenset[str]:
    chain = CHAIN[CHAIN.index(target) :]
    return capabilities(chain, held)


def may(target: ObjectRef, action: str, held: dict[ObjectRef, set[str]]) -> bool:
    own = frozenset(held.get(target, set()))
    return allows(target.kind, action, caps_on(target, held), own)


def test_nothing_held_allows_nothing() -> None:
    for target in CHAIN:
        assert allowed_actions(target.kind, caps_on(target, {}), frozenset()) == []


def test_grants_on_a_container_reach_everything_below() -> None:
    held = {NS: {"select"}}
    assert may(TABLE, "read_data", held) and may(TABLE, "get_metadata", held)
    assert may(CHILD_NS, "get_metadata", held)
    assert not may(TABLE, "write_data", held) and not may(TABLE, "drop", held)
    assert not may(WAREHOUSE, "get_metadata", held), "never upwards"


def test_the_way_in_is_navigation_and_nothing_more() -> None:
    """`navigate` (a grant inside, added by the authorizer) gives a container's config,
    metadata and filtered lists; describe gives it too; neither grant nor navigate gives
    what reads the container whole, nor any create."""
    way = NAVIGATION
    for kind in ("project", "warehouse", "namespace"):
        assert allows(kind, "get_metadata", way, frozenset())
        assert allows(kind, "include_in_list", way, frozenset())
    assert allows("warehouse", "get_config", way, frozenset())
    for kind, action in (("warehouse", "list_namespaces"), ("namespace", "list_namespaces"),
                         ("namespace", "list_tables"), ("namespace", "list_views"),
                         ("project", "list_warehouses")):  # fmt: skip
        assert allows(cast(Kind, kind), action, way, frozenset())
    refused = {
        "project": ("create_warehouse", "list_roles", "create_role"),
        "warehouse": ("list_everything", "list_deleted_tabulars", "get_all_tasks",
                      "create_namespace", "modify_storage"),
        "namespace": ("list_everything", "list_functions", "create_table", "create_namespace",
                      "update_properties", "delete"),
        "table": ("get_metadata", "read_data"),
    }  # fmt: skip
    for kind, actions in refused.items():
        for action in actions:
            assert not allows(cast(Kind, kind), action, way, frozenset()), (kind, action)
    assert "navigate" in caps_on(CHILD_NS, {NS: {"describe"}}), "describe implies it"
    assert "navigate" not in caps_on(CHILD_NS, {NS: {"pass_grants"}})
    assert "navigate" not in caps_on(WAREHOUSE, {NS: {"select"}}), "never upwards by itself"


def test_the_lattice() -> None:
    assert may(TABLE, "read_data", {TABLE: {"modify"}})
    assert not may(TABLE, "read_data", {TABLE: {"describe"}})
    assert may(TABLE, "get_metadata", {TABLE: {"select"}})
    assert may(NS, "create_table", {NS: {"create"}})
    assert not may(NS, "create_table", {NS: {"modify"}})
    owner = {NS: {"ownership"}}
    assert all(may(TABLE, a, owner) for a in ACTIONS["table"])
    assert may(TABLE, "grant_select", owner) and may(TABLE, "grant_ownership", owner)


def test_project_roles() -> None:
    data = {PROJECT: {"data_admin"}}
    assert may(TABLE, "write_data", data) and may(WAREHOUSE, "create_namespace", data)
    assert not may(TABLE, "grant_select", data), "data_admin hands out no grants"
    assert may(PROJECT, "grant_data_admin", data), "but delegates its own role"
    assert not may(PROJECT, "grant_security_admin", data)
    security = {PROJECT: {"security_admin"}}
    assert may(TABLE, "get_metadata", security) and may(TABLE, "grant_select", security)
    assert not may(TABLE, "read_data", security), "security_admin sees no data"
    admin = {PROJECT: {"project_admin"}}
    assert may(TABLE, "read_data", admin) and may(TABLE, "grant_modify", admin)
    assert may(PROJECT, "grant_security_admin", admin) and may(PROJECT, "rename", admin)
    assert not may(WAREHOUSE, "rename", {PROJECT: {"role_creator"}})
    assert may(PROJECT, "create_role", {PROJECT: {"role_creator"}})


def test_server_roles() -> None:
    admin = {SERVER: {"admin"}}
    assert may(SERVER, "create_project", admin) and may(SERVER, "list_users", admin)
    assert may(PROJECT, "rename", admin) and may(PROJECT, "grant_project_admin", admin)
    assert not may(PROJECT, "create_warehouse", admin)
    assert not may(TABLE, "read_data", admin) and not may(TABLE, "get_metadata", admin)
    operator = {SERVER: {"operator"}}
    for target in CHAIN:
        assert set(ACTIONS[target.kind]) <= set(
            allowed_actions(target.kind, caps_on(target, operator), frozenset())
        ) | {"assume"}


def test_pass_grants_passes_only_what_one_holds() -> None:
    held = {TABLE: {"pass_grants", "select"}}
    assert may(TABLE, "grant_select", held) and may(TABLE, "grant_describe", held)
    assert not may(TABLE, "grant_modify", held)
    assert not may(TABLE, "grant_pass_grants", held)
    assert not may(TABLE, "grant_ownership", held)
    assert may(TABLE, "grant_pass_grants", {TABLE: {"manage_grants"}})


def test_relations_per_kind() -> None:
    check_relation("table", "select")
    with pytest.raises(ValueError, match="table has no relation 'create'"):
        check_relation("table", "create")
    with pytest.raises(ValueError, match="no relation"):
        check_relation("server", "select")
    assert RELATIONS["role"] == {"assignee", "ownership"}


def test_role_closure_follows_nesting_and_survives_cycles() -> None:
    alice = PrincipalRef("user", "oidc~alice")
    memberships = {
        alice: ["r1"],
        PrincipalRef("role", "r1"): ["r2"],
        PrincipalRef("role", "r2"): ["r1", "r3"],
    }
    assert role_closure("oidc~alice", memberships) == {
        alice,
        PrincipalRef("role", "r1"),
        PrincipalRef("role", "r2"),
        PrincipalRef("role", "r3"),
    }
    assert role_closure("oidc~bob", memberships) == {PrincipalRef("user", "oidc~bob")}


held_strategy = st.dictionaries(
    st.sampled_from(CHAIN),
    st.sets(st.sampled_from(sorted({r for k in KINDS for r in RELATIONS[k]})), max_size=4),
    max_size=6,
)


@given(held_strategy, held_strategy)
def test_more_grants_never_take_a_right_away(
    held: dict[ObjectRef, set[str]], more: dict[ObjectRef, set[str]]
) -> None:
    both = {obj: held.get(obj, set()) | more.get(obj, set()) for obj in {*held, *more}}
    for target in CHAIN:
        kind: Kind = target.kind
        before = set(allowed_actions(kind, caps_on(target, held), frozenset(held.get(target, ()))))
        after = set(allowed_actions(kind, caps_on(target, both), frozenset(both.get(target, ()))))
        assert before <= after


@given(held_strategy)
def test_data_rights_held_above_hold_below(held: dict[ObjectRef, set[str]]) -> None:
    """Whatever data right a namespace gives, its tables have (top-down inheritance)."""
    data = {"describe", "select", "modify", "create"}
    on_ns = caps_on(NS, held) & data
    assert on_ns <= caps_on(TABLE, held)


@pytest.mark.parametrize(
    ("relation", "read", "write"),
    [
        ("describe", False, False),
        ("create", False, False),
        ("pass_grants", False, False),
        ("manage_grants", False, False),
        ("select", True, False),
        ("modify", True, True),
        ("ownership", True, True),
        ("data_admin", True, True),
        ("security_admin", False, False),
        ("project_admin", True, True),
        ("admin", False, False),
        ("operator", True, True),
    ],
)
def test_data_rights_decide_what_storage_access_a_caller_gets(
    relation: str, read: bool, write: bool
) -> None:
    """Vended credentials and signing follow read_data / write_data: `describe` (and the
    grant and server-admin relations) give none, `select` read-only access."""
    where = {"data_admin": PROJECT, "security_admin": PROJECT, "project_admin": PROJECT}
    holder = {"admin": SERVER, "operator": SERVER}
    on = where.get(relation) or holder.get(relation) or NS
    caps = caps_on(TABLE, {on: {relation}})
    rights = data_rights_from(caps)
    assert (rights.read, rights.write) == (read, write)
    assert rights.any == (read or write)
