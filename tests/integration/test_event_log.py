"""The log is the truth: every mutation appends events, and the log rebuilds the read model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from icelog.projections.rebuild import differences, rebuild
from tests.integration.conftest import SCHEMA, Api, create_table
from tests.integration.test_functions_api import (
    create_function,
    definition,
    drop_function,
    replace_function,
)
from tests.integration.test_tables_api import append, commit
from tests.integration.test_views_api import create_view, version

ROOT = "/management/v1"


def test_every_mutating_route_appends_events(api: Api, tmp_path: Any) -> None:
    client = api.client
    wh_dir = tmp_path / "wh2"
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("create namespace", lambda: api.post("/namespaces", {"namespace": ["db"]})),
        ("create nested", lambda: api.post("/namespaces", {"namespace": ["db", "sub"]})),
        (
            "namespace properties",
            lambda: api.post("/namespaces/db/properties", {"updates": {"a": "b"}}),
        ),
        (
            "create table",
            lambda: api.post("/namespaces/db/tables", {"name": "t", "schema": SCHEMA}),
        ),
        ("commit", lambda: append(api, "db", "t", 1, 1, None)),
        (
            "transaction",
            lambda: api.post(
                "/transactions/commit",
                {
                    "table-changes": [
                        {
                            "identifier": {"namespace": ["db"], "name": "t"},
                            "requirements": [],
                            "updates": [{"action": "set-properties", "updates": {"tx": "1"}}],
                        }
                    ]
                },
            ),
        ),
        ("create transaction", lambda: _create_tx(api)),
        (
            "rename",
            lambda: api.post(
                "/tables/rename",
                {
                    "source": {"namespace": ["db"], "name": "t"},
                    "destination": {"namespace": ["db"], "name": "t2"},
                },
            ),
        ),
        ("register", lambda: _register(api)),
        ("drop", lambda: api.delete("/namespaces/db/tables/t2")),
        (
            "drop purge",
            lambda: api.delete("/namespaces/db/tables/r", params={"purgeRequested": "true"}),
        ),
        ("create view", lambda: create_view(api, "v")),
        (
            "replace view",
            lambda: api.post(
                "/namespaces/db/views/v",
                {"updates": [{"action": "set-properties", "updates": {"a": "b"}}]},
            ),
        ),
        (
            "rename view",
            lambda: api.post(
                "/views/rename",
                {
                    "source": {"namespace": ["db"], "name": "v"},
                    "destination": {"namespace": ["db"], "name": "v2"},
                },
            ),
        ),
        ("drop view", lambda: api.delete("/namespaces/db/views/v2")),
        (
            "register view",
            lambda: api.post(
                "/namespaces/db/register-view",
                {"name": "v3", "metadata-location": _dropped_view_location(api)},
            ),
        ),
        ("create function", lambda: create_function(api, "db", "f")),
        (
            "replace function",
            lambda: replace_function(api, "db", "f", definitions=[definition("x + 2")]),
        ),
        ("drop function", lambda: drop_function(api, "db", "f")),
        ("drop namespace", lambda: api.delete("/namespaces/db%1Fsub")),
        (
            "protect warehouse",
            lambda: client.post(
                f"{ROOT}/warehouse/{api.prefix}/protection", json={"protected": True}
            ),
        ),
        (
            "unprotect warehouse",
            lambda: client.post(
                f"{ROOT}/warehouse/{api.prefix}/protection", json={"protected": False}
            ),
        ),
        (
            "delete profile",
            lambda: client.post(
                f"{ROOT}/warehouse/{api.prefix}/delete-profile",
                json={"delete-profile": {"type": "soft", "expiration-seconds": 5}},
            ),
        ),
        ("create soft-dropped", lambda: create_table_response(api, "db", "soft")),
        ("soft drop", lambda: api.delete("/namespaces/db/tables/soft")),
        (
            "undrop",
            lambda: client.post(
                f"{ROOT}/warehouse/{api.prefix}/deleted-tabulars/undrop",
                json={"targets": [{"type": "table", "id": _deleted_id(api)}]},
            ),
        ),
        ("create project", lambda: client.post(f"{ROOT}/project", json={"project-name": "p2"})),
        (
            "create warehouse",
            lambda: client.post(
                f"{ROOT}/warehouse",
                json={
                    "warehouse-name": "w2",
                    "storage-profile": {"type": "file", "base-location": f"file://{wh_dir}"},
                },
            ),
        ),
        (
            "rename warehouse",
            lambda: client.post(
                f"{ROOT}/warehouse/{_wh(api, 'w2')}/rename", json={"new-name": "w3"}
            ),
        ),
        ("delete warehouse", lambda: client.delete(f"{ROOT}/warehouse/{_wh(api, 'w3')}")),
        (
            "rename project",
            lambda: client.post(
                f"{ROOT}/project/{_project(api, 'p2')}/rename", json={"new-name": "p3"}
            ),
        ),
        ("delete project", lambda: client.delete(f"{ROOT}/project/{_project(api, 'p3')}")),
    ]
    for label, step in steps:
        before = api.position()
        response = step()
        assert response.status_code in (200, 204), (
            f"{label}: {response.status_code} {response.text}"
        )
        assert api.position() > before, f"{label} appended no event"
    # A failed mutation appends nothing.
    before = api.position()
    assert api.post("/namespaces", {"namespace": ["db"]}).status_code == 409
    assert api.position() == before


def _dropped_view_location(api: Api) -> str:
    response = create_view(api, "to_drop")
    location = str(response.json()["metadata-location"])
    assert api.delete("/namespaces/db/views/to_drop").status_code == 204
    return location


def create_table_response(api: Api, ns: str, name: str) -> Any:
    return api.post(f"/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA})


def _deleted_id(api: Api) -> str:
    listed = api.client.get(f"{ROOT}/warehouse/{api.prefix}/deleted-tabulars").json()
    return str(listed["tabulars"][0]["id"])


def _wh(api: Api, name: str) -> str:
    listed = api.client.get(f"{ROOT}/warehouse").json()["warehouses"]
    return str(next(w["id"] for w in listed if w["name"] == name))


def _project(api: Api, name: str) -> str:
    listed = api.client.get(f"{ROOT}/project-list").json()["projects"]
    return str(next(p["project-id"] for p in listed if p["project-name"] == name))


def _create_tx(api: Api) -> Any:
    staged = api.post(
        "/namespaces/db/tables", {"name": "tx", "schema": SCHEMA, "stage-create": True}
    ).json()["metadata"]
    return commit(
        api,
        "db",
        "tx",
        [{"type": "assert-create"}],
        [
            {"action": "assign-uuid", "uuid": staged["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": staged["schemas"][0]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": staged["location"]},
        ],
    )


def _register(api: Api) -> Any:
    location = api.get("/namespaces/db/tables/tx").json()["metadata-location"]
    assert api.delete("/namespaces/db/tables/tx").status_code == 204
    return api.post("/namespaces/db/register", {"name": "r", "metadata-location": location})


def test_rebuild_from_the_log_equals_the_live_read_model(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"], "properties": {"x": "1"}})
    api.post("/namespaces", {"namespace": ["db", "deep"]})
    api.post("/namespaces/db/properties", {"updates": {"y": "2"}, "removals": ["x"]})
    for name in ("a", "b", "c"):
        create_table(api, "db", name, properties={"format-version": "3"} if name == "c" else {})
    parent = None
    for i in range(1, 6):
        assert append(api, "db", "a", 100 + i, i, parent).status_code == 200
        parent = 100 + i
    commit(
        api,
        "db",
        "a",
        [],
        [
            {"action": "set-properties", "updates": {"k": "v"}},
            {"action": "remove-snapshots", "snapshot-ids": [101]},
        ],
    )
    commit(
        api,
        "db",
        "b",
        [],
        [
            {
                "action": "add-schema",
                "schema": {
                    **SCHEMA,
                    "fields": [
                        *SCHEMA["fields"],
                        {"id": 9, "name": "extra", "type": "int", "required": False},
                    ],
                },
            },
            {"action": "set-current-schema", "schema-id": -1},
        ],
    )
    api.post(
        "/tables/rename",
        {
            "source": {"namespace": ["db"], "name": "b"},
            "destination": {"namespace": ["db", "deep"], "name": "b2"},
        },
    )
    api.delete("/namespaces/db/tables/c")
    create_view(api, "v")
    create_view(api, "gone")
    api.post(
        "/namespaces/db/views/v",
        {
            "updates": [
                {"action": "add-view-version", "view-version": version("SELECT 2", version_id=2)},
                {"action": "set-current-view-version", "view-version-id": -1},
            ]
        },
    )
    api.delete("/namespaces/db/views/gone")
    api.client.post(
        f"/management/v1/warehouse/{api.prefix}/delete-profile",
        json={"delete-profile": {"type": "soft", "expiration-seconds": 0}},
    )
    # Soft delete, undrop under a new name, expiry with purge, a cancelled expiration.
    create_table(api, "db", "s1")
    create_table(api, "db", "s2")
    s1 = api.get("/namespaces/db/tables/s1").json()["metadata"]["table-uuid"]
    api.delete("/namespaces/db/tables/s1")
    api.delete("/namespaces/db/tables/s2", params={"purgeRequested": "true"})
    create_table(api, "db", "s1")
    undone = api.client.post(
        f"/management/v1/warehouse/{api.prefix}/deleted-tabulars/undrop",
        json={"targets": [{"type": "table", "id": s1, "new-name": "s1_back"}]},
    )
    assert undone.status_code == 204
    assert api.run_tasks() == 2, "s2 expires, then its purge"
    app = api.services.catalog.app
    applied = rebuild(app.recorder, app.mapper, "rebuilt_")
    assert applied > 20
    assert differences(app.recorder, "rebuilt_") == []
    # And the comparison is not vacuous: a changed live row is reported.
    with app.recorder.datastore.transaction(commit=True) as cur:  # type: ignore[attr-defined]
        sql = "UPDATE icelog_namespaces SET properties = '{}' WHERE ns_key = 'db'"
        cur.execute(sql)
    assert len(differences(app.recorder, "rebuilt_")) == 1
