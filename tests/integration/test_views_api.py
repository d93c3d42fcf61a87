"""Views over REST: lifecycle, replace semantics, shared identifier space, RCK messages."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from tests.integration.conftest import SCHEMA, Api, create_table
from tests.integration.test_concurrency import run_threads
from tests.integration.test_namespaces_api import error_of

VIEW_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 3,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def version(
    sql: str, dialect: str = "spark", version_id: int = 1, schema_id: int = 0
) -> dict[str, Any]:
    return {
        "version-id": version_id,
        "schema-id": schema_id,
        "timestamp-ms": 1_700_000_000_000,
        "summary": {"engine-name": "spark"},
        "representations": [{"type": "sql", "sql": sql, "dialect": dialect}],
        "default-namespace": ["db"],
    }


def create_view(api: Api, name: str, **extra: Any) -> Any:
    return api.post(
        "/namespaces/db/views",
        {
            "name": name,
            "schema": VIEW_SCHEMA,
            "view-version": version("SELECT 1"),
            "properties": {},
            **extra,
        },
    )


def test_view_lifecycle(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_view(api, "v", properties={"comment": "first"})
    assert created.status_code == 200, created.text
    body = created.json()
    md = body["metadata"]
    assert md["current-version-id"] == 1 and md["schemas"][0]["schema-id"] == 0
    assert md["versions"][0]["schema-id"] == 0 and len(md["version-log"]) == 1
    location = body["metadata-location"]
    assert location.endswith(".gz.metadata.json") and "/00000-" in location
    on_disk = json.loads(gzip.decompress(Path(location[len("file://") :]).read_bytes()))
    assert on_disk == md
    loaded = api.get("/namespaces/db/views/v")
    assert loaded.status_code == 200 and loaded.json()["metadata"] == md
    assert api.head("/namespaces/db/views/v").status_code == 204
    assert api.get("/namespaces/db/views").json() == {
        "identifiers": [{"namespace": ["db"], "name": "v"}]
    }
    assert api.get("/namespaces/db/tables").json() == {"identifiers": []}
    # Replace: a new version with a new schema, as Spark's CREATE OR REPLACE VIEW sends it.
    replaced = api.post(
        "/namespaces/db/views/v",
        {
            "requirements": [{"type": "assert-view-uuid", "uuid": md["view-uuid"]}],
            "updates": [
                {
                    "action": "add-schema",
                    "schema": {
                        **VIEW_SCHEMA,
                        "fields": [
                            *VIEW_SCHEMA["fields"],
                            {"id": 2, "name": "x", "type": "string", "required": False},
                        ],
                    },
                },
                {
                    "action": "add-view-version",
                    "view-version": version("SELECT 2", version_id=2, schema_id=-1),
                },
                {"action": "set-current-view-version", "view-version-id": -1},
                {"action": "set-properties", "updates": {"comment": "second"}},
            ],
        },
    )
    assert replaced.status_code == 200, replaced.text
    md2 = replaced.json()["metadata"]
    assert md2["current-version-id"] == 2 and len(md2["version-log"]) == 2
    assert md2["properties"]["comment"] == "second"
    assert "/00001-" in replaced.json()["metadata-location"]
    wrong_uuid = api.post(
        "/namespaces/db/views/v",
        {
            "requirements": [
                {"type": "assert-view-uuid", "uuid": "00000000-0000-0000-0000-000000000009"}
            ],
            "updates": [],
        },
    )
    assert wrong_uuid.status_code == 409
    assert str(error_of(wrong_uuid)["message"]).startswith(
        "Requirement failed: view UUID does not match"
    )
    assert api.delete("/namespaces/db/views/v").status_code == 204
    assert api.get("/namespaces/db/views/v").status_code == 404
    assert api.delete("/namespaces/db").status_code == 204


def test_one_identifier_space_for_tables_and_views(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    assert create_view(api, "v").status_code == 200
    over_table = create_view(api, "t")
    assert over_table.status_code == 409
    assert error_of(over_table)["message"] == "Table with same name already exists: db.t"
    over_view = api.post("/namespaces/db/tables", {"name": "v", "schema": SCHEMA})
    assert error_of(over_view)["message"] == "View with same name already exists: db.v"
    again = create_view(api, "v")
    assert error_of(again)["message"] == "View already exists: db.v"
    assert error_of(api.get("/namespaces/db/views/t"))["type"] == "NoSuchViewException"
    assert error_of(api.get("/namespaces/db/tables/v"))["type"] == "NoSuchTableException"
    assert error_of(api.get("/namespaces/nope/views/v"))["message"] == "View does not exist: nope.v"
    # A namespace holding only a view is not empty.
    api.post("/namespaces", {"namespace": ["only_view"]})
    api.post(
        "/namespaces/only_view/views",
        {"name": "x", "schema": VIEW_SCHEMA, "view-version": version("SELECT 1"), "properties": {}},
    )
    assert api.delete("/namespaces/only_view").status_code == 409


def test_rename_views_with_the_rck_messages(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    api.post("/namespaces", {"namespace": ["other"]})
    create_table(api, "db", "t")
    for name in ("a", "b"):
        create_view(api, name)

    def rename(src: str, dst: str, dst_ns: str = "db") -> Any:
        return api.post(
            "/views/rename",
            {
                "source": {"namespace": ["db"], "name": src},
                "destination": {"namespace": [dst_ns], "name": dst},
            },
        )

    assert (
        error_of(rename("a", "b"))["message"] == "Cannot rename db.a to db.b. View already exists"
    )
    assert (
        error_of(rename("a", "t"))["message"] == "Cannot rename db.a to db.t. Table already exists"
    )
    table_onto_view = api.post(
        "/tables/rename",
        {
            "source": {"namespace": ["db"], "name": "t"},
            "destination": {"namespace": ["db"], "name": "a"},
        },
    )
    assert error_of(table_onto_view)["message"] == "Cannot rename db.t to db.a. View already exists"
    assert error_of(rename("zz", "c"))["type"] == "NoSuchViewException"
    assert error_of(rename("a", "c", "nope"))["type"] == "NoSuchNamespaceException"
    before = api.get("/namespaces/db/views/a").json()["metadata"]
    assert rename("a", "moved", "other").status_code == 204
    assert api.get("/namespaces/db/views/a").status_code == 404
    assert api.get("/namespaces/other/views/moved").json()["metadata"] == before


def test_register_view_and_concurrent_replaces(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    location = create_view(api, "v").json()["metadata-location"]
    assert api.delete("/namespaces/db/views/v").status_code == 204
    registered = api.post(
        "/namespaces/db/register-view", {"name": "again", "metadata-location": location}
    )
    assert registered.status_code == 200, registered.text
    assert registered.json()["metadata-location"] == location
    dup = api.post("/namespaces/db/register-view", {"name": "again", "metadata-location": location})
    assert error_of(dup)["message"] == "View already exists: db.again"

    # Stale replaces that all add version 2: each lands on top of the previous (2, 3, 4, ...).
    def work(i: int) -> Any:
        return api.post(
            "/namespaces/db/views/again",
            {
                "updates": [
                    {
                        "action": "add-view-version",
                        "view-version": version(f"SELECT {i + 10}", version_id=2),
                    },
                    {"action": "set-current-view-version", "view-version-id": -1},
                ]
            },
        ).status_code

    statuses = run_threads(4, work)
    assert statuses == [200, 200, 200, 200]
    md = api.get("/namespaces/db/views/again").json()["metadata"]
    assert sorted(v["version-id"] for v in md["versions"]) == [1, 2, 3, 4, 5]
    assert md["current-version-id"] in (2, 3, 4, 5)


def test_bad_view_requests_are_400(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    two_dialects = version("SELECT 1")
    two_dialects["representations"].append({"type": "sql", "sql": "SELECT 2", "dialect": "SPARK"})
    dup = api.post(
        "/namespaces/db/views",
        {"name": "v", "schema": VIEW_SCHEMA, "view-version": two_dialects, "properties": {}},
    )
    assert dup.status_code == 400
    assert error_of(dup) == {
        "message": "Invalid view version: Cannot add multiple queries for dialect spark",
        "type": "IllegalArgumentException",
        "code": 400,
    }
    assert (
        api.post(
            "/namespaces/db/views", {"name": "v", "schema": VIEW_SCHEMA, "properties": {}}
        ).status_code
        == 400
    )
    assert (
        api.post(
            "/namespaces/nope/views",
            {
                "name": "v",
                "schema": VIEW_SCHEMA,
                "view-version": version("SELECT 1"),
                "properties": {},
            },
        ).status_code
        == 404
    )


def test_etags_change_with_every_commit_and_answer_304(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    create_view(api, "v")
    for path, update in (
        ("/namespaces/db/tables/t", {"action": "set-properties", "updates": {"k": "1"}}),
        ("/namespaces/db/views/v", {"action": "set-properties", "updates": {"k": "1"}}),
    ):
        first = api.get(path)
        etag = first.headers["etag"]
        assert api.get(path, headers={"If-None-Match": etag}).status_code == 304
        assert api.post(path, {"requirements": [], "updates": [update]}).status_code == 200
        after = api.get(path, headers={"If-None-Match": etag})
        assert after.status_code == 200 and after.headers["etag"] != etag
    refs = api.get("/namespaces/db/tables/t", params={"snapshots": "refs"}).headers["etag"]
    assert refs != api.get("/namespaces/db/tables/t").headers["etag"], "differs per snapshot mode"
