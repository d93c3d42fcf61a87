"""What a second reader of the containment work found, each as a test that failed before
its fix: locations that changed on a second parse, purge after set-location, secrets in
recorded Idempotency-Key answers, keys on multi-append drops, roots reached through links,
hostile registered documents, registered files rewritten later, client-chosen ids taking the
catalog's own, nested tables created concurrently, and endpoints carrying credentials."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from icelog.api.idempotency import KEYED_ROUTES, _recordable
from icelog.domain.identifiers import NamespaceName, TabularName, tabular_claim_id
from tests.integration.conftest import SCHEMA, Api, create_table
from tests.support.hostile import (
    assert_error,
    assert_log_verifies,
    catalog,
    local_path,
    main_ref,
    snapshot_update,
    unchecked_s3_warehouse,
)

ROOT = "/management/v1"


@pytest.fixture
def db(api: Api) -> Any:
    assert api.post("/namespaces", {"namespace": ["db"]}).status_code == 200
    yield api
    assert_log_verifies(api.services)


def purge(api: Api, name: str) -> None:
    assert (
        api.delete(f"/namespaces/db/tables/{name}", params={"purgeRequested": "true"}).status_code
        == 204
    )
    api.run_tasks()


def test_a_location_with_trailing_white_space_is_refused(db: Api) -> None:
    """`<t1>/ ` parsed as a new place but was stored as t1's: t2's purge then deleted t1's
    current metadata file."""
    t1 = create_table(db, "db", "t1")
    for suffix in (" /", "\u00a0", "/ /"):
        response = db.post(
            "/namespaces/db/tables",
            {"name": "t2", "schema": SCHEMA, "location": t1["metadata"]["location"] + suffix},
        )
        assert_error(response, 400)
    assert local_path(db.get("/namespaces/db/tables/t1").json()["metadata-location"]).exists()


def test_purge_after_set_location_stays_in_the_new_location(db: Api) -> None:
    t1 = create_table(db, "db", "t1")
    old = t1["metadata"]["location"]
    moved = f"file://{db.warehouse_dir}/moved-t1"
    assert db.post("/namespaces/db/tables/t1", {"updates": [
        {"action": "set-location", "location": moved}]}).status_code == 200  # fmt: skip
    t2 = create_table(db, "db", "t2", location=f"{old}/victim")  # the old place is free
    victim = t2["metadata-location"]
    commit = db.post(
        "/namespaces/db/tables/t1",
        {"updates": [snapshot_update(1, victim, 1), main_ref(1)]},
    )
    assert commit.status_code == 200, commit.text
    purge(db, "t1")
    assert local_path(victim).exists(), "t1's purge deleted t2's metadata file"
    assert local_path(db.get("/namespaces/db/tables/t2").json()["metadata-location"]).exists()


def test_recorded_answers_never_hold_storage_configuration() -> None:
    staged = json.dumps(
        {
            "metadata": {"location": "s3://b/t"},
            "config": {"s3.secret-access-key": "SECRET", "s3.session-token": "TOKEN"},
            "storage-credentials": [{"prefix": "s3://b/t", "config": {"k": "SECRET"}}],
        }
    ).encode()
    body, location = _recordable(staged)  # stage-create: no metadata-location
    assert location is None and "SECRET" not in body and "TOKEN" not in body
    assert json.loads(body)["config"] == {}


def test_signing_and_metrics_take_no_idempotency_key() -> None:
    templates = {template for _method, template in KEYED_ROUTES}
    assert not any(t.endswith(("/sign", "/metrics", "/credentials")) for t in templates)


def test_a_cascade_drop_retried_with_its_key_drops_what_was_left(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first append of a cascade drop used to land the key: a retry after a failure
    half-way answered 204 while the namespace and a table were still there."""
    db.post("/namespaces", {"namespace": ["db", "inner"]})
    for name in ("t1", "t2"):
        response = db.post("/namespaces/db%1Finner/tables", {"name": name, "schema": SCHEMA})
        assert response.status_code == 200
    catalog_ = db.services.catalog
    drop_table = catalog_.lifecycle.drop_table
    calls: list[int] = []

    def second_fails(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            from icelog.domain.errors import ServiceUnavailableError

            raise ServiceUnavailableError("timed out between objects")
        return drop_table(*args, **kwargs)

    monkeypatch.setattr(catalog_.lifecycle, "drop_table", second_fails)
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    first = db.delete("/namespaces/db%1Finner", params={"recursive": "true"}, headers=headers)
    assert first.status_code == 503
    monkeypatch.undo()
    retry = db.delete("/namespaces/db%1Finner", params={"recursive": "true"}, headers=headers)
    assert retry.status_code == 204
    assert db.get("/namespaces/db%1Finner").status_code == 404, "the retry finished the drop"


def test_allowed_roots_are_checked_where_links_lead(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir()
    allowed = tmp_path / "data"
    for api in catalog("sqlite", tmp_path, file_warehouse_roots=(f"file://{allowed}",)):
        link = allowed / "warehouse" / "scratch" / "evil"
        link.parent.mkdir(parents=True)
        link.symlink_to(private)
        refused = api.client.post(
            f"{ROOT}/warehouse",
            json={
                "warehouse-name": "evil",
                "storage-profile": {"type": "file", "base-location": f"file://{link}"},
            },
        )
        assert "ICELOG_FILE_WAREHOUSE_ROOTS" in assert_error(refused, (400, 409))


@pytest.mark.parametrize(
    "change",
    [
        {"format-version": "x"},
        {"schemas": [1]},
        {"properties": [1]},
        {"refs": [1]},
        {"snapshots": {}},
        {"metadata-log": [1]},
        {"partition-specs": [{"fields": []}]},
        {"properties": {"s3.secret-access-key": "AKIA-SECRET"}},
        {"current-schema-id": 99},
    ],
)
def test_a_hostile_registered_document_is_refused(db: Api, change: dict[str, Any]) -> None:
    created = create_table(db, "db", "source")
    assert db.delete("/namespaces/db/tables/source").status_code == 204
    document = {**created["metadata"], **change}
    path = local_path(created["metadata-location"]).parent / "00009-hostile.metadata.json"
    path.write_text(json.dumps(document))
    response = db.post(
        "/namespaces/db/register", {"name": "r", "metadata-location": f"file://{path}"}
    )
    message = assert_error(response, 400)
    assert "AKIA-SECRET" not in message


def test_a_registered_file_rewritten_later_does_not_change_the_table(db: Api) -> None:
    created = create_table(db, "db", "source")
    location = created["metadata-location"]
    assert db.delete("/namespaces/db/tables/source").status_code == 204
    assert (
        db.post("/namespaces/db/register", {"name": "r", "metadata-location": location}).status_code
        == 200
    )
    path = local_path(location)
    rewritten = json.loads(path.read_text())
    rewritten["properties"]["owner"] = "mallory"
    path.unlink()
    path.write_text(json.dumps(rewritten))
    db.services.catalog.app.metadata_cache = type(
        db.services.catalog.app.metadata_cache
    )()  # a restart
    commit = db.post("/namespaces/db/tables/r", {"updates": [
        {"action": "set-properties", "updates": {"k": "v"}}]})  # fmt: skip
    assert commit.status_code == 200
    assert "owner" not in commit.json()["metadata"]["properties"], "the file was read again"


def test_a_client_chosen_table_uuid_never_takes_an_id_the_catalog_derives(db: Api) -> None:
    wid = db.services.warehouse_for_prefix(db.prefix)
    squatted = tabular_claim_id(wid, TabularName(NamespaceName(("db",)), "future"))
    staged = db.post("/namespaces/db/tables", {"name": "t", "schema": SCHEMA, "stage-create": True})
    metadata = staged.json()["metadata"]
    updates = [
        {"action": "assign-uuid", "uuid": str(squatted)},
        {"action": "upgrade-format-version", "format-version": metadata["format-version"]},
        {"action": "add-schema", "schema": metadata["schemas"][0]},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "set-location", "location": metadata["location"]},
    ]
    made = db.post(
        "/namespaces/db/tables/t", {"requirements": [{"type": "assert-create"}], "updates": updates}
    )
    assert made.status_code == 200, made.text
    assert create_table(db, "db", "future")["metadata"]["table-uuid"] != str(squatted)


def stale_location_index_once(db: Api, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The command's own overlap check answers "free" the first time (as if the other
    table had not landed yet), truthfully after: the append's guard must refuse. The list
    grows by one per check."""
    index = db.services.catalog.ports.location_index
    calls: list[int] = []

    def stale_once(warehouse_id: str, location: str) -> str | None:
        calls.append(1)
        return None if len(calls) == 1 else index(warehouse_id, location)

    monkeypatch.setattr(db.services.catalog.ports, "location_index", stale_once)
    return calls


def test_concurrent_nested_locations_cannot_both_land(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both creates passed the command's check (read model) before either landed: the
    second is refused inside the append, and its retry answers 409."""
    db.post("/namespaces", {"namespace": ["other"]})
    outer = f"file://{db.warehouse_dir}/shared"
    create_table(db, "db", "outer", location=outer)
    calls = stale_location_index_once(db, monkeypatch)
    inner = db.post(
        "/namespaces/other/tables",
        {"name": "inner", "schema": SCHEMA, "location": f"{outer}/inner"},
    )
    assert_error(inner, 409, "LocationAlreadyTakenException")
    assert len(calls) >= 2, "the append was refused and the command checked again"


def test_a_location_under_a_soft_dropped_table_is_refused_inside_the_append(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A soft-dropped table keeps its location (undrop would bring it back): the append's
    own check covers those rows as well, in the same statement as the live ones."""
    profile = {"delete-profile": {"type": "soft", "expiration-seconds": 3600}}
    set_profile = db.client.post(f"{ROOT}/warehouse/{db.prefix}/delete-profile", json=profile)
    assert set_profile.status_code == 204, set_profile.text
    outer = f"file://{db.warehouse_dir}/kept"
    create_table(db, "db", "kept", location=outer)
    assert db.delete("/namespaces/db/tables/kept").status_code == 204
    calls = stale_location_index_once(db, monkeypatch)
    inner = db.post(
        "/namespaces/db/tables", {"name": "inner", "schema": SCHEMA, "location": f"{outer}/x"}
    )
    assert_error(inner, 409, "LocationAlreadyTakenException")
    assert len(calls) >= 2, "the append was refused and the command checked again"


def test_s3_endpoints_carry_no_credentials_query_or_fragment(db: Api) -> None:
    for endpoint in (
        "http://AKIAX:hunter2@minio:9000",
        "http://minio:9000/?x=1",
        "http://minio:9000/#f",
    ):
        response = db.client.post(
            f"{ROOT}/warehouse",
            json=unchecked_s3_warehouse("w", endpoint),
        )
        message = assert_error(response, 400)
        assert "hunter2" not in message
