"""Creates in one namespace: the first attempt uses the namespace as this process's last
create left it (commands/tables.py create_table). A namespace changed meanwhile, here or on
another replica, never lets a stale create land; a change made here costs no extra attempt."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.domain.identifiers import NamespaceName, namespace_id
from icelog.domain.namespace import Namespace
from tests.integration.conftest import SCHEMA, Api, create_table, replica_settings


def count_conflicts(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Appends that lost to a newer version and were retried, as they happen."""
    seen: list[int] = []
    monkeypatch.setattr(api.services.catalog, "on_commit_conflict", lambda: seen.append(1))
    return seen


def children(api: Api) -> dict[str, int]:
    wid = api.services.warehouse_for_prefix(api.prefix)
    ns = api.services.catalog.get_or_none(namespace_id(wid, NamespaceName(("db",))), Namespace)
    assert ns is not None
    return dict(ns.children)


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


def test_a_namespace_changed_on_another_replica_does_not_let_a_stale_create_land(
    api: Api, replica: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = count_conflicts(api, monkeypatch)
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "a")
    create_table(api, "db", "b")  # this process now keeps the namespace as b left it
    base = f"/catalog/v1/{api.prefix}/namespaces/db"
    # Another replica adds a table and changes the properties: two versions further.
    made = replica.post(f"{base}/tables", json={"name": "c", "schema": SCHEMA})
    assert made.status_code == 200, made.text
    props = replica.post(f"{base}/properties", json={"updates": {"owner": "x"}})
    assert props.status_code == 200, props.text
    assert not seen
    create_table(api, "db", "d")
    assert len(seen) == 1, "the first attempt used the namespace as it was here, and lost"
    assert children(api)["table"] == 4
    names = api.get("/namespaces/db/tables").json()["identifiers"]
    assert sorted(n["name"] for n in names) == ["a", "b", "c", "d"]
    # A namespace dropped on the other replica: the create is refused, not landed.
    for name in ("a", "b", "c", "d"):
        assert replica.delete(f"{base}/tables/{name}?purgeRequested=true").status_code == 204
    assert replica.delete(base).status_code == 204
    refused = api.post("/namespaces/db/tables", {"name": "e", "schema": SCHEMA})
    assert refused.status_code == 404, refused.text


def test_a_taken_name_is_refused_without_a_failed_append(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim is always read: 409 at once, no conflicting append (which would also
    leave a gap in the log's positions on PostgreSQL)."""
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "a")
    seen = count_conflicts(api, monkeypatch)
    recorder = api.services.catalog.recorder
    head = recorder.max_notification_id() or 0
    taken = api.post("/namespaces/db/tables", {"name": "a", "schema": SCHEMA})
    assert taken.status_code == 409, taken.text
    create_table(api, "db", "b")
    # A change to the namespace made here: the next create does not lose an attempt.
    api.post("/namespaces/db/properties", {"updates": {"owner": "x"}})
    create_table(api, "db", "c")
    positions = [
        n.id for n in recorder.select_notifications(start=head, limit=100, inclusive_of_start=False)
    ]
    assert positions == list(range(head + 1, head + 1 + len(positions))), positions
    assert children(api)["table"] == 3
    assert not seen, "no attempt was lost to a conflict"
