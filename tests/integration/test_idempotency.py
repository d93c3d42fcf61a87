"""Idempotency-Key: the first final outcome is replayed, on any replica, within the lifetime."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from tests.integration.conftest import Api, create_table, replica_settings


def key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


def test_a_repeated_commit_is_replayed_not_reapplied(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    headers = key()
    body = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
        "updates": [
            {"action": "add-snapshot", "snapshot": {"snapshot-id": 1, "sequence-number": 1,
             "timestamp-ms": 1_700_000_000_000, "manifest-list": "file:///x.avro",
             "summary": {"operation": "append"}}},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
        ],
    }  # fmt: skip
    first = api.post("/namespaces/db/tables/t", body, headers=headers)
    assert first.status_code == 200
    position = api.position()
    again = api.post("/namespaces/db/tables/t", body, headers=headers)
    assert again.status_code == 200, "replayed, although the requirement no longer holds"
    assert again.json() == first.json()
    assert api.position() == position, "nothing was appended for the replay"
    without_key = api.post("/namespaces/db/tables/t", body)
    assert without_key.status_code == 409
    config = api.client.get("/catalog/v1/config").json()
    assert config["idempotency-key-lifetime"] == "PT1800S"


def test_final_errors_are_replayed_and_keys_are_bound_to_one_request(api: Api) -> None:
    headers = key()
    assert api.post("/namespaces", {"namespace": ["db"]}).status_code == 200
    conflict = api.post("/namespaces", {"namespace": ["db"]}, headers=headers)
    assert conflict.status_code == 409
    assert api.delete("/namespaces/db").status_code == 204
    replayed = api.post("/namespaces", {"namespace": ["db"]}, headers=headers)
    assert replayed.status_code == 409 and replayed.json() == conflict.json()
    assert api.get("/namespaces/db").status_code == 404, "the replay did not create it"
    other_route = api.delete("/namespaces/db", headers=headers)
    assert other_route.status_code == 422
    assert (
        api.post(
            "/namespaces", {"namespace": ["x"]}, headers={"Idempotency-Key": "nope"}
        ).status_code
        == 400
    )
    drop_key = key()
    api.post("/namespaces", {"namespace": ["gone"]})
    assert api.delete("/namespaces/gone", headers=drop_key).status_code == 204
    assert api.delete("/namespaces/gone", headers=drop_key).status_code == 204, "replayed 204"
    assert api.delete("/namespaces/gone").status_code == 404


def test_the_record_holds_on_another_replica_and_expires(api: Api, tmp_path: Path) -> None:
    headers = key()
    assert api.post("/namespaces", {"namespace": ["db"]}, headers=headers).status_code == 200
    settings = replica_settings(api, {"ICELOG_IDEMPOTENCY_LIFETIME_SECONDS": "1"})
    replica = Services.build(settings)
    try:
        with TestClient(create_app(settings, replica)) as other:
            url = f"/catalog/v1/{api.prefix}/namespaces"
            assert other.post(url, json={"namespace": ["db"]}, headers=headers).status_code == 200
            time.sleep(1.2)
            expired = other.post(url, json={"namespace": ["db"]}, headers=headers)
            assert expired.status_code == 409, "after the lifetime the request runs again"
    finally:
        replica.close()
