"""unregisterTable (main's spec): the table leaves the catalog, its files stay, the answer
holds its last metadata — and registering that location brings it back."""

from __future__ import annotations

import uuid

from icelog.api.routes.config import ENDPOINTS
from tests.integration.conftest import Api, create_table
from tests.integration.test_iceberg_events import all_events, append_body
from tests.support.clients import local_path


def test_unregister_keeps_the_files_and_register_brings_the_table_back(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    made = create_table(api, "db", "t")
    assert api.post("/namespaces/db/tables/t", append_body(None, 5, 1)).status_code == 200
    before = api.get("/namespaces/db/tables/t").json()

    answer = api.post("/namespaces/db/tables/t/unregister")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["metadata-location"] == before["metadata-location"]
    assert body["metadata"]["current-snapshot-id"] == 5  # every commit before it
    assert api.get("/namespaces/db/tables/t").status_code == 404
    assert local_path(body["metadata-location"]).is_file()  # nothing was deleted
    assert api.post("/namespaces/db/tables/t/unregister").status_code == 404
    assert api.post("/namespaces/db/tables/t", append_body(5, 6, 2)).status_code == 404

    again = api.post(
        "/namespaces/db/register", {"name": "t", "metadata-location": body["metadata-location"]}
    )
    assert again.status_code == 200, again.text
    assert again.json()["metadata"]["current-snapshot-id"] == 5

    topics = [e.topic for e in api.services.catalog.app.recorder.select_notifications(1, 10_000)]
    assert "icelog.table.unregistered.v1" in topics
    drops = [e for e in all_events(api) if e["operation"]["operation-type"] == "drop-table"]
    assert drops[-1]["operation"]["table-uuid"] == made["metadata"]["table-uuid"]
    assert drops[-1]["operation"]["purge"] is False
    assert drops[-1]["operation"]["x-icelog.unregistered"] is True


def test_a_protected_table_cannot_be_unregistered(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    table_id = create_table(api, "db", "t")["metadata"]["table-uuid"]
    protect = f"/management/v1/warehouse/{api.prefix}/table/{table_id}/protection"
    assert api.client.post(protect, json={"protected": True}).status_code == 200
    refused = api.post("/namespaces/db/tables/t/unregister")
    assert refused.status_code == 409
    assert api.get("/namespaces/db/tables/t").status_code == 200


def test_an_unregister_sent_again_with_its_idempotency_key_is_replayed(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = api.post("/namespaces/db/tables/t/unregister", headers=key)
    assert first.status_code == 200, first.text
    again = api.post("/namespaces/db/tables/t/unregister", headers=key)
    assert again.status_code == 200, again.text
    assert again.json()["metadata-location"] == first.json()["metadata-location"]
    assert api.post("/namespaces/db/tables/t/unregister").status_code == 404


def test_the_route_is_advertised() -> None:
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister" in ENDPOINTS
