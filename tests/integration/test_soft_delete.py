"""Soft delete, undrop, expiration and purge tasks (management + catalog API)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from uuid import UUID

from icelog.domain.identifiers import NamespaceName, namespace_id
from tests.integration.conftest import Api, create_table
from tests.integration.test_namespaces_api import error_of
from tests.integration.test_views_api import create_view

ROOT = "/management/v1"


def topics_since(api: Api, position: int) -> list[str]:
    recorder = api.services.catalog.app.recorder
    found = recorder.select_notifications(start=position, limit=10_000, inclusive_of_start=False)
    return [n.topic for n in found]


def set_profile(api: Api, profile: dict[str, Any]) -> None:
    response = api.client.post(
        f"{ROOT}/warehouse/{api.prefix}/delete-profile", json={"delete-profile": profile}
    )
    assert response.status_code == 204, response.text


def deleted(api: Api, **params: Any) -> Any:
    response = api.client.get(f"{ROOT}/warehouse/{api.prefix}/deleted-tabulars", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def undrop(api: Api, *targets: dict[str, Any]) -> Any:
    return api.client.post(
        f"{ROOT}/warehouse/{api.prefix}/deleted-tabulars/undrop", json={"targets": list(targets)}
    )


def tasks(api: Api, **filters: Any) -> list[dict[str, Any]]:
    response = api.client.post(f"{ROOT}/warehouse/{api.prefix}/task/list", json=filters)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["tasks"]
    return found


def drop_purge(api: Api, ns: str, name: str) -> Any:
    return api.delete(f"/namespaces/{ns}/tables/{name}", params={"purgeRequested": "true"})


def local(location: str) -> Path:
    return Path(location[len("file://") :])


def test_soft_drop_list_and_undrop_restores_the_exact_metadata(api: Api) -> None:
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_table(api, "db", "t")
    table_id = created["metadata"]["table-uuid"]
    commit = api.post(
        "/namespaces/db/tables/t",
        {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
    )
    assert commit.status_code == 200
    before = api.get("/namespaces/db/tables/t").json()
    position = api.position()
    assert api.delete("/namespaces/db/tables/t").status_code == 204
    assert sorted(topics_since(api, position)) == [
        "icelog.name-claim.released.v1",
        "icelog.table.soft-dropped.v1",
        "icelog.task.scheduled.v1",
    ], "one append: drop, freed name and the expiration task (nothing on the namespace)"
    assert api.get("/namespaces/db/tables/t").status_code == 404
    assert api.get("/namespaces/db/tables").json()["identifiers"] == []
    assert local(before["metadata-location"]).exists(), "a soft drop keeps the files"

    listed = deleted(api)
    assert listed["next-page-token"] is None
    [item] = listed["tabulars"]
    assert item["id"] == table_id
    assert item["name"] == "t" and item["namespace"] == ["db"] and item["typ"] == "table"
    assert item["warehouse-id"] == api.prefix
    assert item["deletion-kind"] == "default"
    assert item["expiration-date"] > item["deleted-at"]
    [expiration] = tasks(api, **{"entity-id": table_id})
    assert expiration["queue-name"] == "tabular-expiration"
    assert expiration["status"] == "pending"
    assert api.run_tasks() == 0, "not due for an hour"

    assert undrop(api, {"type": "table", "id": table_id}).status_code == 204
    after = api.get("/namespaces/db/tables/t").json()
    assert after["metadata-location"] == before["metadata-location"]
    assert after["metadata"] == before["metadata"]
    assert deleted(api)["tabulars"] == []
    assert tasks(api, **{"entity-id": table_id})[0]["status"] == "cancelled"
    # Still a live table: commits work after the undrop.
    again = api.post(
        "/namespaces/db/tables/t",
        {"updates": [{"action": "set-properties", "updates": {"k": "w"}}]},
    )
    assert again.status_code == 200
    assert undrop(api, {"type": "table", "id": table_id}).status_code == 404


def test_name_is_free_after_a_soft_drop_and_undrop_can_rename(api: Api) -> None:
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    api.post("/namespaces", {"namespace": ["db"]})
    old_id = create_table(api, "db", "t")["metadata"]["table-uuid"]
    assert api.delete("/namespaces/db/tables/t").status_code == 204
    new_id = create_table(api, "db", "t")["metadata"]["table-uuid"]
    assert new_id != old_id
    taken = undrop(api, {"type": "table", "id": old_id})
    assert taken.status_code == 409
    assert error_of(taken)["type"] == "AlreadyExistsException"
    assert "new-name" in str(error_of(taken)["message"])
    assert deleted(api)["tabulars"][0]["id"] == old_id, "a refused undrop changes nothing"
    assert undrop(api, {"type": "table", "id": old_id, "new-name": "t_old"}).status_code == 204
    assert api.get("/namespaces/db/tables/t_old").json()["metadata"]["table-uuid"] == old_id
    assert api.get("/namespaces/db/tables/t").json()["metadata"]["table-uuid"] == new_id


def test_undrop_is_all_or_nothing_and_checks_its_input(api: Api) -> None:
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    api.post("/namespaces", {"namespace": ["db"]})
    a = create_table(api, "db", "a")["metadata"]["table-uuid"]
    v = create_view(api, "v").json()["metadata"]["view-uuid"]
    assert api.delete("/namespaces/db/tables/a").status_code == 204
    assert api.delete("/namespaces/db/views/v").status_code == 204
    assert {t["typ"] for t in deleted(api)["tabulars"]} == {"table", "view"}
    unknown = "11111111-1111-1111-1111-111111111111"
    position = api.position()
    missing = undrop(api, {"type": "table", "id": a}, {"type": "view", "id": unknown})
    assert missing.status_code == 404
    assert api.position() == position, "nothing undropped when one target fails"
    assert undrop(api, {"type": "view", "id": a}).status_code == 404, "wrong type"
    bad_bodies: list[dict[str, Any]] = [
        {},
        {"targets": []},
        {"targets": [{"type": "index", "id": a}]},
    ]
    for bad in bad_bodies:
        response = api.client.post(
            f"{ROOT}/warehouse/{api.prefix}/deleted-tabulars/undrop", json=bad
        )
        assert response.status_code == 400, bad
    assert undrop(api, {"type": "table", "id": a}, {"type": "view", "id": v}).status_code == 204
    assert api.get("/namespaces/db/tables/a").status_code == 200
    assert api.get("/namespaces/db/views/v").status_code == 200


def test_deleted_tabulars_are_paged_and_filtered_by_namespace(api: Api) -> None:
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    for ns in ("a", "b"):
        api.post("/namespaces", {"namespace": [ns]})
        for name in ("t1", "t2", "t3"):
            create_table(api, ns, name)
            assert api.delete(f"/namespaces/{ns}/tables/{name}").status_code == 204
    seen: list[str] = []
    token = None
    while True:
        params: dict[str, Any] = {"pageSize": 2}
        if token:
            params["pageToken"] = token
        page = deleted(api, **params)
        assert len(page["tabulars"]) <= 2
        seen += [f"{t['namespace'][0]}.{t['name']}" for t in page["tabulars"]]
        token = page["next-page-token"]
        if token is None:
            break
    assert sorted(seen) == sorted(f"{ns}.t{i}" for ns in "ab" for i in (1, 2, 3))
    assert len(set(seen)) == 6
    ns_b = namespace_id(UUID(api.prefix), NamespaceName(("b",)))
    only_b = deleted(api, namespaceId=str(ns_b))["tabulars"]
    assert {t["namespace"][0] for t in only_b} == {"b"} and len(only_b) == 3


def test_namespace_with_only_soft_deleted_children_cannot_be_dropped(api: Api) -> None:
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    assert api.delete("/namespaces/db/tables/t").status_code == 204
    refused = api.delete("/namespaces/db")
    assert refused.status_code == 409
    assert error_of(refused)["type"] == "NamespaceNotEmptyException"
    assert "soft-deleted" in str(error_of(refused)["message"])
    # A recursive drop removes it for good, soft-deleted children included.
    assert api.delete("/namespaces/db", params={"recursive": "true"}).status_code == 204
    assert deleted(api)["tabulars"] == []
    assert api.get("/namespaces/db").status_code == 404


def test_expiration_removes_entry_and_purges_files(api: Api) -> None:
    set_profile(api, {"type": "soft", "expiration-seconds": 1})
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_table(api, "db", "t")
    table_id = created["metadata"]["table-uuid"]
    metadata_file = local(created["metadata-location"])
    assert drop_purge(api, "db", "t").status_code == 204
    assert deleted(api)["tabulars"][0]["deletion-kind"] == "purge"
    assert api.run_tasks() == 0, "not expired yet"
    # The delay was fixed at drop time: a later profile change does not move it.
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    time.sleep(1.1)
    position = api.position()
    assert api.run_tasks() == 2, "expiration, then the purge it scheduled"
    assert deleted(api)["tabulars"] == []
    assert not metadata_file.exists()
    assert metadata_file.parent.exists(), "purge deletes files, never directories"
    topics = topics_since(api, position)
    assert topics.count("icelog.task.attempt-started.v1") == 2
    assert topics.count("icelog.task.succeeded.v1") == 2
    assert "icelog.table.expired.v1" in topics and "icelog.table.purged.v1" in topics
    states = {t["queue-name"]: t["status"] for t in tasks(api, **{"entity-id": table_id})}
    assert states == {"tabular-expiration": "succeeded", "tabular-purge": "succeeded"}
    # The namespace is empty now.
    assert api.delete("/namespaces/db").status_code == 204


def test_hard_drop_purges_in_a_task_and_blocks_warehouse_delete_until_done(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_table(api, "db", "t")
    metadata_file = local(created["metadata-location"])
    assert drop_purge(api, "db", "t").status_code == 204
    assert deleted(api)["tabulars"] == [], "hard drops are not listed as deleted"
    assert api.delete("/namespaces/db").status_code == 204
    refused = api.client.delete(f"{ROOT}/warehouse/{api.prefix}")
    assert refused.status_code == 409 and "open task" in str(error_of(refused)["message"])
    assert api.run_tasks() == 1
    assert not metadata_file.exists()
    [purge] = tasks(api)
    assert purge["status"] == "succeeded"
    task = api.client.get(f"{ROOT}/warehouse/{api.prefix}/task/by-id/{purge['task-id']}")
    assert task.json()["status"] == "succeeded"
    assert api.client.delete(f"{ROOT}/warehouse/{api.prefix}").status_code == 204


def test_failed_attempts_are_retried_then_given_up_each_an_event(api: Api) -> None:
    catalog = api.services.catalog
    catalog.lifecycle.task_max_attempts = 2
    catalog.tasks.task_backoff_ms = 0
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_table(api, "db", "t")
    metadata_file = local(created["metadata-location"])
    metadata_file.write_bytes(b"not json")  # the purge cannot read what to delete
    catalog.app.metadata_cache = type(catalog.app.metadata_cache)()
    assert drop_purge(api, "db", "t").status_code == 204
    position = api.position()
    assert api.run_tasks() == 2
    topics = topics_since(api, position)
    assert topics.count("icelog.task.attempt-started.v1") == 2
    assert topics.count("icelog.task.attempt-failed.v1") == 2
    [purge] = tasks(api)
    assert purge["status"] == "failed" and purge["attempt"] == 2
    assert "Not a metadata file" in purge["last-error"]
    assert api.run_tasks() == 0, "a failed task is not retried again"


def test_an_expired_lease_is_taken_over_and_the_abandoned_attempt_recorded(api: Api) -> None:
    workers = api.services.tasks
    leases = workers.leases
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    assert drop_purge(api, "db", "t").status_code == 204
    now = int(time.time() * 1000)
    [task_id] = leases.claim("w1", now_ms=now, lease_ms=60_000, limit=10)
    assert leases.claim("w2", now_ms=now, lease_ms=60_000, limit=10) == [], "held by w1"
    assert api.services.catalog.tasks.start_task(UUID(task_id), "w1") is not None
    # w1 dies; once its lease has run out, w2 takes the task over.
    later = now + 61_000
    assert leases.claim("w2", now_ms=later, lease_ms=60_000, limit=10) == [task_id]
    assert leases.renew(task_id, "w1", until_ms=later + 1) is False, "w1 lost it"
    position = api.position()
    task = api.services.catalog.tasks.start_task(UUID(task_id), "w2")
    assert task is not None and task.attempt == 2
    assert topics_since(api, position) == [
        "icelog.task.attempt-abandoned.v1",
        "icelog.task.attempt-started.v1",
    ]
    assert api.services.catalog.tasks.run_task(UUID(task_id), "w1", lambda: True) is None, (
        "the old worker cannot record an outcome"
    )
    assert api.services.catalog.tasks.run_task(UUID(task_id), "w2", lambda: True) == "succeeded"


def test_views_soft_drop_and_expire(api: Api) -> None:
    set_profile(api, {"type": "soft", "expiration-seconds": 0})
    api.post("/namespaces", {"namespace": ["db"]})
    view_id = create_view(api, "v").json()["metadata"]["view-uuid"]
    assert api.delete("/namespaces/db/views/v").status_code == 204
    assert deleted(api)["tabulars"][0]["id"] == view_id
    assert api.run_tasks() == 1
    assert deleted(api)["tabulars"] == []
    assert undrop(api, {"type": "view", "id": view_id}).status_code == 404
    assert api.delete("/namespaces/db").status_code == 204


def test_undrop_refuses_when_a_client_deleted_the_files(api: Api) -> None:
    set_profile(api, {"type": "soft", "expiration-seconds": 3600})
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_table(api, "db", "t")
    assert api.delete("/namespaces/db/tables/t").status_code == 204
    local(created["metadata-location"]).unlink()  # what Spark's DROP TABLE ... PURGE does
    refused = undrop(api, {"type": "table", "id": created["metadata"]["table-uuid"]})
    assert refused.status_code == 409
    assert "metadata file" in str(error_of(refused)["message"])


def test_purge_deletes_metadata_files_beyond_the_metadata_log(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_table(api, "db", "t", properties={"write.metadata.previous-versions-max": "1"})
    metadata_dir = local(created["metadata-location"]).parent
    for n in range(4):
        response = api.post(
            "/namespaces/db/tables/t",
            {"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
        )
        assert response.status_code == 200
    current = api.get("/namespaces/db/tables/t").json()["metadata"]
    assert len(current["metadata-log"]) == 1, "older files fell out of the metadata log"
    assert len(list(metadata_dir.glob("*.metadata.json"))) == 5
    assert drop_purge(api, "db", "t").status_code == 204
    assert api.run_tasks() == 1
    assert list(metadata_dir.glob("*.metadata.json")) == [], "the catalog wrote them all"
