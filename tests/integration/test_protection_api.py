"""Protections and the warehouse delete profile (management API)."""

from __future__ import annotations

from uuid import UUID

from icelog.domain.identifiers import NamespaceName, namespace_id
from tests.integration.conftest import Api, create_table
from tests.integration.test_namespaces_api import error_of
from tests.integration.test_views_api import create_view

ROOT = "/management/v1"


def test_protected_entities_cannot_be_dropped_until_unprotected(api: Api) -> None:
    c = api.client
    wid = api.prefix
    api.post("/namespaces", {"namespace": ["db"]})
    table_id = create_table(api, "db", "t")["metadata"]["table-uuid"]
    view_id = create_view(api, "v").json()["metadata"]["view-uuid"]
    ns_id = str(namespace_id(UUID(wid), NamespaceName(("db",))))
    targets = [
        (f"{ROOT}/warehouse/{wid}/table/{table_id}/protection", "/namespaces/db/tables/t"),
        (f"{ROOT}/warehouse/{wid}/view/{view_id}/protection", "/namespaces/db/views/v"),
    ]
    for protection, resource in targets:
        assert c.get(protection).json()["protected"] is False
        before = api.position()
        assert c.post(protection, json={"protected": True}).json()["protected"] is True
        assert api.position() > before, "protection is an event"
        refused = api.delete(resource)
        assert refused.status_code == 409
        assert error_of(refused)["type"] == "ProtectedException"
        assert api.get(resource).status_code == 200
        assert c.get(protection).json()["protected"] is True
        assert c.post(protection, json={"protected": False}).status_code == 200
        assert api.delete(resource).status_code == 204
        assert c.get(protection).status_code == 404, "gone with the drop"
    ns_protection = f"{ROOT}/warehouse/{wid}/namespace/{ns_id}/protection"
    assert c.post(ns_protection, json={"protected": True}).status_code == 200
    assert error_of(api.delete("/namespaces/db"))["type"] == "ProtectedException"
    c.post(ns_protection, json={"protected": False})
    assert api.delete("/namespaces/db").status_code == 204
    wh_protection = f"{ROOT}/warehouse/{wid}/protection"
    assert c.post(wh_protection, json={"protected": True}).status_code == 200
    assert c.get(f"{ROOT}/warehouse/{wid}").json()["protected"] is True
    assert error_of(c.delete(f"{ROOT}/warehouse/{wid}"))["type"] == "ProtectedException"
    c.post(wh_protection, json={"protected": False})
    assert c.delete(f"{ROOT}/warehouse/{wid}").status_code == 204


def test_protection_requests_are_checked(api: Api) -> None:
    c = api.client
    wid = api.prefix
    unknown = "11111111-1111-1111-1111-111111111111"
    assert c.get(f"{ROOT}/warehouse/{wid}/table/{unknown}/protection").status_code == 404
    assert (
        c.post(
            f"{ROOT}/warehouse/{wid}/table/not-a-uuid/protection", json={"protected": True}
        ).status_code
        == 400
    )
    api.post("/namespaces", {"namespace": ["db"]})
    table_id = create_table(api, "db", "t")["metadata"]["table-uuid"]
    assert (
        c.post(
            f"{ROOT}/warehouse/{wid}/table/{table_id}/protection", json={"protected": "yes"}
        ).status_code
        == 400
    )
    other = c.post(
        f"{ROOT}/warehouse",
        json={
            "warehouse-name": "w2",
            "storage-profile": {"type": "file", "base-location": f"file://{api.warehouse_dir}-2"},
        },
    ).json()["warehouse-id"]
    assert c.get(f"{ROOT}/warehouse/{other}/table/{table_id}/protection").status_code == 404


def test_delete_profile_can_be_changed(api: Api) -> None:
    c = api.client
    wid = api.prefix
    assert c.get(f"{ROOT}/warehouse/{wid}").json()["delete-profile"] == {"type": "hard"}
    soft = {"type": "soft", "expiration-seconds": 600}
    before = api.position()
    assert (
        c.post(f"{ROOT}/warehouse/{wid}/delete-profile", json={"delete-profile": soft}).status_code
        == 204
    )
    assert api.position() > before
    assert c.get(f"{ROOT}/warehouse/{wid}").json()["delete-profile"] == soft
    bad = c.post(
        f"{ROOT}/warehouse/{wid}/delete-profile", json={"delete-profile": {"type": "soft"}}
    )
    assert bad.status_code == 400
