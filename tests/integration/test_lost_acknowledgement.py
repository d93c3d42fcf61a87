"""A commit whose append landed but whose acknowledgement was lost (the connection died
after PostgreSQL committed; the library's retry of the insert then collides with it) is
reported as done, and its metadata file is kept — not a 409 for a commit that happened."""

from __future__ import annotations

from typing import Any

import pytest

from icelog.commands.group_commit import ConcurrentChange
from icelog.domain.ports import FileIO
from tests.integration.conftest import Api, create_table


def lose_first_acknowledgement(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    catalog = api.services.catalog
    original = catalog.app.save_all
    lost: list[int] = []

    def save_all(*aggregates: Any, hints: dict[str, bytes] | None = None) -> int:
        position = original(*aggregates, hints=hints)
        if not lost:
            lost.append(position)
            raise ConcurrentChange("the append's acknowledgement was lost")
        return position

    monkeypatch.setattr(catalog.app, "save_all", save_all)
    return lost


def test_a_commit_that_landed_is_acknowledged(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    created = create_table(api, "db", "t")
    lost = lose_first_acknowledgement(api, monkeypatch)
    snapshot = {
        "snapshot-id": 7,
        "sequence-number": 1,
        "timestamp-ms": 1_700_000_000_000,
        "manifest-list": "file:///x/snap-7.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    response = api.post(
        "/namespaces/db/tables/t",
        {
            "requirements": [
                {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}
            ],
            "updates": [
                {"action": "add-snapshot", "snapshot": snapshot},
                {
                    "action": "set-snapshot-ref",
                    "ref-name": "main",
                    "type": "branch",
                    "snapshot-id": 7,
                },
            ],
        },
    )
    assert lost, "the acknowledgement was not lost: the test proves nothing"
    assert response.status_code == 200, response.text
    location = response.json()["metadata-location"]
    assert location != created["metadata-location"]
    loaded = api.get("/namespaces/db/tables/t").json()
    assert loaded["metadata-location"] == location
    assert loaded["metadata"]["current-snapshot-id"] == 7
    # The file of the commit that happened is still there.
    assert _file_io(api).exists(location)


def test_a_transaction_that_landed_is_acknowledged(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "a")
    create_table(api, "db", "b")
    lost = lose_first_acknowledgement(api, monkeypatch)
    change = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    response = api.post(
        "/transactions/commit",
        {
            "table-changes": [
                {"identifier": {"namespace": ["db"], "name": name}, **change} for name in "ab"
            ]
        },
    )
    assert lost
    assert response.status_code == 204, response.text
    for name in "ab":
        loaded = api.get(f"/namespaces/db/tables/{name}").json()
        assert loaded["metadata"]["properties"]["k"] == "v"
        assert _file_io(api).exists(loaded["metadata-location"])


def _file_io(api: Api) -> FileIO:
    catalog = api.services.catalog
    return catalog.app.file_io(
        catalog.app.storage_profile(api.services.warehouse_for_prefix(api.prefix))
    )
