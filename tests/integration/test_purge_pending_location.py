"""A hard-dropped table's location stays taken while its purge is pending or running (a
suspected hole, confirmed): the location check saw live and soft-dropped tables only, so
registering the dropped table's metadata (or creating a table at its location) was accepted
while the purge task was still to delete those very files; and a purge already deleting
looks for other tables in its location only when it starts. A register or create overlapping
an open purge is refused (409, naming no table), on every replica; once the purge has
finished, the location is free again."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from starlette.testclient import TestClient

from tests.integration.conftest import SCHEMA, Api, create_table, replica_settings
from tests.integration.test_namespaces_api import error_of
from tests.support.in_process import serving

pytestmark = pytest.mark.attack

ROOT = "/management/v1"


@pytest.fixture
def replica(api: Api) -> Iterator[TestClient]:
    """A second server on the same database (PostgreSQL) or file (SQLite)."""
    with serving(replica_settings(api, {"ICELOG_TASK_WORKERS": "0"})) as (_, client):
        yield client


def local(location: str) -> Path:
    return Path(location[len("file://") :])


def purge_tasks(api: Api) -> list[dict[str, Any]]:
    listed = api.client.post(f"{ROOT}/warehouse/{api.prefix}/task/list", json={})
    assert listed.status_code == 200, listed.text
    return [t for t in listed.json()["tasks"] if t["queue-name"] == "tabular-purge"]


def assert_taken(response: Any, *hidden: str) -> None:
    """409, naming neither the dropped table nor its id (only the caller's own location)."""
    assert response.status_code == 409, response.text
    error = error_of(response)
    assert error["type"] == "LocationAlreadyTakenException"
    for word in (*hidden, "db.secret"):
        assert word not in str(error["message"]), "the message names no other table"


def dropped_with_pending_purge(api: Api) -> tuple[str, str, str]:
    """A table `db.secret` hard-dropped with purge, its purge not yet run: its location,
    a copy of its last metadata (outside that location, so the purge leaves it) and that
    metadata's own location."""
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_table(api, "db", "secret")
    location = created["metadata"]["location"]
    copy = api.warehouse_dir / "kept" / "copy.metadata.json"
    copy.parent.mkdir(parents=True)
    shutil.copyfile(local(created["metadata-location"]), copy)
    dropped = api.delete("/namespaces/db/tables/secret", params={"purgeRequested": "true"})
    assert dropped.status_code == 204
    [task] = purge_tasks(api)
    assert task["status"] == "pending"
    return location, f"file://{copy}", created["metadata-location"]


def test_register_and_create_at_a_location_whose_purge_is_open_are_refused(api: Api) -> None:
    location, copy, _ = dropped_with_pending_purge(api)
    secret_id = str(UUID(location.rsplit("-", 1)[1]))  # as a dashed id, not in the path
    refused = [
        api.post("/namespaces/db/register", {"name": "back", "metadata-location": copy}),
        api.post("/namespaces/db/tables", {"name": "same", "schema": SCHEMA, "location": location}),
        api.post(
            "/namespaces/db/tables",
            {"name": "below", "schema": SCHEMA, "location": f"{location}/data"},
        ),
        api.post(
            "/namespaces/db/tables",
            {"name": "above", "schema": SCHEMA, "location": location.rsplit("/", 1)[0]},
        ),
    ]
    create_table(api, "db", "other")
    moved = api.post(
        "/namespaces/db/tables/other",
        {"updates": [{"action": "set-location", "location": f"{location}/moved"}]},
    )
    refused.append(moved)  # a commit moving another table into it
    for response in (*refused[:3], moved):
        assert_taken(response, secret_id)
    assert_taken(refused[3], secret_id, "secret")  # the caller's location named no table
    # A worker has started the purge (running, deleting): still taken.
    catalog = api.services.catalog
    [task] = purge_tasks(api)
    assert catalog.tasks.start_task(UUID(task["task-id"]), "w1") is not None
    assert purge_tasks(api)[0]["status"] == "running"
    assert_taken(
        api.post("/namespaces/db/register", {"name": "back", "metadata-location": copy}),
    )
    assert catalog.tasks.run_task(UUID(task["task-id"]), "w1", lambda: True) == "succeeded"
    assert not local(location).joinpath("metadata").exists() or not any(
        local(location).joinpath("metadata").iterdir()
    ), "the purge deleted the table's files"
    # The purge is over: the location is free again.
    back = api.post("/namespaces/db/register", {"name": "back", "metadata-location": copy})
    assert back.status_code == 200, back.text
    assert api.delete("/namespaces/db/tables/back").status_code == 204
    made = api.post(
        "/namespaces/db/tables", {"name": "same", "schema": SCHEMA, "location": location}
    )
    assert made.status_code == 200, made.text


def test_another_replica_refuses_too(api: Api, replica: TestClient) -> None:
    location, copy, _ = dropped_with_pending_purge(api)
    base = f"/catalog/v1/{api.prefix}/namespaces/db"
    assert_taken(
        replica.post(f"{base}/register", json={"name": "back", "metadata-location": copy}),
    )
    assert_taken(
        replica.post(
            f"{base}/tables", json={"name": "same", "schema": SCHEMA, "location": location}
        ),
    )
    assert api.run_tasks() == 1
    back = replica.post(f"{base}/register", json={"name": "back", "metadata-location": copy})
    assert back.status_code == 200, back.text


def test_a_failed_purge_frees_the_location(api: Api) -> None:
    """A purge that has given up deletes nothing more: its location can be used."""
    catalog = api.services.catalog
    catalog.lifecycle.task_max_attempts = 1
    _, copy, metadata_location = dropped_with_pending_purge(api)
    local(metadata_location).write_bytes(b"not json")  # the purge cannot read what to delete
    catalog.app.metadata_cache = type(catalog.app.metadata_cache)()
    assert api.run_tasks() == 1
    assert purge_tasks(api)[0]["status"] == "failed"
    back = api.post("/namespaces/db/register", {"name": "back", "metadata-location": copy})
    assert back.status_code == 200, back.text
