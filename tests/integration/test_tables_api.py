"""Tables over REST: create, load, commit, rename, drop, register — and their errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.integration.conftest import SCHEMA, Api, create_table
from tests.integration.test_namespaces_api import error_of


def commit(api: Api, ns: str, name: str, requirements: list[Any], updates: list[Any]) -> Any:
    return api.post(
        f"/namespaces/{ns}/tables/{name}", {"requirements": requirements, "updates": updates}
    )


def snapshot(
    snapshot_id: int, seq: int, parent: int | None = None, ts: int = 1_700_000_000_000
) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "sequence-number": seq,
        "timestamp-ms": ts + seq,
        "manifest-list": f"file:///nowhere/snap-{snapshot_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    if parent is not None:
        snap["parent-snapshot-id"] = parent
    return snap


def append_change(
    snapshot_id: int, seq: int, parent: int | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The requirements and updates of an append to `main`, whose head must be `parent`."""
    return (
        [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        [
            {"action": "add-snapshot", "snapshot": snapshot(snapshot_id, seq, parent)},
            {
                "action": "set-snapshot-ref",
                "ref-name": "main",
                "type": "branch",
                "snapshot-id": snapshot_id,
            },
        ],
    )


def append(api: Api, ns: str, name: str, snapshot_id: int, seq: int, parent: int | None) -> Any:
    return commit(api, ns, name, *append_change(snapshot_id, seq, parent))


def test_create_assigns_fresh_ids_and_writes_first_file(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    body = create_table(
        api,
        "db",
        "events",
        **{
            "partition-spec": {
                "spec-id": 5,
                "fields": [
                    {
                        "source-id": 3,
                        "field-id": 1234,
                        "name": "id_bucket",
                        "transform": "bucket[16]",
                    }
                ],
            },
            "write-order": {
                "order-id": 9,
                "fields": [
                    {
                        "source-id": 4,
                        "transform": "identity",
                        "direction": "asc",
                        "null-order": "nulls-first",
                    }
                ],
            },
            "properties": {"format-version": "2", "owner": "bob"},
        },
    )
    md = body["metadata"]
    assert [f["id"] for f in md["schemas"][0]["fields"]] == [1, 2, 3]
    assert md["partition-specs"][0]["fields"][0] == {
        "source-id": 1,
        "field-id": 1000,
        "name": "id_bucket",
        "transform": "bucket[16]",
    }
    assert md["sort-orders"][-1]["order-id"] == 1 and md["default-sort-order-id"] == 1
    assert "format-version" not in md["properties"] and md["properties"]["owner"] == "bob"
    location = body["metadata-location"]
    assert location.startswith(f"file://{api.warehouse_dir}/db/events-")
    assert location.split("/")[-1].startswith("00000-")
    on_disk = json.loads(Path(location[len("file://") :]).read_text())
    assert on_disk == md
    loaded = api.get("/namespaces/db/tables/events")
    assert loaded.status_code == 200
    assert loaded.json()["metadata"] == md and loaded.json()["metadata-location"] == location
    assert api.head("/namespaces/db/tables/events").status_code == 204
    dup = api.post("/namespaces/db/tables", {"name": "events", "schema": SCHEMA})
    assert dup.status_code == 409
    assert error_of(dup)["message"] == "Table already exists: db.events"


def test_missing_table_and_namespace_errors(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    no_ns = api.get("/namespaces/nope/tables/t")
    assert no_ns.status_code == 404
    assert error_of(no_ns) == {
        "message": "Table does not exist: nope.t",
        "type": "NoSuchTableException",
        "code": 404,
    }
    # Spark asks for metadata tables as a namespace first: must be NoSuchTable.
    create_table(api, "db", "t")
    meta = api.get("/namespaces/db%1Ft/tables/snapshots")
    assert error_of(meta)["type"] == "NoSuchTableException"
    create_in_missing = api.post("/namespaces/nope/tables", {"name": "t", "schema": SCHEMA})
    assert create_in_missing.status_code == 404
    assert error_of(create_in_missing)["type"] == "NoSuchNamespaceException"
    assert api.get("/namespaces/nope/tables").status_code == 404
    assert api.delete("/namespaces/db/tables/zzz").status_code == 404
    assert commit(api, "db", "zzz", [], []).status_code == 404


def test_stage_create_then_create_transaction(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    staged = api.post(
        "/namespaces/db/tables", {"name": "s", "schema": SCHEMA, "stage-create": True}
    )
    assert staged.status_code == 200 and "metadata-location" not in staged.json()
    assert api.get("/namespaces/db/tables/s").status_code == 404
    md = staged.json()["metadata"]
    updates = [
        {"action": "assign-uuid", "uuid": md["table-uuid"]},
        {"action": "upgrade-format-version", "format-version": 1},
        {"action": "add-schema", "schema": md["schemas"][0], "last-column-id": 3},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": md["location"]},
        {"action": "set-properties", "updates": {"k": "v"}},
    ]
    done = commit(api, "db", "s", [{"type": "assert-create"}], updates)
    assert done.status_code == 200, done.text
    result = done.json()["metadata"]
    assert result["format-version"] == 1 and result["table-uuid"] == md["table-uuid"]
    assert result["metadata-log"] == []
    again = commit(api, "db", "s", [{"type": "assert-create"}], updates)
    assert again.status_code == 409
    assert error_of(again)["message"] == "Requirement failed: table already exists"
    mixed = commit(
        api, "db", "s", [{"type": "assert-create"}, {"type": "assert-table-uuid", "uuid": "x"}], []
    )
    assert mixed.status_code == 400


def test_commits_write_new_files_and_check_requirements(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    first = create_table(api, "db", "t")["metadata-location"]
    ok = append(api, "db", "t", 11, 1, None)
    assert ok.status_code == 200, ok.text
    second = ok.json()["metadata-location"]
    assert second.split("/")[-1].startswith("00001-") and second != first
    md = ok.json()["metadata"]
    assert md["current-snapshot-id"] == 11 and md["last-sequence-number"] == 1
    assert md["metadata-log"][-1]["metadata-file"] == first
    # A second writer from the same base: the ref moved, so its requirement fails.
    stale = append(api, "db", "t", 12, 2, None)
    assert stale.status_code == 409
    error = error_of(stale)
    assert error["type"] == "CommitFailedException"
    assert str(error["message"]).startswith(
        "Requirement failed: branch main was created concurrently"
    )
    uuid_check = commit(
        api,
        "db",
        "t",
        [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000001"}],
        [],
    )
    assert str(error_of(uuid_check)["message"]).startswith(
        "Requirement failed: UUID does not match"
    )
    unknown = commit(api, "db", "t", [], [{"action": "make-coffee"}])
    assert unknown.status_code == 400
    # No effective change: no new file, same location.
    noop = commit(api, "db", "t", [], [{"action": "set-properties", "updates": {}}])
    assert noop.status_code == 200 and noop.json()["metadata-location"] == second
    loaded = api.get("/namespaces/db/tables/t", params={"snapshots": "refs"})
    assert [s["snapshot-id"] for s in loaded.json()["metadata"]["snapshots"]] == [11]
    etag = loaded.headers["etag"]
    again = api.get(
        "/namespaces/db/tables/t", params={"snapshots": "refs"}, headers={"If-None-Match": etag}
    )
    assert again.status_code == 304


def test_rename_drop_and_purge(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    api.post("/namespaces", {"namespace": ["other"]})
    create_table(api, "db", "a")
    create_table(api, "db", "b")

    def rename(src: list[Any], dst: list[Any]) -> Any:
        return api.post(
            "/tables/rename",
            {
                "source": {"namespace": src[0], "name": src[1]},
                "destination": {"namespace": dst[0], "name": dst[1]},
            },
        )

    taken = rename([["db"], "a"], [["db"], "b"])
    assert taken.status_code == 409 and error_of(taken)["message"] == "Table already exists: db.b"
    no_ns = rename([["db"], "a"], [["nope"], "a"])
    assert no_ns.status_code == 404 and error_of(no_ns)["type"] == "NoSuchNamespaceException"
    no_src = rename([["db"], "zz"], [["db"], "c"])
    assert no_src.status_code == 404 and error_of(no_src)["type"] == "NoSuchTableException"
    assert rename([["db"], "a"], [["other"], "moved"]).status_code == 204
    assert api.get("/namespaces/db/tables/a").status_code == 404
    assert api.get("/namespaces/other/tables/moved").status_code == 200
    assert api.get("/namespaces/other/tables").json() == {
        "identifiers": [{"namespace": ["other"], "name": "moved"}]
    }
    assert (
        api.delete("/namespaces/db/tables/b", params={"purgeRequested": "maybe"}).status_code == 400
    )
    location = api.get("/namespaces/db/tables/b").json()["metadata-location"]
    path = Path(location[len("file://") :])
    assert (
        api.delete("/namespaces/db/tables/b", params={"purgeRequested": "True"}).status_code == 204
    )
    assert path.exists(), "the purge runs as a task, after the request"
    assert api.run_tasks() == 1
    assert not path.exists()
    moved = api.get("/namespaces/other/tables/moved").json()["metadata-location"]
    assert api.delete("/namespaces/other/tables/moved").status_code == 204
    assert Path(moved[len("file://") :]).exists(), "a drop without purge keeps files"
    assert api.delete("/namespaces/db").status_code == 204
    # The name is free again after the drop.
    create_table(api, "other", "moved")


def test_register_and_metrics(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    location = create_table(api, "db", "t")["metadata-location"]
    append(api, "db", "t", 5, 1, None)
    current = api.get("/namespaces/db/tables/t").json()
    assert (
        api.post("/namespaces/db/tables/t/metrics", {"report-type": "scan-report"}).status_code
        == 204
    )
    assert api.post("/namespaces/db/tables/zz/metrics", {"report-type": "x"}).status_code == 404
    assert api.delete("/namespaces/db/tables/t").status_code == 204
    dup = api.post("/namespaces/db/register", {"name": "u", "metadata-location": location})
    assert dup.status_code == 200
    registered = api.post(
        "/namespaces/db/register", {"name": "t", "metadata-location": current["metadata-location"]}
    )
    assert registered.status_code == 409, "locations of u and t overlap"
    api.delete("/namespaces/db/tables/u")
    registered = api.post(
        "/namespaces/db/register", {"name": "t", "metadata-location": current["metadata-location"]}
    )
    assert registered.status_code == 200, registered.text
    assert registered.json()["metadata"] == current["metadata"]
    nxt = append(api, "db", "t", 6, 2, 5)
    assert nxt.status_code == 200
    assert nxt.json()["metadata-location"].split("/")[-1].startswith("00002-")
    missing = api.post(
        "/namespaces/db/register",
        {"name": "x", "metadata-location": f"file://{api.warehouse_dir}/nope.metadata.json"},
    )
    assert missing.status_code == 404


def test_load_table_survives_lost_database_connections(pg_api: Api) -> None:
    """PostgreSQL only: the SQLite reader has no server connection to lose."""
    import psycopg

    api = pg_api

    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    assert api.get("/namespaces/db/tables/t").status_code == 200
    url = api.services.settings.database_url
    assert url is not None
    with psycopg.connect(url, autocommit=True) as conn:
        killed = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    assert api.get("/namespaces/db/tables/t").status_code == 200


def test_explicit_locations_stay_inside_the_warehouse_and_never_overlap(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    base = f"file://{api.warehouse_dir}"
    first = create_table(api, "db", "a", location=f"{base}/custom/a")
    assert first["metadata"]["location"] == f"{base}/custom/a"
    assert first["metadata-location"].startswith(f"{base}/custom/a/metadata/00000-")
    for bad, status in [
        (f"{base}/custom/a", 409),  # the same location
        (f"{base}/custom/a/inner", 409),  # inside another table
        (f"{base}/custom", 409),  # containing another table
        (base, 400),  # the warehouse root itself
        ("file:///somewhere/else", 400),  # outside the warehouse
    ]:
        response = api.post(
            "/namespaces/db/tables", {"name": "b", "schema": SCHEMA, "location": bad}
        )
        assert response.status_code == status, (bad, response.text)
    # A sibling whose name merely starts with the same characters is fine.
    create_table(api, "db", "b", location=f"{base}/custom/ab")
    # Once the first table is dropped its location is free again.
    assert api.delete("/namespaces/db/tables/a").status_code == 204
    create_table(api, "db", "c", location=f"{base}/custom/a/inner")


def test_credentials_of_a_local_table_are_an_empty_list(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    response = api.get("/namespaces/db/tables/t/credentials")
    assert response.status_code == 200
    assert response.json() == {"storage-credentials": []}
    assert api.get("/namespaces/db/tables/nope/credentials").status_code == 404
