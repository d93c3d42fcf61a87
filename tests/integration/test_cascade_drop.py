"""Cascade drop of a namespace: every child's drop is an event; protected children stop it."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from icelog.domain.identifiers import NamespaceName, namespace_id
from tests.integration.conftest import Api, create_table
from tests.integration.test_namespaces_api import error_of
from tests.integration.test_views_api import create_view

ROOT = "/management/v1"


def build_tree(api: Api) -> dict[str, str]:
    for ns in (["db"], ["db", "a"], ["db", "a", "deep"], ["db", "b"]):
        api.post("/namespaces", {"namespace": ns})
    ids = {
        "t1": create_table(api, "db", "t1")["metadata"]["table-uuid"],
        "t2": create_table(api, "db%1Fa%1Fdeep", "t2")["metadata"]["table-uuid"],
        "v": create_view(api, "v").json()["metadata"]["view-uuid"],
    }
    return ids


def test_recursive_drop_removes_everything_with_one_event_per_child(api: Api) -> None:
    build_tree(api)
    assert api.delete("/namespaces/db").status_code == 409, "not empty without recursive"
    before = api.position()
    assert api.delete("/namespaces/db", params={"recursive": "true"}).status_code == 204
    assert api.get("/namespaces/db").status_code == 404
    assert api.get("/namespaces").json() == {"namespaces": []}
    # 2 tables + 1 view + 4 namespaces were dropped, each with its own append.
    assert api.position() - before >= 7
    assert api.delete("/namespaces/db", params={"recursive": "maybe"}).status_code == 400


def test_recursive_drop_stops_at_a_protected_child_before_dropping_anything(api: Api) -> None:
    ids = build_tree(api)
    wid = api.prefix
    api.client.post(
        f"{ROOT}/warehouse/{wid}/table/{ids['t2']}/protection", json={"protected": True}
    )
    before = api.position()
    refused = api.delete("/namespaces/db", params={"recursive": "true"})
    assert refused.status_code == 409
    assert error_of(refused)["type"] == "ProtectedException"
    assert api.position() == before, "nothing was dropped"
    assert api.get("/namespaces/db/tables/t1").status_code == 200


def test_management_cascade_drop_by_id_with_purge(api: Api) -> None:
    build_tree(api)
    location = api.get("/namespaces/db/tables/t1").json()["metadata-location"]
    ns_id = namespace_id(UUID(api.prefix), NamespaceName(("db",)))
    response = api.client.delete(
        f"{ROOT}/warehouse/{api.prefix}/namespace/{ns_id}",
        params={"recursive": "true", "purge": "true"},
    )
    assert response.status_code == 204, response.text
    assert api.get("/namespaces/db").status_code == 404
    assert api.run_tasks() >= 1
    assert not Path(location[len("file://") :]).exists(), "purged"
    missing = api.client.delete(f"{ROOT}/warehouse/{api.prefix}/namespace/{ns_id}")
    assert missing.status_code == 404
