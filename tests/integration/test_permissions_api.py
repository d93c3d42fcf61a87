"""Grants and roles with authentication on (a real local OpenID provider): the first admin,
ownership of what one creates, assignments, my access, checks, roles (nested), and every
change as an event with its actor that the audit chain covers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.conftest import Authed
from tests.support.callers import Caller, People, bootstrapped, grant
from tests.support.callers import assignments as _assignments

MGMT = "/management/v1"


@pytest.fixture
def people(authed: Authed) -> People:
    return bootstrapped(authed)


def _setup(alice: Caller) -> tuple[str, str, str]:
    """A namespace and a table created by alice: (warehouse id, namespace id, table id)."""
    config = alice.ok("GET", "/catalog/v1/config", params={"warehouse": "default"})
    prefix = config["overrides"]["prefix"]
    alice.ok("POST", f"/catalog/v1/{prefix}/namespaces", {"namespace": ["sales"]})
    schema = {
        "type": "struct",
        "fields": [{"id": 1, "name": "id", "type": "long", "required": True}],
    }
    table = alice.ok(
        "POST",
        f"/catalog/v1/{prefix}/namespaces/sales/tables",
        {"name": "orders", "schema": schema},
    )
    found = alice.ok(
        "GET", f"{MGMT}/warehouse/{prefix}/namespace-id", params={"namespace": "sales"}
    )
    return prefix, found["namespace-id"], table["metadata"]["table-uuid"]


def test_bootstrap_makes_the_first_caller_admin_once(authed: Authed, people: People) -> None:
    alice, bob, _ = people
    again = bob("POST", f"{MGMT}/bootstrap", {"accept-terms-of-use": True})
    assert (
        again.status_code == 400 and again.json()["error"]["type"] == "CatalogAlreadyBootstrapped"
    )
    assert _assignments(alice, "server") == {("admin", alice.id)}
    assert ("project_admin", alice.id) in _assignments(alice, "project")
    access = alice.ok("GET", f"{MGMT}/permissions/server/access")["allowed-actions"]
    assert {"create_project", "list_users", "grant_admin"} <= set(access)
    assert bob.ok("GET", f"{MGMT}/permissions/server/access")["allowed-actions"] == []
    assert bob("GET", f"{MGMT}/permissions/server/assignments").status_code == 403


def test_creators_own_and_grants_reach_down(authed: Authed, people: People) -> None:
    alice, bob, carol = people
    wid, nid, tid = _setup(alice)
    assert _assignments(alice, f"namespace/{nid}") == {("ownership", alice.id)}
    assert _assignments(alice, f"warehouse/{wid}/table/{tid}") == {("ownership", alice.id)}

    table_access = f"{MGMT}/permissions/warehouse/{wid}/table/{tid}/access"
    # Bob may not see the table: asking about it answers as for an unknown id.
    assert bob("GET", table_access).status_code == 404
    # Bob may not hand out what he does not manage; what he may not see is unknown to him.
    denied = bob(
        "POST", f"{MGMT}/permissions/namespace/{nid}/assignments",
        {"writes": [{"type": "select", "user": bob.id}]},
    )  # fmt: skip
    assert denied.status_code == 404, denied.text
    assert denied.json()["error"]["type"] == "NoSuchNamespaceException"

    grant(
        alice,
        f"namespace/{nid}",
        {"type": "select", "user": bob.id},
        {"type": "pass_grants", "user": bob.id},
    )
    actions = set(bob.ok("GET", table_access)["allowed-actions"])
    assert {"read_data", "get_metadata", "grant_select"} <= actions
    assert not {"write_data", "drop", "grant_modify", "grant_pass_grants"} & actions
    check = {"operation": {"table": {"action": "write_data", "table-id": tid}}}
    assert bob.ok("POST", f"{MGMT}/permissions/check", check) == {"allowed": False}
    check["operation"]["table"]["action"] = "read_data"
    assert bob.ok("POST", f"{MGMT}/permissions/check", check) == {"allowed": True}
    # pass_grants: select may be passed on, modify may not.
    grant(bob, f"warehouse/{wid}/table/{tid}", {"type": "select", "user": carol.id})
    passed_too_much = bob(
        "POST", f"{MGMT}/permissions/warehouse/{wid}/table/{tid}/assignments",
        {"writes": [{"type": "modify", "user": carol.id}]},
    )  # fmt: skip
    assert passed_too_much.status_code == 403
    # Alice may ask what carol may do; carol may not ask about alice.
    about_carol = alice.ok("GET", table_access, params={"principalUser": carol.id})
    assert "read_data" in about_carol["allowed-actions"]
    assert carol("GET", table_access, params={"principalUser": alice.id}).status_code == 403
    # Revoked: gone.
    alice.ok(
        "POST", f"{MGMT}/permissions/namespace/{nid}/assignments",
        {"deletes": [{"type": "select", "user": bob.id}]},
    )  # fmt: skip
    assert bob("GET", table_access).status_code == 404  # he no longer sees the table


def test_roles_nest_and_carry_grants(authed: Authed, people: People) -> None:
    alice, bob, carol = people
    wid, _, tid = _setup(alice)
    analysts = alice.ok("POST", f"{MGMT}/role", {"name": "analysts"})
    leads = alice.ok("POST", f"{MGMT}/role", {"name": "leads", "description": "Team leads"})
    assert alice("POST", f"{MGMT}/role", {"name": "analysts"}).status_code == 409
    assert bob("POST", f"{MGMT}/role", {"name": "mine"}).status_code == 403
    # carol ∈ leads ∈ analysts; analysts may modify the warehouse.
    grant(alice, f"role/{analysts['id']}", {"type": "assignee", "role": leads["id"]})
    grant(alice, f"role/{leads['id']}", {"type": "assignee", "user": carol.id})
    cycle = alice(
        "POST", f"{MGMT}/permissions/role/{leads['id']}/assignments",
        {"writes": [{"type": "assignee", "role": analysts["id"]}]},
    )  # fmt: skip
    assert cycle.status_code == 400, cycle.text
    grant(alice, f"warehouse/{wid}", {"type": "modify", "role": analysts["id"]})
    table_access = f"{MGMT}/permissions/warehouse/{wid}/table/{tid}/access"
    assert "write_data" in carol.ok("GET", table_access)["allowed-actions"]
    # Bob may not see the table: asking about it answers as for an unknown id.
    assert bob("GET", table_access).status_code == 404
    listed = alice.ok("GET", f"{MGMT}/role")["roles"]
    assert [r["name"] for r in listed] == ["analysts", "leads"]
    renamed = alice.ok("POST", f"{MGMT}/role/{leads['id']}", {"name": "team-leads"})
    assert renamed["name"] == "team-leads"
    # Deleting the middle role cuts carol off.
    assert alice("DELETE", f"{MGMT}/role/{leads['id']}").status_code == 204
    assert carol("GET", table_access).status_code == 404
    assert alice("GET", f"{MGMT}/role/{leads['id']}").status_code == 404


def test_bad_assignments_are_400(authed: Authed, people: People) -> None:
    alice, _, _ = people
    wid, nid, tid = _setup(alice)
    path = f"{MGMT}/permissions/warehouse/{wid}/table/{tid}/assignments"
    for body, expected in [
        ({"writes": [{"type": "create", "user": "oidc~x"}]}, "table has no relation 'create'"),
        ({"writes": [{"type": "select"}]}, "exactly one of user and role"),
        ({"writes": [{"type": "select", "user": "oidc~x", "role": nid}]}, "exactly one"),
        ({"writes": [{"type": "select", "user": "oidc~x", "extra": 1}]}, "Extra inputs"),
    ]:
        response = alice("POST", path, body)
        assert response.status_code in (400, 403), response.text
        if response.status_code == 400:
            assert expected in response.json()["error"]["message"]
    missing = alice("GET", f"{MGMT}/permissions/namespace/{tid}/assignments")
    assert missing.status_code == 404


def test_grant_changes_are_events_with_their_actor(authed: Authed, people: People) -> None:
    alice, bob, _ = people
    _, nid, _ = _setup(alice)
    change = {"writes": [{"type": "describe", "user": bob.id}]}
    alice.ok("POST", f"{MGMT}/permissions/namespace/{nid}/assignments", change)
    alice.ok("POST", f"{MGMT}/permissions/namespace/{nid}/assignments", change)  # no-op
    alice.ok(
        "POST", f"{MGMT}/permissions/namespace/{nid}/assignments",
        {"deletes": [{"type": "describe", "user": bob.id}]},
    )  # fmt: skip
    topics = [e.topic for e in authed.events() if e.topic.startswith("icelog.grants.")]
    # Bootstrap: server admin + default project's project_admin; then one grant, one revoke.
    assert topics.count("icelog.grants.granted.v1") == 3
    assert topics.count("icelog.grants.revoked.v1") == 1
    grant_events = [e for e in authed.events() if e.topic.startswith("icelog.grants.g")]
    assert all(b'"actor":"oidc~alice"' in e.state.replace(b" ", b"") for e in grant_events)
    events = authed.client.get(
        f"{MGMT}/events", params={"type": "io.icelog.grants."},
        headers={"Authorization": f"Bearer {alice.token}"},
    ).json()["events"]  # fmt: skip
    assert [e["actor"] for e in events] == ["oidc~alice"] * len(events)
    assert len(events) == len(topics)


def test_without_a_provider_everything_is_allowed(api: Any) -> None:
    access = api.client.get(f"{MGMT}/permissions/server/access").json()["allowed-actions"]
    assert {"create_project", "list_users"} <= set(access)


def test_who_could_do_what_at_a_past_moment(authed: Authed, people: People) -> None:
    """`?as-of=` answers from the log: a revoked grant still shows in the past."""
    alice, bob, _ = people
    wid, nid, tid = _setup(alice)
    grants = f"{MGMT}/permissions/namespace/{nid}/assignments"
    alice.ok("POST", grants, {"writes": [{"type": "select", "user": bob.id}]})
    alice.ok("POST", grants, {"deletes": [{"type": "select", "user": bob.id}]})
    events = alice.ok("GET", f"{MGMT}/events", params={"type": "io.icelog.grants."})["events"]
    granted = next(e for e in events if e["type"].endswith("granted.v1")
                   and e["data"]["principal-id"] == bob.id)  # fmt: skip
    revoked = next(e for e in events if e["type"].endswith("revoked.v1"))
    table_access = f"{MGMT}/permissions/warehouse/{wid}/table/{tid}/access"
    about_bob = {"principalUser": bob.id}

    then = alice.ok("GET", table_access, params={**about_bob, "as-of": granted["position"]})
    assert "read_data" in then["allowed-actions"]
    assert then["as-of-position"] == granted["position"]
    before = alice.ok("GET", table_access, params={**about_bob, "as-of": granted["position"] - 1})
    assert "read_data" not in before["allowed-actions"]
    now = alice.ok("GET", table_access, params=about_bob)
    assert "read_data" not in now["allowed-actions"] and "as-of-position" not in now
    # By time too, and the assignments themselves.
    at_time = alice.ok("GET", table_access, params={**about_bob, "as-of": granted["time"]})
    assert "read_data" in at_time["allowed-actions"]
    past = alice.ok("GET", grants, params={"as-of": str(revoked["position"] - 1)})
    assert {"type": "select", "user": bob.id} in past["assignments"]
    assert {"type": "ownership", "user": alice.id} in past["assignments"]
    current = alice.ok("GET", grants)["assignments"]
    assert {"type": "select", "user": bob.id} not in current
    # Bob's own view of the past: his own access, as of then.
    mine = bob.ok("GET", table_access, params={"as-of": granted["position"]})
    assert "read_data" in mine["allowed-actions"]
    for bad in ("yesterday", "2026-03-01T00:00:00", "²", "١٢"):  # non-ASCII digits too
        response = alice("GET", table_access, params={"as-of": bad})
        assert response.status_code == 400, response.text
