"""A hidden object answers exactly as an unknown one, beyond test_existence_oracles.py.

mallory (authenticated, no grants) asks about an object that exists but is hidden from her
and about one that does not exist. The answers must be the same (status, error type,
message) once the ids and names in them are replaced by a placeholder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import uuid4

import pytest

from tests.integration.conftest import Authed
from tests.integration.test_existence_oracles import SCHEMA, _scene, give_a_sandbox
from tests.support.callers import Caller

pytestmark = pytest.mark.attack
MGMT = "/management/v1"


def _shape(response: Any, *secrets: str) -> tuple[int, str]:
    text = response.text
    for secret in secrets:
        text = text.replace(secret, "X")
    return response.status_code, text


def _oracles(
    mallory: Caller,
    probes: list[tuple[str, str, str, Any]],
    secrets: tuple[str, ...],
) -> list[str]:
    found = []
    for method, hidden, unknown, body in probes:
        a = _shape(mallory(method, hidden, body), *secrets)
        b = _shape(mallory(method, unknown, body), *secrets)
        if a != b:
            found.append(f"{method} {hidden}\n   hidden : {a}\n   unknown: {b}")
    return found


def test_attack_catalog_routes_answer_hidden_and_unknown_namespace_names_alike(
    authed: Authed,
) -> None:
    """By name, no id needed: a hidden `finance.payroll` and an unknown `finance.nothing`
    both answer "Namespace does not exist: <the dotted name>" (lists too), never the
    unknown one's uuid5, or any authenticated user would tell them apart."""
    alice, mallory, wid, _nid, _tid = _scene(authed)
    give_a_sandbox(alice, mallory, wid)
    mallory.ok(
        "POST", f"/catalog/v1/{wid}/namespaces/sandbox/tables", {"name": "mine", "schema": SCHEMA}
    )
    secrets = ("finance.payroll", "finance.nothing")  # not the uuid: the unknown answer names it
    c = f"/catalog/v1/{wid}"
    hidden, unknown = f"{c}/namespaces/finance%1Fpayroll", f"{c}/namespaces/finance%1Fnothing"
    probes: list[tuple[str, str, str, Any]] = [
        ("GET", hidden, unknown, None),
        ("GET", f"{hidden}/tables", f"{unknown}/tables", None),
        ("GET", f"{hidden}/views", f"{unknown}/views", None),
        (
            "GET",
            f"{c}/namespaces?parent=finance%1Fpayroll",
            f"{c}/namespaces?parent=finance%1Fnothing",
            None,
        ),
        ("POST", f"{hidden}/tables", f"{unknown}/tables", {"name": "x", "schema": SCHEMA}),
        ("POST", f"{hidden}/properties", f"{unknown}/properties", {"removals": [], "updates": {}}),
        ("DELETE", hidden, unknown, None),
    ]
    found = _oracles(mallory, probes, secrets)
    attempts: tuple[tuple[str, Callable[[list[str]], Any]], ...] = (
        (
            "rename into the namespace",
            lambda ns: mallory(
                "POST",
                f"{c}/tables/rename",
                {
                    "source": {"namespace": ["sandbox"], "name": "mine"},
                    "destination": {"namespace": ns, "name": "moved"},
                },
            ),
        ),
        (
            "create a child namespace",
            lambda ns: mallory("POST", f"{c}/namespaces", {"namespace": [*ns, "child"]}),
        ),
    )
    for label, make in attempts:
        a = _shape(make(["finance", "payroll"]), *secrets)
        b = _shape(make(["finance", "nothing"]), *secrets)
        if a != b:
            found.append(f"{label}\n   hidden : {a}\n   unknown: {b}")
    assert not found, "existence oracles:\n" + "\n".join(found)


def test_attack_hidden_and_unknown_table_ids_answer_alike_on_management_routes(
    authed: Authed,
) -> None:
    """A hidden table id (the guard's `require`) and an unknown one (`missing`) both answer
    NoSuchTableException with the same message."""
    _alice, mallory, wid, _nid, tid = _scene(authed)
    other = str(uuid4())
    probes: list[tuple[str, str, str, Any]] = [
        (method, path.format(tid), path.format(other), body)
        for method, path, body in [
            ("GET", f"{MGMT}/permissions/warehouse/{wid}/table/{{}}/assignments", None),
            ("GET", f"{MGMT}/warehouse/{wid}/table/{{}}/protection", None),
            ("POST", f"{MGMT}/warehouse/{wid}/table/{{}}/protection", {"protected": True}),
            ("GET", f"{MGMT}/warehouse/{wid}/table/{{}}/history", None),
        ]
    ]
    found = _oracles(mallory, probes, (tid, other))
    assert not found, "existence oracles:\n" + "\n".join(found)


def test_attack_assignment_updates_answer_hidden_and_unknown_ids_alike(
    authed: Authed,
) -> None:
    """Namespace ids are uuid5(warehouse, path). `POST .../assignments` decides per item,
    so it first hides the object: with no items or with one it answers 404 for a namespace
    the caller may not see, as for an unknown id (not 204, nor 403 "Not allowed to grant")."""
    _alice, mallory, _wid, nid, tid = _scene(authed)
    other = str(uuid4())
    path = f"{MGMT}/permissions/namespace/{{}}/assignments"
    table_path = f"{MGMT}/permissions/warehouse/{_wid}/table/{{}}/assignments"
    probes: list[tuple[str, str, str, Any]] = [
        ("POST", path.format(nid), path.format(other), {"writes": []}),
        (
            "POST",
            path.format(nid),
            path.format(other),
            {"writes": [{"type": "select", "user": "oidc~mallory"}]},
        ),
        ("POST", table_path.format(tid), table_path.format(other), {"writes": []}),
    ]
    found = _oracles(mallory, probes, (nid, tid, other))
    assert not found, "existence oracles:\n" + "\n".join(found)


def test_attack_hidden_and_unknown_role_and_project_ids_answer_alike(authed: Authed) -> None:
    """Roles and projects are among the guards' hidden kinds: to a caller who may not see
    an existing one it answers 404 as an unknown one does, not 403 (nor 200
    `allowed-actions: []`, nor 204 for an empty assignment update)."""
    alice, mallory, _wid, _nid, _tid = _scene(authed)
    role = alice.ok("POST", f"{MGMT}/role", {"name": "payroll-admins"})["id"]
    project = alice.ok("POST", f"{MGMT}/project", {"project-name": "secret-merger"})
    pid = project.get("project-id") or project.get("id")
    other = str(uuid4())
    probes: list[tuple[str, str, str, Any]] = []
    asked: list[tuple[str, str, Any]] = [
        ("GET", f"{MGMT}/role/{{}}", None),
        ("DELETE", f"{MGMT}/role/{{}}", None),
        ("GET", f"{MGMT}/permissions/role/{{}}/access", None),
        ("POST", f"{MGMT}/permissions/role/{{}}/assignments", {"writes": []}),
        ("GET", f"{MGMT}/project/{{}}", None),
        ("GET", f"{MGMT}/permissions/project/{{}}/access", None),
    ]
    for method, template, body in asked:
        real = role if "role" in template else pid
        probes.append((method, template.format(real), template.format(other), body))
    found = _oracles(mallory, probes, (role, pid, other))
    assert not found, "existence oracles:\n" + "\n".join(found)


def test_roles_and_projects_stay_visible_to_their_members_and_grant_holders(
    authed: Authed,
) -> None:
    """The hidden rule hides only from callers with nothing there: a role's member sees the
    role (403 where they may not act, not 404), a grant holder sees their project, and
    everyone sees the default project that `/info` names."""
    alice, mallory, _wid, _nid, _tid = _scene(authed)
    me = mallory.ok("GET", f"{MGMT}/whoami")["id"]
    role = alice.ok("POST", f"{MGMT}/role", {"name": "payroll-readers"})["id"]
    alice.ok(
        "POST",
        f"{MGMT}/permissions/role/{role}/assignments",
        {"writes": [{"type": "assignee", "user": me}]},
    )
    assert mallory("GET", f"{MGMT}/role/{role}").status_code == 403
    assert mallory("DELETE", f"{MGMT}/role/{role}").status_code == 403
    access = mallory.ok("GET", f"{MGMT}/permissions/role/{role}/access")
    assert "assume" in access["allowed-actions"]

    project = alice.ok("POST", f"{MGMT}/project", {"project-name": "merger"})
    pid = project.get("project-id") or project.get("id")
    assert mallory("GET", f"{MGMT}/project/{pid}").status_code == 404
    alice.ok(
        "POST",
        f"{MGMT}/permissions/project/{pid}/assignments",
        {"writes": [{"type": "role_creator", "user": me}]},
    )
    assert mallory("GET", f"{MGMT}/project/{pid}").status_code == 403
    made = mallory.ok("POST", f"{MGMT}/role", {"name": "mine", "project-id": pid})
    assert made["project-id"] == pid

    # The default project: a stranger is refused, not told it does not exist.
    assert mallory("GET", f"{MGMT}/project").status_code == 403
    assert mallory("POST", f"{MGMT}/role", {"name": "theirs"}).status_code == 403
    assert mallory.ok("GET", f"{MGMT}/permissions/project/access")["allowed-actions"] == []
