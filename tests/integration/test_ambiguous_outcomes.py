"""Ambiguous outcomes. A command decides what to clean up from its KNOWN outcome: files are
deleted only when the append certainly did not happen, a landed append is answered as
landed; an Idempotency-Key gives one outcome across replicas; reads never mix versions;
register reads the file as it is now. After every fault the log, the read model and the
metadata files still verify, and every table has a readable current metadata file."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.commands.group_commit import GroupCommitter
from icelog.commands.tabular_values import Change
from tests.integration.conftest import SCHEMA, Api, _api, create_table
from tests.support.hostile import (
    assert_log_verifies,
    catalog,
    local_path,
    unchecked_s3_warehouse,
)
from tests.support.postgres import TEST_SECRETS_KEY


class DatabaseLost(Exception):
    """Stands for a connection lost after COMMIT (the driver's error)."""


def snapshot_commit(snapshot_id: int, parent: int | None) -> dict[str, Any]:
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": [
            {
                "action": "add-snapshot",
                "snapshot": {
                    "snapshot-id": snapshot_id,
                    "parent-snapshot-id": parent,
                    "sequence-number": snapshot_id,
                    "timestamp-ms": 1_700_000_000_000 + snapshot_id,
                    "manifest-list": f"file:///nowhere/snap-{snapshot_id}.avro",
                    "summary": {"operation": "append"},
                    "schema-id": 0,
                },
            },
            {
                "action": "set-snapshot-ref",
                "ref-name": "main",
                "type": "branch",
                "snapshot-id": snapshot_id,
            },
        ],
    }


def fail_appends(
    api: Api, monkeypatch: pytest.MonkeyPatch, *, after_commit: bool, times: int = 1
) -> list[int]:
    """The next `times` appends raise: after the database committed them (their
    acknowledgement lost) or before (nothing written)."""
    recorder = api.services.catalog.app.recorder
    original = recorder.insert_events
    failed: list[int] = []

    def insert_events(*args: Any, **kwargs: Any) -> Any:
        if len(failed) >= times:
            return original(*args, **kwargs)
        failed.append(1)
        if after_commit:
            original(*args, **kwargs)
        raise DatabaseLost("connection lost")

    monkeypatch.setattr(recorder, "insert_events", insert_events)
    return failed


def current_files(api: Api) -> list[Path]:
    """Every live table's current metadata file (each must exist and parse)."""
    found = []
    for ns in api.get("/namespaces").json()["namespaces"]:
        for ident in api.get(f"/namespaces/{'%1F'.join(ns)}/tables").json()["identifiers"]:
            name = f"/namespaces/{'%1F'.join(ns)}/tables/{ident['name']}"
            loaded = api.get(name)
            assert loaded.status_code == 200, loaded.text
            path = local_path(loaded.json()["metadata-location"])
            assert (
                json.loads(path.read_text())["table-uuid"]
                == loaded.json()["metadata"]["table-uuid"]
            )
            found.append(path)
    return found


@pytest.fixture
def db(api: Api) -> Iterator[Api]:
    assert api.post("/namespaces", {"namespace": ["db"]}).status_code == 200
    yield api
    current_files(api)
    assert_log_verifies(api.services)


# -- 1. files follow the known outcome ------------------------------------------------------


def test_a_commit_whose_acknowledgement_is_lost_is_answered_as_landed(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_table(db, "db", "t")
    failed = fail_appends(db, monkeypatch, after_commit=True)
    response = db.post("/namespaces/db/tables/t", snapshot_commit(1, None))
    assert failed and response.status_code == 200, response.text
    assert local_path(response.json()["metadata-location"]).exists()
    assert db.get("/namespaces/db/tables/t").json()["metadata"]["current-snapshot-id"] == 1


def test_a_transaction_that_landed_keeps_its_files(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b"):
        create_table(db, "db", name)
    failed = fail_appends(db, monkeypatch, after_commit=True)
    body = {
        "table-changes": [
            {"identifier": {"namespace": ["db"], "name": n}, **snapshot_commit(5, None)}
            for n in ("a", "b")
        ]
    }
    response = db.post("/transactions/commit", body)
    assert failed and response.status_code == 204, response.text
    for name in ("a", "b"):
        loaded = db.get(f"/namespaces/db/tables/{name}").json()
        assert loaded["metadata"]["current-snapshot-id"] == 5
        assert local_path(loaded["metadata-location"]).exists(), "the landed file was deleted"


def test_a_transaction_that_did_not_land_leaves_no_file(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b"):
        create_table(db, "db", name)
    before = {p.name for p in db.warehouse_dir.rglob("*.metadata.json")}
    failed = fail_appends(db, monkeypatch, after_commit=False)
    body = {
        "table-changes": [
            {"identifier": {"namespace": ["db"], "name": n}, **snapshot_commit(5, None)}
            for n in ("a", "b")
        ]
    }
    response = db.post("/transactions/commit", body)
    assert failed and response.status_code >= 500
    assert {p.name for p in db.warehouse_dir.rglob("*.metadata.json")} == before
    for name in ("a", "b"):
        assert db.get(f"/namespaces/db/tables/{name}").json()["metadata"]["snapshots"] == []


def test_an_unknown_outcome_keeps_the_files_and_says_so(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_table(db, "db", "t")
    failed = fail_appends(db, monkeypatch, after_commit=True)
    recorder = db.services.catalog.app.recorder
    select = recorder.select_events

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        if failed:  # the database is gone once the append's acknowledgement was lost
            raise DatabaseLost("still down")
        return select(*args, **kwargs)

    monkeypatch.setattr(recorder, "select_events", unreadable)
    response = db.post("/namespaces/db/tables/t", snapshot_commit(1, None))
    assert response.status_code == 500, response.text
    assert response.json()["error"]["type"] == "CommitStateUnknownException"
    monkeypatch.undo()
    # It did land: the table names the new file, and the file is there.
    loaded = db.get("/namespaces/db/tables/t").json()
    assert loaded["metadata"]["current-snapshot-id"] == 1
    assert local_path(loaded["metadata-location"]).exists()


@pytest.mark.parametrize("route", ["create", "register", "view-create", "view-replace"])
def test_every_path_answers_a_landed_append_as_landed(
    db: Api, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    view = {
        "name": "v",
        "schema": SCHEMA,
        "view-version": {
            "version-id": 1,
            "schema-id": 7,
            "timestamp-ms": 1_700_000_000_000,
            "summary": {},
            "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
            "default-namespace": ["db"],
        },
        "properties": {},
    }
    if route == "register":
        source = create_table(db, "db", "source")
        assert db.delete("/namespaces/db/tables/source").status_code == 204
    if route == "view-replace":
        assert db.post("/namespaces/db/views", view).status_code == 200
    failed = fail_appends(db, monkeypatch, after_commit=True)
    if route == "create":
        response = db.post("/namespaces/db/tables", {"name": "t", "schema": SCHEMA})
    elif route == "register":
        response = db.post(
            "/namespaces/db/register",
            {"name": "t", "metadata-location": source["metadata-location"]},
        )
    elif route == "view-create":
        response = db.post("/namespaces/db/views", view)
    else:
        response = db.post(
            "/namespaces/db/views/v",
            {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
        )
    assert failed and response.status_code == 200, response.text
    assert local_path(response.json()["metadata-location"]).exists()


def test_a_failure_after_the_insert_does_not_fail_the_saves_that_landed(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_table(db, "db", "t")

    def snapshots_fail(self: Any, processing: Any) -> None:
        raise DatabaseLost("snapshot store unreachable")

    app = db.services.catalog.app
    monkeypatch.setattr(type(app), "_take_snapshots", snapshots_fail, raising=True)
    response = db.post("/namespaces/db/tables/t", snapshot_commit(1, None))
    assert response.status_code == 200, response.text
    assert isinstance(app._committer, GroupCommitter)


# -- 2. one outcome per Idempotency-Key, across replicas ------------------------------------


def _replica(api: Api) -> Services:
    env = {"ICELOG_DATA_DIR": str(api.services.settings.data_dir)}
    if api.services.settings.database_url:
        env["ICELOG_DATABASE_URL"] = api.services.settings.database_url
        env["ICELOG_SECRETS_KEY"] = TEST_SECRETS_KEY
    return Services.build(Settings.from_env(env))


@pytest.mark.postgres
def test_one_key_sent_to_two_replicas_at_once_gets_one_outcome(pg_api: Api, tmp_path: Path) -> None:
    """The same key and body sent at the same moment to two replicas (20 pairs): both
    answer 200 with the same body, and the commit landed once."""
    api = pg_api
    assert api.post("/namespaces", {"namespace": ["db"]}).status_code == 200
    create_table(api, "db", "t")
    replica = _replica(api)
    try:
        with TestClient(create_app(replica.settings, replica)) as other:
            url = f"/catalog/v1/{api.prefix}/namespaces/db/tables/t"
            parent = None
            for n in range(1, 21):
                body, headers = snapshot_commit(n, parent), {"Idempotency-Key": str(uuid.uuid4())}
                start = threading.Barrier(2)
                with ThreadPoolExecutor(2) as pool:
                    sent = [
                        pool.submit(_send_together, start, client, url, body, headers)
                        for client in (api.client, other)
                    ]
                    answers = [future.result() for future in sent]
                assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
                assert answers[0].json() == answers[1].json()
                parent = n
            loaded = api.get("/namespaces/db/tables/t").json()["metadata"]
            assert [s["snapshot-id"] for s in loaded["snapshots"]] == list(range(1, 21))
    finally:
        replica.close()
    assert_log_verifies(api.services)


def test_a_retry_after_the_claimant_died_is_answered_from_the_log(
    db: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command landed, then its request died before recording its answer: a retry on
    another replica answers 200 with the landed commit (not 409, which Java clients read
    as "failed": they would re-apply the append or delete its files)."""
    create_table(db, "db", "t")
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    catalog = db.services.catalog
    original = catalog.idempotency.complete_idempotency

    def dies(*args: Any, **kwargs: Any) -> Any:
        raise DatabaseLost("the process died before recording")

    monkeypatch.setattr(catalog.idempotency, "complete_idempotency", dies)
    first = db.post("/namespaces/db/tables/t", snapshot_commit(1, None), headers=headers)
    assert first.status_code == 200
    monkeypatch.setattr(catalog.idempotency, "complete_idempotency", original)
    monkeypatch.setattr("icelog.api.idempotency._LANDED_GRACE_MS", 0)
    position = db.position()
    retry = db.post("/namespaces/db/tables/t", snapshot_commit(1, None), headers=headers)
    assert retry.status_code == 200, retry.text
    assert retry.json()["metadata-location"] == first.json()["metadata-location"]
    assert retry.json()["metadata"] == first.json()["metadata"]
    again = db.post("/namespaces/db/tables/t", snapshot_commit(1, None), headers=headers)
    assert again.json() == retry.json()
    assert db.position() == position + 1, "only the answer was recorded"


def test_a_taken_over_claim_can_never_land_twice(db: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A claimant slower than its lease: another request takes the key over and lands the
    commit; when the first one's append comes, it conflicts on the key and it answers with
    the other's outcome instead of applying the change a second time."""
    create_table(db, "db", "t")
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    catalog = db.services.catalog
    commit = catalog.tables.commit_table
    proceed, staged = threading.Event(), threading.Event()

    def slow_commit(*args: Any, **kwargs: Any) -> Any:
        staged.set()  # the key is claimed; the command has not appended yet
        assert proceed.wait(30)
        return commit(*args, **kwargs)

    monkeypatch.setattr(catalog.tables, "commit_table", slow_commit)
    url = "/namespaces/db/tables/t"
    replica = _replica(db)  # the retry arrives at another replica
    try:
        with (
            ThreadPoolExecutor(1) as pool,
            TestClient(create_app(replica.settings, replica)) as other,
        ):
            first = pool.submit(db.post, url, snapshot_commit(1, None), headers=headers)
            assert staged.wait(30)
            # Its lease runs out (as when a process stalls far beyond the request timeout).
            record = catalog.idempotency.find_idempotency(headers["Idempotency-Key"])
            assert record is not None
            expired = record.lease_until_ms + 1
            monkeypatch.setattr("icelog.commands.idempotency.now_ms", lambda: expired)
            second = other.post(
                f"/catalog/v1/{db.prefix}{url}", json=snapshot_commit(1, None), headers=headers
            )
            proceed.set()
            answered = first.result(timeout=60)
    finally:
        replica.close()
    assert second.status_code == 200, second.text
    assert answered.status_code == 200, answered.text
    assert answered.json() == second.json()
    snapshots = db.get(url).json()["metadata"]["snapshots"]
    assert [s["snapshot-id"] for s in snapshots] == [1], "applied once"


def test_recorded_answers_hold_no_storage_configuration(db: Api) -> None:
    """A table answer's config may carry vended credentials: never in the log."""
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    created = db.post("/namespaces/db/tables", {"name": "t", "schema": SCHEMA}, headers=headers)
    assert created.status_code == 200
    record = db.services.catalog.idempotency.find_idempotency(headers["Idempotency-Key"])
    assert record is not None and record.has_outcome
    stored = json.loads(record.body)
    assert "metadata" not in stored and stored.get("config") == {}
    replayed = db.post("/namespaces/db/tables", {"name": "t", "schema": SCHEMA}, headers=headers)
    assert replayed.json() == created.json()


# -- 3. reads never mix versions; register reads the file as it is ---------------------------


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Api]:
    for api in _api("sqlite", tmp_path):
        assert api.post("/namespaces", {"namespace": ["db"]}).status_code == 200
        yield api
        assert_log_verifies(api.services)


def test_a_load_racing_a_commit_never_pairs_one_version_with_another(sqlite_db: Api) -> None:
    """SQLite's reader reads the current version, then the document on a cache miss: a
    commit landing between the two reads must not pair one version's location with
    another's document. (PostgreSQL's reader takes both from one row in one query.)"""
    db = sqlite_db
    create_table(db, "db", "t")
    reader = db.services.reader
    conn = reader._conn  # type: ignore[attr-defined]
    commits = iter(range(1, 100))
    parent: list[int | None] = [None]

    class Racing:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def execute(self, sql: str, params: Any = ()) -> Any:
            found = self.inner.execute(sql, params)
            if "metadata_location, version FROM" in sql and "WHERE warehouse_id" in sql:
                rows = found.fetchall()
                n = next(commits)
                db.services.catalog.tables.commit_table(  # lands between the two reads
                    Change(_ctx(), _wid(db), _name("t"), *_parts(snapshot_commit(n, parent[0])))
                )
                parent[0] = n
                return _Rows(rows)
            return found

    reader._conn = Racing(conn)  # type: ignore[attr-defined]
    try:
        for _ in range(5):
            loaded = db.get("/namespaces/db/tables/t").json()
            on_disk = json.loads(local_path(loaded["metadata-location"]).read_text())
            assert on_disk == loaded["metadata"], "location and document of different versions"
    finally:
        reader._conn = conn  # type: ignore[attr-defined]


def test_register_reads_the_file_as_it_is_now(db: Api) -> None:
    created = create_table(db, "db", "t")
    location = created["metadata-location"]
    assert db.delete("/namespaces/db/tables/t").status_code == 204
    first = db.post("/namespaces/db/register", {"name": "r", "metadata-location": location})
    assert first.status_code == 200
    assert db.delete("/namespaces/db/tables/r").status_code == 204
    path = local_path(location)
    document = json.loads(path.read_text())
    document["properties"]["rewritten"] = "yes"
    path.unlink()
    path.write_text(json.dumps(document))
    again = db.post("/namespaces/db/register", {"name": "r", "metadata-location": location})
    assert again.status_code == 200, again.text
    assert again.json()["metadata"]["properties"]["rewritten"] == "yes"
    assert db.get("/namespaces/db/tables/r").json()["metadata"]["properties"]["rewritten"] == "yes"


# -- helpers for driving commands directly ----------------------------------------------------


def _send_together(
    start: threading.Barrier, client: TestClient, url: str, body: Any, headers: Any
) -> Any:
    start.wait()
    return client.post(url, json=body, headers=headers)


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None


def _ctx() -> Any:
    from icelog.domain.context import RequestContext

    return RequestContext(actor="test", request_id=str(uuid.uuid4()))


def _wid(api: Api) -> Any:
    return api.services.warehouse_for_prefix(api.prefix)


def _name(table: str) -> Any:
    from icelog.domain.identifiers import NamespaceName, TabularName

    return TabularName(NamespaceName(("db",)), table)


def _parts(body: dict[str, Any]) -> tuple[Any, Any]:
    return body["requirements"], body["updates"]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_warehouse_whose_append_landed_keeps_its_credential(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sealed credential was deleted on any failure, also after the append landed: the
    warehouse then named a credential that was gone."""
    for api in catalog(backend, tmp_path, skip_storage_validation=True):
        failed = fail_appends(api, monkeypatch, after_commit=True)
        created = api.client.post(
            "/management/v1/warehouse",
            json=unchecked_s3_warehouse("lake", "http://127.0.0.1:9"),
        )
        assert failed and created.status_code in (200, 201), created.text
        profile = api.client.get(
            f"/management/v1/warehouse/{created.json()['warehouse-id']}"
        ).json()["storage-profile"]
        secrets = api.services.catalog.app.secrets
        assert secrets is not None and secrets.get(UUID(profile["credential-id"])) is not None
        monkeypatch.undo()
        assert_log_verifies(api.services)
