"""With authentication on, a caller learns nothing about what they have no right to: not by
id, by name, through the catalog prefix, in lists, in the events API or in as-of; and a
grant on one table opens exactly the way to it (bottom-up navigation)."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Authed

MGMT = "/management/v1"
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}


def _call(authed: Authed, token: str, method: str, path: str, **kwargs: Any) -> Any:
    return authed.call(method, path, token, **kwargs)


def _world(authed: Authed) -> tuple[str, str, dict[str, str]]:
    """Alice (admin) builds sales.orders, sales.refunds, sales.eu.x and hr.salaries."""
    alice = authed.idp.issue("alice")
    ok = {"accept-terms-of-use": True}
    assert _call(authed, alice, "POST", f"{MGMT}/bootstrap", json=ok).status_code == 204
    config = _call(authed, alice, "GET", "/catalog/v1/config", params={"warehouse": "default"})
    prefix = config.json()["overrides"]["prefix"]
    base = f"/catalog/v1/{prefix}"
    ids: dict[str, str] = {}
    for levels in (["sales"], ["sales", "eu"], ["hr"]):
        created = _call(authed, alice, "POST", f"{base}/namespaces", json={"namespace": levels})
        assert created.status_code == 200, created.text
    for namespace, table in (("sales", "orders"), ("sales", "refunds"), ("sales%1Feu", "x"),
                             ("hr", "salaries")):  # fmt: skip
        made = _call(
            authed, alice, "POST", f"{base}/namespaces/{namespace}/tables",
            json={"name": table, "schema": SCHEMA},
        )  # fmt: skip
        assert made.status_code == 200, made.text
        ids[table] = made.json()["metadata"]["table-uuid"]
    return alice, prefix, ids


def test_no_rights_means_nothing_exists(authed: Authed) -> None:
    _, prefix, ids = _world(authed)
    bob = authed.idp.issue("bob")
    base = f"/catalog/v1/{prefix}"
    not_found = [
        ("GET", "/catalog/v1/config?warehouse=default"),
        ("GET", f"/catalog/v1/config?warehouse={prefix}"),
        ("GET", f"{base}/namespaces"),
        ("GET", f"{base}/namespaces/sales"),
        ("GET", f"{base}/namespaces/sales/tables"),
        ("GET", f"{base}/namespaces/sales/tables/orders"),
        ("HEAD", f"{base}/namespaces/sales/tables/orders"),
        ("POST", f"{base}/namespaces/sales/tables/orders"),
        ("DELETE", f"{base}/namespaces/hr"),
        ("GET", f"{MGMT}/warehouse/{prefix}"),
        ("GET", f"{MGMT}/events?warehouse-id={prefix}"),
        ("GET", f"{MGMT}/warehouse/{prefix}/table/{ids['orders']}/history"),
        ("GET", f"{MGMT}/permissions/warehouse/{prefix}/table/{ids['orders']}/assignments"),
    ]
    for method, path in not_found:
        kwargs: dict[str, Any] = {}
        if method == "POST":
            kwargs["json"] = {"requirements": [], "updates": []}
        response = _call(authed, bob, method, path, **kwargs)
        assert response.status_code == 404, (method, path, response.status_code, response.text)
        if method != "HEAD":
            assert "orders" not in response.text or "orders" in path
    # Lists are empty, the whole log and as-of are the server admin's.
    assert _call(authed, bob, "GET", f"{MGMT}/warehouse").json()["warehouses"] == []
    assert _call(authed, bob, "GET", f"{MGMT}/project-list").json()["projects"] == []
    assert _call(authed, bob, "GET", f"{MGMT}/events").status_code == 403
    assert _call(authed, bob, "GET", f"{MGMT}/as-of?position=1").status_code == 403
    # Creating anything is refused too.
    made = _call(authed, bob, "POST", f"{base}/namespaces", json={"namespace": ["mine"]})
    assert made.status_code == 404, made.text


def test_a_grant_on_one_table_opens_exactly_the_way_to_it(authed: Authed) -> None:
    alice, prefix, ids = _world(authed)
    bob = authed.idp.issue("bob")
    grant = {"writes": [{"type": "select", "user": "oidc~bob"}]}
    path = f"{MGMT}/permissions/warehouse/{prefix}/table/{ids['x']}/assignments"
    assert _call(authed, alice, "POST", path, json=grant).status_code == 204
    base = f"/catalog/v1/{prefix}"
    # Config works (he has something in the warehouse); lists show only the way to `x`.
    config = _call(authed, bob, "GET", "/catalog/v1/config", params={"warehouse": "default"})
    assert config.json()["overrides"]["prefix"] == prefix
    namespaces = _call(authed, bob, "GET", f"{base}/namespaces").json()["namespaces"]
    assert namespaces == [["sales"]]
    inner = _call(authed, bob, "GET", f"{base}/namespaces", params={"parent": "sales"})
    assert inner.json()["namespaces"] == [["sales", "eu"]]
    # `sales` is on his way: its list of tables is his (none), not "does not exist".
    tables_on_the_way = _call(authed, bob, "GET", f"{base}/namespaces/sales/tables")
    assert tables_on_the_way.status_code == 200 and tables_on_the_way.json()["identifiers"] == []
    assert _call(authed, bob, "GET", f"{base}/namespaces/hr/tables").status_code == 404
    tables = _call(authed, bob, "GET", f"{base}/namespaces/sales%1Feu/tables").json()
    assert [t["name"] for t in tables["identifiers"]] == ["x"]
    loaded = _call(authed, bob, "GET", f"{base}/namespaces/sales%1Feu/tables/x")
    assert loaded.status_code == 200, loaded.text
    # Reading is not writing: 403, as he may see the table.
    commit = _call(
        authed, bob, "POST", f"{base}/namespaces/sales%1Feu/tables/x",
        json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]},
    )  # fmt: skip
    assert commit.status_code == 403, commit.text
    assert _call(authed, bob, "GET", f"{base}/namespaces/sales/tables/orders").status_code == 404
    assert _call(authed, bob, "GET", f"{base}/namespaces/hr/tables/salaries").status_code == 404
    # Alice (project_admin) sees everything.
    everything = _call(authed, alice, "GET", f"{base}/namespaces").json()["namespaces"]
    assert everything == [["hr"], ["sales"]]


def test_every_route_declares_the_right_it_needs() -> None:
    """No catalog route without a guard; every management route is in GUARDS (or is a
    permission route, whose handler checks) — `guarded` refuses to build otherwise."""
    from icelog.api.auth.management_guards import GUARDS
    from icelog.api.catalog_api import CATALOG_OPERATIONS
    from icelog.api.management_api import MANAGEMENT_OPERATIONS

    assert [op.path for op in CATALOG_OPERATIONS if op.guard is None] == []
    for op in MANAGEMENT_OPERATIONS:
        assert op.operation_id in GUARDS or op.operation_id.endswith(("Assignments", "Access"))
        if GUARDS.get(op.operation_id) is not None:
            assert op.guard is GUARDS[op.operation_id]


def test_info_names_the_authorizer(authed: Authed, api: Any) -> None:
    token = authed.idp.issue("alice")
    assert _call(authed, token, "GET", f"{MGMT}/info").json()["authz-backend"] == "grants"
    assert api.client.get(f"{MGMT}/info").json()["authz-backend"] == "allow-all"
