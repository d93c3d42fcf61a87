"""`POST /v1/{prefix}/events` (apache/iceberg PR #12584), answered from the log: every change
of the warehouse in log order, the proposal's operations, resumable tokens carrying the
filters, level-wise name filters, retention (410), and a consumer that rebuilds every
table's metadata location from the events alone."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.publishers.cloud_events import cloud_event_id
from tests.integration.conftest import SCHEMA, Api, Authed, create_table, replica_settings


def events(api: Api, body: dict[str, Any] | None = None) -> dict[str, Any]:
    answer = api.post("/events", body or {})
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def all_events(api: Api, body: dict[str, Any] | None = None, size: int = 3) -> list[Any]:
    """Page by page until a page comes back empty."""
    ask = {**(body or {}), "page-size": size}
    found: list[Any] = []
    while True:
        page = events(api, ask)
        if not page["events"]:
            return found
        assert len(page["events"]) <= size
        found += page["events"]
        ask = {"continuation-token": page["continuation-token"], "page-size": size}


def ops(found: list[Any], standard_only: bool = True) -> list[str]:
    kinds = [e["operation"]["operation-type"] for e in found]
    return [k for k in kinds if not (standard_only and k.startswith("x-"))]


def append_body(parent: int | None, snap_id: int, seq: int) -> dict[str, Any]:
    snapshot: dict[str, Any] = {
        "snapshot-id": snap_id,
        "sequence-number": seq,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": f"s3://nowhere/snap-{snap_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    if parent is not None:
        snapshot["parent-snapshot-id"] = parent
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
             "snapshot-id": snap_id},
        ],
    }  # fmt: skip


VIEW = {
    "name": "v",
    "schema": {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "x", "type": "long", "required": False}]},
    "view-version": {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {"engine": "spark"},
        "default-namespace": ["db"],
        "representations": [{"type": "sql", "sql": "SELECT 1 AS x", "dialect": "spark"}],
    },
    "properties": {},
}  # fmt: skip


def test_every_change_is_an_event_with_the_proposals_operation(api: Api) -> None:
    assert (
        api.post("/namespaces", {"namespace": ["db"], "properties": {"a": "1"}}).status_code == 200
    )
    made = create_table(api, "db", "t")
    table_uuid = made["metadata"]["table-uuid"]
    assert api.post("/namespaces/db/tables/t", append_body(None, 1, 1)).status_code == 200
    update = {"updates": {"b": "2"}, "removals": ["a"]}
    assert api.post("/namespaces/db/properties", update).status_code == 200
    rename = {"source": {"namespace": ["db"], "name": "t"},
              "destination": {"namespace": ["db"], "name": "t2"}}  # fmt: skip
    assert api.post("/tables/rename", rename).status_code == 204
    assert api.post("/namespaces/db/views", VIEW).status_code == 200
    assert api.delete("/namespaces/db/views/v").status_code == 204
    assert api.delete("/namespaces/db/tables/t2").status_code == 204
    assert api.delete("/namespaces/db").status_code == 204

    found = all_events(api)
    assert ops(found) == [
        "create-namespace", "create-table", "update-table", "update-namespace-properties",
        "rename-table", "create-view", "drop-view", "drop-table", "drop-namespace",
    ]  # fmt: skip
    # The project's and the warehouse's creation are icelog's: x- operations, first.
    assert ops(found[:2], standard_only=False) == [
        "x-icelog.create-project", "x-icelog.create-warehouse"
    ]  # fmt: skip
    by_type = {e["operation"]["operation-type"]: e for e in found}
    create = by_type["create-table"]["operation"]
    assert create["identifier"] == {"namespace": ["db"], "name": "t"}
    assert create["table-uuid"] == table_uuid
    actions = [u["action"] for u in create["updates"]]
    assert actions[:2] == ["assign-uuid", "upgrade-format-version"] and "add-schema" in actions
    commit = by_type["update-table"]
    assert commit["operation"]["updates"][0]["action"] == "add-snapshot"
    assert commit["operation"]["requirements"] == [
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}
    ]
    # The same id the CloudEvents stream gives this change (the table's second event).
    assert commit["event-id"] == cloud_event_id(uuid.UUID(table_uuid), 2)
    assert commit["request-event-count"] == 1 and commit["actor"] == {"id": "anonymous"}
    props = by_type["update-namespace-properties"]["operation"]
    assert props["updated"] == ["b"] and props["removed"] == ["a"]
    renamed = by_type["rename-table"]["operation"]
    assert renamed["source"]["name"] == "t" and renamed["destination"]["name"] == "t2"
    assert by_type["drop-table"]["operation"]["purge"] is False
    assert by_type["drop-namespace"]["operation"]["namespace"] == ["db"]
    times = [e["timestamp-ms"] for e in found]
    assert times == sorted(times)
    assert len({e["event-id"] for e in found}) == len(found)


def test_a_transaction_is_one_request_with_one_event_per_table(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "a")
    create_table(api, "db", "b")
    changes = [
        {"identifier": {"namespace": ["db"], "name": name}, **append_body(None, n, 1)}
        for n, name in ((10, "a"), (20, "b"))
    ]
    answer = api.post("/transactions/commit", {"table-changes": changes})
    assert answer.status_code == 204, answer.text
    found = [e for e in all_events(api) if e["operation"]["operation-type"] == "update-table"]
    assert [e["operation"]["identifier"]["name"] for e in found] == ["a", "b"]
    assert found[0]["request-id"] == found[1]["request-id"]
    assert [e["request-event-count"] for e in found] == [2, 2]
    assert found[0]["event-id"] != found[1]["event-id"]


def test_tokens_resume_and_carry_the_filters(api: Api) -> None:
    for name in ("a", "b", "c"):
        api.post("/namespaces", {"namespace": [name]})
    only = {"operation-types": ["create-namespace"]}
    first = events(api, {**only, "page-size": 2})
    assert [e["operation"]["namespace"] for e in first["events"]] == [["a"], ["b"]]
    token = first["continuation-token"]
    # The token alone keeps the filters; repeating them is fine; changing them is not.
    rest = events(api, {"continuation-token": token})
    assert [e["operation"]["namespace"] for e in rest["events"]] == [["c"]]
    assert events(api, {**only, "continuation-token": token})["events"] == rest["events"]
    changed = api.post("/events", {"continuation-token": token, "object-types": ["table"]})
    assert changed.status_code == 400
    assert "filters" in changed.json()["error"]["message"]
    # Caught up: an empty page whose token picks up what comes next.
    caught_up = events(api, {"continuation-token": rest["continuation-token"]})
    assert caught_up["events"] == []
    api.post("/namespaces", {"namespace": ["d"]})
    later = events(api, {"continuation-token": caught_up["continuation-token"]})
    assert [e["operation"]["namespace"] for e in later["events"]] == [["d"]]
    for bad in ("not-a-token", "eyJ2IjogOX0", ""):
        refused = api.post("/events", {"continuation-token": bad})
        assert refused.status_code == 400, bad
        assert refused.json()["error"]["type"] == "BadRequestException"


def test_filters_by_name_level_by_level_uuid_type_time_and_actor(api: Api) -> None:
    for levels in (["acc"], ["acc", "tax"], ["accounting"]):
        api.post("/namespaces", {"namespace": levels})
    a = create_table(api, "acc%1Ftax", "paid")["metadata"]["table-uuid"]
    create_table(api, "accounting", "paid")
    named = all_events(api, {"catalog-objects-by-name": [["acc"]]})
    paths = [(e["operation"].get("namespace"), e["operation"].get("identifier")) for e in named]
    assert paths == [
        (["acc"], None),
        (["acc", "tax"], None),
        (None, {"namespace": ["acc", "tax"], "name": "paid"}),
    ]
    leaf = all_events(api, {"catalog-objects-by-name": [["acc", "tax", "paid"]]})
    assert ops(leaf) == ["create-table"]
    by_uuid = all_events(api, {"catalog-objects-by-uuid": [a]})
    assert [e["operation"]["table-uuid"] for e in by_uuid] == [a]
    tables = all_events(api, {"object-types": ["table"]})
    assert ops(tables) == ["create-table", "create-table"]
    cut = named[-1]["timestamp-ms"]
    since = all_events(api, {"since-timestamp-ms": cut})
    assert all(e["timestamp-ms"] >= cut for e in since) and since
    assert all_events(api, {"custom-filters": {"x-icelog.actor": "nobody"}}) == []
    assert len(all_events(api, {"custom-filters": {"x-icelog.actor": "anonymous"}})) >= 5
    unknown = api.post("/events", {"custom-filters": {"colour": "red"}})
    assert unknown.status_code == 400
    for bad in (
        {"page-size": 0},
        {"object-types": ["warehouse"]},
        {"catalog-objects-by-uuid": ["x"]},
    ):
        assert api.post("/events", bad).status_code == 400, bad


def test_the_endpoint_is_advertised(api: Api) -> None:
    config = api.client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
    assert "POST /v1/{prefix}/events" in config["endpoints"]


def test_a_consumer_rebuilds_every_tables_metadata_location_from_the_events(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    for name in ("a", "b", "c"):
        create_table(api, "db", name)
    parent: dict[str, int | None] = {"a": None, "b": None, "c": None}
    for n in range(1, 4):
        for name in ("a", "b"):
            snap = n * 100 + ord(name)
            assert (
                api.post(
                    f"/namespaces/db/tables/{name}", append_body(parent[name], snap, n)
                ).status_code
                == 200
            )
            parent[name] = snap
    rename = {"source": {"namespace": ["db"], "name": "c"},
              "destination": {"namespace": ["db"], "name": "c2"}}  # fmt: skip
    api.post("/tables/rename", rename)
    api.delete("/namespaces/db/tables/b")

    locations: dict[str, str] = {}
    names: dict[str, str] = {}
    for event in all_events(api, size=2):
        op = event["operation"]
        kind = op["operation-type"]
        if kind in ("create-table", "register-table", "update-table"):
            locations[op["table-uuid"]] = op["metadata-location"]
            names[op["table-uuid"]] = op["identifier"]["name"]
        elif kind == "rename-table":
            names[op["table-uuid"]] = op["destination"]["name"]
        elif kind == "drop-table":
            del locations[op["table-uuid"]], names[op["table-uuid"]]
    catalog = {}
    for name in ("a", "c2"):
        loaded = api.get(f"/namespaces/db/tables/{name}").json()
        catalog[loaded["metadata"]["table-uuid"]] = loaded["metadata-location"]
    assert locations == catalog
    assert sorted(names.values()) == ["a", "c2"]


def test_outside_the_retention_window_is_gone(api: Api, tmp_path: Path) -> None:
    api.post("/namespaces", {"namespace": ["old"]})
    token = events(api, {"page-size": 1})["continuation-token"]
    settings = replica_settings(api, {"ICELOG_EVENTS_RETENTION_DAYS": str(1.5 / 86_400)})  # 1.5 s
    replica = Services.build(settings)
    try:
        with TestClient(create_app(settings, replica)) as other:
            url = f"/catalog/v1/{api.prefix}/events"
            time.sleep(1.6)
            api.post("/namespaces", {"namespace": ["new"]})
            gone = other.post(url, json={"continuation-token": token})
            assert gone.status_code == 410, gone.text
            assert gone.json()["error"]["code"] == 410
            since = other.post(url, json={"since-timestamp-ms": 0})
            assert since.status_code == 410
            fresh = other.post(url, json={})
            assert fresh.status_code == 200
            kinds = [e["operation"].get("namespace") for e in fresh.json()["events"]]
            assert kinds == [["new"]]
    finally:
        replica.close()
    assert SCHEMA  # the shared schema stays importable for the helpers above


def test_grants_are_in_the_stream_of_the_warehouse_their_object_is_in(authed: Authed) -> None:
    alice = authed.idp.issue("alice")
    assert authed.call("POST", "/management/v1/bootstrap", alice,
                       json={"accept-terms-of-use": True}).status_code == 204  # fmt: skip
    config = authed.call("GET", "/catalog/v1/config", alice, params={"warehouse": "default"})
    base = f"/catalog/v1/{config.json()['overrides']['prefix']}"
    authed.call("POST", f"{base}/namespaces", alice, json={"namespace": ["db"]})
    made = authed.call("POST", f"{base}/namespaces/db/tables", alice,
                       json={"name": "t", "schema": SCHEMA})  # fmt: skip
    table_uuid = made.json()["metadata"]["table-uuid"]
    prefix = config.json()["overrides"]["prefix"]
    grants = f"/management/v1/permissions/warehouse/{prefix}/table/{table_uuid}/assignments"
    body = {"writes": [{"type": "select", "user": "oidc~bob"}]}
    assert authed.call("POST", grants, alice, json=body).status_code == 204
    page = authed.call("POST", f"{base}/events", alice,
                       json={"catalog-objects-by-uuid": [table_uuid]})  # fmt: skip
    assert page.status_code == 200, page.text
    kinds = [e["operation"]["operation-type"] for e in page.json()["events"]]
    # Alice owns what she created (ownership is the creation's actor, no grant event).
    assert kinds == ["create-table", "x-icelog.grant"]
    last = page.json()["events"][-1]["operation"]
    assert last["relation"] == "select" and last["principal"] == {"kind": "user", "id": "oidc~bob"}
    # Who may describe the warehouse reads its stream, but not who holds what there.
    dave = authed.idp.issue("dave")
    assert authed.call("GET", "/management/v1/whoami", dave).status_code == 200
    on_warehouse = f"/management/v1/permissions/warehouse/{prefix}/assignments"
    body = {"writes": [{"type": "describe", "user": "oidc~dave"}]}
    assert authed.call("POST", on_warehouse, alice, json=body).status_code == 204
    seen = authed.call("POST", f"{base}/events", dave, json={})
    assert seen.status_code == 200, seen.text
    kinds = [e["operation"]["operation-type"] for e in seen.json()["events"]]
    assert "create-table" in kinds
    assert "x-icelog.grant" not in kinds and "x-icelog.revoke" not in kinds
    # Nobody without rights in the warehouse reads its stream.
    carol = authed.idp.issue("carol")
    assert authed.call("POST", f"{base}/events", carol, json={}).status_code == 404
