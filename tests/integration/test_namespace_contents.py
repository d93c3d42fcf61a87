"""What a namespace holds is checked in the append (ADR 0018), not counted on the namespace:
creates in one namespace never conflict with each other or with changes to the namespace,
even on another replica; a create in a namespace dropped meanwhile is refused (404, nothing
landed, its metadata file removed), and a drop of a namespace that holds something fails
in the append even when the command's own check passed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.commands.group_commit import ConcurrentChange
from icelog.domain.identifiers import NamespaceName, namespace_id
from icelog.domain.namespace import Namespace
from tests.integration.conftest import SCHEMA, Api, create_table, replica_settings


def count_conflicts(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Appends that lost to a newer version and were retried, as they happen."""
    seen: list[int] = []
    monkeypatch.setattr(api.services.catalog.app, "on_commit_conflict", lambda: seen.append(1))
    return seen


def topics_after(api: Api, head: int) -> list[str]:
    found = api.services.catalog.app.recorder.select_notifications(
        start=head, limit=1000, inclusive_of_start=False
    )
    return [n.topic for n in found]


def metadata_files(api: Api) -> set[Path]:
    return set(api.warehouse_dir.rglob("*.metadata.json"))


@pytest.fixture
def replica(api: Api) -> Iterator[TestClient]:
    """A second server on the same database (PostgreSQL) or file (SQLite)."""
    settings = replica_settings(api, {"ICELOG_TASK_WORKERS": "0"})
    services = Services.build(settings)
    try:
        with TestClient(create_app(settings, services)) as client:
            yield client
    finally:
        services.close()


def test_creates_land_whatever_another_replica_did_to_the_namespace_unless_it_dropped_it(
    api: Api, replica: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = count_conflicts(api, monkeypatch)
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "a")
    base = f"/catalog/v1/{api.prefix}/namespaces/db"
    made = replica.post(f"{base}/tables", json={"name": "c", "schema": SCHEMA})
    assert made.status_code == 200, made.text
    props = replica.post(f"{base}/properties", json={"updates": {"owner": "x"}})
    assert props.status_code == 200, props.text
    head = api.services.catalog.app.recorder.max_notification_id() or 0
    create_table(api, "db", "d")
    assert not seen, "nothing on the namespace to conflict on"
    assert not any("namespace" in t for t in topics_after(api, head)), "nothing written to it"
    names = api.get("/namespaces/db/tables").json()["identifiers"]
    assert sorted(n["name"] for n in names) == ["a", "c", "d"]

    # Dropped on the other replica: this process still believes it exists, so the first
    # attempt appends — and the append refuses it; the retry reads the namespace: 404.
    for name in ("a", "c", "d"):
        assert replica.delete(f"{base}/tables/{name}").status_code == 204
    assert replica.delete(base).status_code == 204
    files = metadata_files(api)
    head = api.services.catalog.app.recorder.max_notification_id() or 0
    refused = api.post("/namespaces/db/tables", {"name": "e", "schema": SCHEMA})
    assert refused.status_code == 404, refused.text
    assert len(seen) == 1, "the stale attempt failed in the append"
    assert topics_after(api, head) == []
    assert metadata_files(api) == files, "the refused attempt's metadata file is removed"
    again = api.post("/namespaces/db/tables", {"name": "f", "schema": SCHEMA})
    assert again.status_code == 404, again.text
    assert len(seen) == 1, "a namespace found gone is read again, not appended into"


def test_a_drop_that_passed_its_own_check_fails_in_the_append_when_the_namespace_holds_something(
    api: Api,
) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    api.post("/namespaces", {"namespace": ["db", "inner"]})
    catalog = api.services.catalog
    wid = api.services.warehouse_for_prefix(api.prefix)

    def drop_unchecked(levels: tuple[str, ...]) -> None:
        """What a drop racing a create does: its own check saw the namespace empty."""
        ns = catalog.app.get_or_none(namespace_id(wid, NamespaceName(levels)), Namespace)
        assert ns is not None
        ns.drop(actor="test", request_id="test")
        catalog.app.save_all(ns)

    with pytest.raises(ConcurrentChange):
        drop_unchecked(("db",))  # holds a namespace
    drop_unchecked(("db", "inner"))
    create_table(api, "db", "t")
    with pytest.raises(ConcurrentChange):
        drop_unchecked(("db",))  # holds a table
    assert api.get("/namespaces/db").status_code == 200


def test_drop_namespace_says_what_it_holds(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    api.post("/namespaces", {"namespace": ["db", "inner"]})
    create_table(api, "db", "t1")
    create_table(api, "db", "t2")
    refused = api.delete("/namespaces/db")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["type"] == "NamespaceNotEmptyException"
    message = refused.json()["error"]["message"]
    assert "2 table(s)" in message and "1 child namespace(s)" in message, message


def test_a_taken_name_is_refused_without_a_failed_append(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim is always read: 409 at once, no conflicting append (which would also
    leave a gap in the log's positions on PostgreSQL)."""
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "a")
    seen = count_conflicts(api, monkeypatch)
    recorder = api.services.catalog.app.recorder
    head = recorder.max_notification_id() or 0
    taken = api.post("/namespaces/db/tables", {"name": "a", "schema": SCHEMA})
    assert taken.status_code == 409, taken.text
    create_table(api, "db", "b")
    api.post("/namespaces/db/properties", {"updates": {"owner": "x"}})
    create_table(api, "db", "c")
    positions = [
        n.id for n in recorder.select_notifications(start=head, limit=100, inclusive_of_start=False)
    ]
    assert positions == list(range(head + 1, head + 1 + len(positions))), positions
    assert not seen, "no attempt was lost to a conflict"


def test_a_create_in_a_warehouse_deleted_on_another_replica_is_refused_by_the_append(
    api: Api, replica: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create uses this process's copy of its warehouse's storage without reading the
    warehouse: a live namespace (checked in the append) is what proves a live warehouse."""
    seen = count_conflicts(api, monkeypatch)
    root = api.services.settings.data_dir / "warehouses" / "w2"
    made = api.client.post(
        "/management/v1/warehouse",
        json={
            "warehouse-name": "w2",
            "storage-profile": {"type": "file", "base-location": f"file://{root}"},
            "delete-profile": {"type": "hard"},
        },
    )
    assert made.status_code in (200, 201), made.text
    wid = made.json()["warehouse-id"]
    base = f"/catalog/v1/{wid}/namespaces/db"
    assert api.client.post(f"/catalog/v1/{wid}/namespaces", json={"namespace": ["db"]}).is_success
    first = api.client.post(f"{base}/tables", json={"name": "a", "schema": SCHEMA})
    assert first.status_code == 200, first.text

    assert replica.delete(f"{base}/tables/a").status_code == 204
    assert replica.delete(base).status_code == 204
    gone = replica.delete(f"/management/v1/warehouse/{wid}")
    assert gone.status_code in (200, 204), gone.text
    files = set(root.rglob("*.metadata.json"))
    head = api.services.catalog.app.recorder.max_notification_id() or 0
    refused = api.client.post(f"{base}/tables", json={"name": "b", "schema": SCHEMA})
    assert refused.status_code == 404, refused.text
    assert len(seen) == 1, "the first attempt used what it knew, and failed in the append"
    assert topics_after(api, head) == []
    assert set(root.rglob("*.metadata.json")) == files, "its metadata file is removed"
