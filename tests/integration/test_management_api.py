"""Management API (Lakekeeper-shaped): bootstrap, projects, warehouses."""

from __future__ import annotations

from pathlib import Path

from tests.integration.conftest import Api
from tests.integration.test_namespaces_api import error_of

ROOT = "/management/v1"
NIL = "00000000-0000-0000-0000-000000000000"


def test_info_and_bootstrap_once(api: Api) -> None:
    info = api.client.get(f"{ROOT}/info").json()
    assert info["bootstrapped"] is True  # the embedded default bootstraps itself
    assert info["default-project-id"] == NIL
    again = api.client.post(f"{ROOT}/bootstrap", json={"accept-terms-of-use": True})
    assert again.status_code == 400
    assert error_of(again)["type"] == "CatalogAlreadyBootstrapped"
    refused = api.client.post(f"{ROOT}/bootstrap", json={"accept-terms-of-use": False})
    assert refused.status_code == 400


def test_projects_lifecycle(api: Api) -> None:
    c = api.client
    assert c.get(f"{ROOT}/project").json() == {"project-id": NIL, "project-name": "default"}
    created = c.post(f"{ROOT}/project", json={"project-name": "analytics"})
    assert created.status_code == 200
    pid = created.json()["project-id"]
    headers = {"x-project-id": pid}
    assert c.get(f"{ROOT}/project", headers=headers).json()["project-name"] == "analytics"
    assert (
        c.post(f"{ROOT}/project/rename", json={"new-name": "bi"}, headers=headers).status_code
        == 204
    )
    assert c.get(f"{ROOT}/project/{pid}").json() == {"project-id": pid, "project-name": "bi"}
    names = {p["project-name"] for p in c.get(f"{ROOT}/project-list").json()["projects"]}
    assert names == {"default", "bi"}
    explicit = "11111111-2222-3333-4444-555555555555"
    made = c.post(f"{ROOT}/project", json={"project-name": "x", "project-id": explicit})
    assert made.json() == {"project-id": explicit}
    dup = c.post(f"{ROOT}/project", json={"project-name": "x", "project-id": explicit})
    assert dup.status_code == 409
    assert c.post(f"{ROOT}/project", json={"project-name": ""}).status_code == 400
    assert (
        c.post(f"{ROOT}/project", json={"project-name": "y", "project-id": "nope"}).status_code
        == 400
    )
    # A project with a warehouse cannot be deleted.
    wh = c.post(
        f"{ROOT}/warehouse",
        json={
            "warehouse-name": "w",
            "project-id": pid,
            "storage-profile": {"type": "file", "base-location": f"file://{api.warehouse_dir}-bi"},
        },
    )
    assert wh.status_code == 200, wh.text
    blocked = c.delete(f"{ROOT}/project/{pid}")
    assert blocked.status_code == 409
    assert c.delete(f"{ROOT}/warehouse/{wh.json()['warehouse-id']}").status_code == 204
    assert c.delete(f"{ROOT}/project/{pid}").status_code == 204
    assert c.get(f"{ROOT}/project/{pid}").status_code == 404
    assert c.get(f"{ROOT}/project", headers={"x-project-id": "bad"}).status_code == 400


def test_warehouses_lifecycle(api: Api, tmp_path: Path) -> None:
    c = api.client
    profile = {"type": "file", "base-location": f"file://{tmp_path / 'lake'}"}
    created = c.post(
        f"{ROOT}/warehouse",
        json={
            "warehouse-name": "lake",
            "project-id": NIL,
            "storage-profile": profile,
            "delete-profile": {"type": "soft", "expiration-seconds": 3600},
        },
    )
    assert created.status_code == 200, created.text
    wid = created.json()["warehouse-id"]
    assert (tmp_path / "lake").is_dir(), "creation validates (and creates) the directory"
    got = c.get(f"{ROOT}/warehouse/{wid}").json()
    assert got["name"] == "lake" and got["project-id"] == NIL and got["status"] == "active"
    assert got["storage-profile"] == profile
    assert got["delete-profile"] == {"type": "soft", "expiration-seconds": 3600}
    listed = {w["name"] for w in c.get(f"{ROOT}/warehouse").json()["warehouses"]}
    assert listed == {"default", "lake"}
    dup = c.post(f"{ROOT}/warehouse", json={"warehouse-name": "lake", "storage-profile": profile})
    assert dup.status_code == 409
    # The REST catalog finds it by name, and only it.
    cfg = c.get("/catalog/v1/config", params={"warehouse": "lake"}).json()
    assert cfg["overrides"]["prefix"] == wid
    assert c.post(f"/catalog/v1/{wid}/namespaces", json={"namespace": ["n"]}).status_code == 200
    not_empty = c.delete(f"{ROOT}/warehouse/{wid}")
    assert not_empty.status_code == 409
    assert c.delete(f"/catalog/v1/{wid}/namespaces/n").status_code == 204
    assert c.post(f"{ROOT}/warehouse/{wid}/rename", json={"new-name": "pond"}).status_code == 204
    assert c.get("/catalog/v1/config", params={"warehouse": "lake"}).status_code == 404
    assert (
        c.get("/catalog/v1/config", params={"warehouse": "pond"}).json()["overrides"]["prefix"]
        == wid
    )
    # The old name is free again.
    again = c.post(
        f"{ROOT}/warehouse",
        json={
            "warehouse-name": "lake",
            "storage-profile": {"type": "file", "base-location": f"file://{tmp_path / 'lake2'}"},
        },
    )
    assert again.status_code == 200
    assert c.delete(f"{ROOT}/warehouse/{wid}").status_code == 204
    assert c.get(f"{ROOT}/warehouse/{wid}").status_code == 404


def test_warehouse_validation_errors(api: Api, tmp_path: Path) -> None:
    c = api.client
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cases = [
        {
            "warehouse-name": "a",
            "storage-profile": {"type": "file", "base-location": f"file://{blocker}/sub"},
        },
        {
            "warehouse-name": "a",
            "storage-profile": {"type": "file", "base-location": "relative/dir"},
        },
        {"warehouse-name": "a", "storage-profile": {"type": "gopher"}},
        {
            "warehouse-name": "",
            "storage-profile": {"type": "file", "base-location": f"file://{tmp_path}"},
        },
        {
            "warehouse-name": "a",
            "storage-profile": {"type": "file", "base-location": f"file://{tmp_path}"},
            "delete-profile": {"type": "soft"},
        },
        {"warehouse-name": "a"},
    ]
    for body in cases:
        response = c.post(f"{ROOT}/warehouse", json=body)
        assert response.status_code == 400, (body, response.text)
        error_of(response)
    assert c.get(f"{ROOT}/warehouse/not-a-uuid").status_code == 400
