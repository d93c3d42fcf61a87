"""POST /v1/{prefix}/transactions/commit: every table moves, or none does."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from tests.integration.conftest import Api, create_table
from tests.integration.test_concurrency import run_threads
from tests.integration.test_namespaces_api import error_of
from tests.integration.test_tables_api import snapshot


def change(ns: str, name: str, requirements: list[Any], updates: list[Any]) -> dict[str, Any]:
    return {
        "identifier": {"namespace": [ns], "name": name},
        "requirements": requirements,
        "updates": updates,
    }


def append_change(name: str, snap_id: int, seq: int, parent: int | None) -> dict[str, Any]:
    return change(
        "db",
        name,
        [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        [
            {"action": "add-snapshot", "snapshot": snapshot(snap_id, seq, parent)},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
             "snapshot-id": snap_id},
        ],
    )  # fmt: skip


def locations(api: Api, *names: str) -> list[str]:
    return [api.get(f"/namespaces/db/tables/{n}").json()["metadata-location"] for n in names]


def metadata_files(api: Api) -> set[Path]:
    return set(api.warehouse_dir.rglob("*.metadata.json"))


def test_all_tables_move_together(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    for name in ("a", "b"):
        create_table(api, "db", name)
    before = api.position()
    response = api.post(
        "/transactions/commit",
        {"table-changes": [append_change("a", 1, 1, None), append_change("b", 2, 1, None)]},
    )
    assert response.status_code == 204, response.text
    assert api.get("/namespaces/db/tables/a").json()["metadata"]["current-snapshot-id"] == 1
    assert api.get("/namespaces/db/tables/b").json()["metadata"]["current-snapshot-id"] == 2
    assert api.position() > before
    advertised = api.client.get("/catalog/v1/config").json()["endpoints"]
    assert "POST /v1/{prefix}/transactions/commit" in advertised


def test_a_failing_last_requirement_changes_nothing(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    for name in ("a", "b", "c"):
        create_table(api, "db", name)
    before_locations = locations(api, "a", "b", "c")
    before_files = metadata_files(api)
    before_position = api.position()
    stale = change("db", "c", [{"type": "assert-current-schema-id", "current-schema-id": 7}], [])
    response = api.post(
        "/transactions/commit",
        {"table-changes": [append_change("a", 1, 1, None), append_change("b", 2, 1, None), stale]},
    )
    assert response.status_code == 409
    assert error_of(response)["type"] == "CommitFailedException"
    assert locations(api, "a", "b", "c") == before_locations
    assert metadata_files(api) == before_files, "files written for the attempt are removed"
    assert api.position() == before_position, "no event was appended"
    missing = api.post(
        "/transactions/commit",
        {"table-changes": [append_change("a", 1, 1, None), append_change("zz", 2, 1, None)]},
    )
    assert missing.status_code == 404
    assert error_of(missing)["type"] == "NoSuchTableException"
    assert locations(api, "a", "b", "c") == before_locations


def test_bad_transactions_are_400(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "a")
    no_identifier: dict[str, Any] = {"requirements": [], "updates": []}
    assert api.post("/transactions/commit", {"table-changes": [no_identifier]}).status_code == 400
    assert api.post("/transactions/commit", {"table-changes": []}).status_code == 400
    assert api.post("/transactions/commit", {"nope": 1}).status_code == 400
    create = change("db", "a", [{"type": "assert-create"}], [])
    assert api.post("/transactions/commit", {"table-changes": [create]}).status_code == 400


def test_changes_to_one_table_apply_in_order(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "a")
    response = api.post(
        "/transactions/commit",
        {"table-changes": [append_change("a", 1, 1, None), append_change("a", 2, 2, 1)]},
    )
    assert response.status_code == 204, response.text
    md = api.get("/namespaces/db/tables/a").json()["metadata"]
    assert md["current-snapshot-id"] == 2 and len(md["snapshots"]) == 2
    assert len(md["metadata-log"]) == 2


def test_concurrent_transactions_over_overlapping_tables_lose_nothing(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    names = ["t0", "t1", "t2"]
    for name in names:
        create_table(api, "db", name)
    lock = threading.Lock()
    conflicts = [0]

    def work(i: int) -> None:
        pair = [names[i % 3], names[(i + 1) % 3]]
        for j in range(4):
            while True:
                current = {}
                for name in pair:
                    md = api.get(f"/namespaces/db/tables/{name}").json()["metadata"]
                    parent = md.get("current-snapshot-id")
                    current[name] = (
                        None if parent in (None, -1) else parent,
                        md["last-sequence-number"],
                    )
                base_id = 10_000 * (i + 1) + 100 * j
                body = {
                    "table-changes": [
                        append_change(n, base_id + k, current[n][1] + 1, current[n][0])
                        for k, n in enumerate(pair)
                    ]
                }
                status = api.post("/transactions/commit", body).status_code
                if status == 204:
                    break
                assert status == 409, status
                with lock:
                    conflicts[0] += 1

    results = run_threads(6, work)
    assert [r for r in results if r is not None] == []
    total = 0
    for name in names:
        md = api.get(f"/namespaces/db/tables/{name}").json()["metadata"]
        by_id = {s["snapshot-id"]: s for s in md["snapshots"]}
        chain, cursor = 0, md["current-snapshot-id"]
        while cursor is not None:
            chain += 1
            cursor = by_id[cursor].get("parent-snapshot-id")
        assert chain == len(md["snapshots"]), "one linear history per table"
        total += len(md["snapshots"])
    # 6 workers x 4 transactions x 2 tables each, every one landed exactly once.
    assert total == 48
    # Each transaction moved both of its tables or neither: snapshot ids pair up.
    ids = {
        s["snapshot-id"]
        for n in names
        for s in api.get(f"/namespaces/db/tables/{n}").json()["metadata"]["snapshots"]
    }
    for i in range(6):
        for j in range(4):
            assert {10_000 * (i + 1) + 100 * j, 10_000 * (i + 1) + 100 * j + 1} <= ids
