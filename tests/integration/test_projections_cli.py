"""`icelog projections verify | rebuild`: the read model against the log, and its repair.

A catalog with a log of 10,000+ events is served in-process for the whole module while the
CLI runs as a separate process next to it, as it would next to a running server.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError
from starlette.testclient import TestClient

import icelog.projections.rebuild as rebuild_module
from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.api.settings import Settings
from icelog.domain.context import SYSTEM, RequestContext
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.projections import maintenance
from icelog.projections.schema import READ_MODEL_TABLES, create_statements
from icelog.projections.sql import write_transaction
from tests.integration.conftest import BACKENDS, SCHEMA, Api, create_table, make_settings
from tests.integration.test_cli import icelog
from tests.integration.test_views_api import create_view
from tests.support import postgres
from tests.support.commands import create_plain_table
from tests.support.postgres import TEST_SECRETS_KEY

LOG_EVENTS = 10_000
TABLES = 20
CTX = RequestContext("test", "projections")


@dataclass
class Catalog:
    backend: str
    services: Services
    client: TestClient
    env: dict[str, str]
    base: str  # /catalog/v1/<prefix>
    commits: int = 0

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.backend == "postgres":
            statement = statement.replace("?", "%s")
        with write_transaction(self.services.catalog.app.recorder.datastore) as cur:  # type: ignore[attr-defined]
            cur.execute(statement, params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def last_commit(self) -> tuple[str, str]:
        """The table the latest commit went to, and the value it set."""
        return f"t{(self.commits - 1) % TABLES}", str(self.commits - 1)

    def head(self) -> int:
        return int(self.services.catalog.app.recorder.max_notification_id() or 0)

    def commit(self, count: int = 1) -> None:
        """`count` set-properties commits, round robin over the tables, in one transaction."""
        wid = self.services.warehouse_for_prefix(None)
        changes: list[tuple[TabularName, list[dict[str, Any]], list[dict[str, Any]]]] = []
        for _ in range(count):
            name = TabularName(NamespaceName(("bench",)), f"t{self.commits % TABLES}")
            updates = [{"action": "set-properties", "updates": {"n": str(self.commits)}}]
            changes.append((name, [], updates))
            self.commits += 1
        self.services.catalog.tables.commit_transaction(CTX, wid, changes)

    def load(self, name: str) -> dict[str, Any]:
        response = self.client.get(f"{self.base}/namespaces/bench/tables/{name}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def verify(self) -> maintenance.VerifyResult:
        app = self.services.catalog.app
        return maintenance.verify(app.recorder, app.mapper)

    def indexes(self, table: str) -> set[str]:
        if self.backend == "postgres":
            query = "SELECT indexname FROM pg_indexes WHERE tablename = ?"
        else:
            query = "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
        return {str(r[0]) for r in self.sql(query, (table,))}

    def tables_named(self, pattern: str) -> set[str]:
        if self.backend == "postgres":
            query = "SELECT tablename FROM pg_tables WHERE tablename LIKE ?"
        else:
            query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?"
        return {str(r[0]) for r in self.sql(query, (pattern,))}


def _fill(catalog: Catalog) -> None:
    """The log through the commands (no HTTP), ~40 commits per append transaction."""
    catalog.services.ensure_defaults()
    wid = catalog.services.warehouse_for_prefix(None)
    catalog.services.catalog.namespaces.create_namespace(CTX, wid, NamespaceName(("bench",)), {})
    for i in range(TABLES):
        name = TabularName(NamespaceName(("bench",)), f"t{i}")
        create_plain_table(catalog.services.catalog, CTX, wid, name, SCHEMA)
    while catalog.head() < LOG_EVENTS:
        catalog.commit(40)


@pytest.fixture(scope="module", params=BACKENDS)
def catalog(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Catalog]:
    database_url = postgres.create_database() if request.param == "postgres" else None
    try:
        tmp = tmp_path_factory.mktemp(f"projections-{request.param}")
        # No audit anchors: the server must not append while the tests count events.
        env = {
            "ICELOG_DATA_DIR": str(tmp / "data"),
            "ICELOG_TASK_WORKERS": "0",
            "ICELOG_AUDIT_ANCHOR_INTERVAL_SECONDS": "0",
        }
        if database_url:
            env["ICELOG_DATABASE_URL"] = database_url
            env["ICELOG_SECRETS_KEY"] = TEST_SECRETS_KEY
        settings = Settings.from_env(env)
        services = Services.build(settings)
        with TestClient(create_app(settings, services)) as client:
            config = client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
            base = f"/catalog/v1/{config['overrides']['prefix']}"
            found = Catalog(request.param, services, client, env, base)
            _fill(found)
            yield found
        services.close()
    finally:
        if database_url:
            postgres.drop_database(database_url)


LIVE_INDEXES = {"icelog_tabulars_by_name", "icelog_tabulars_by_location"}


def test_verify_finds_a_corrupted_row_and_rebuild_repairs_it_in_place(catalog: Catalog) -> None:
    assert catalog.head() >= LOG_EVENTS
    # Warm the running server's readers (PostgreSQL prepares statements after 5 uses),
    # so the swap below happens under connections that have used the live tables.
    for _ in range(8):
        catalog.load("t3")
    checked = icelog("projections", "verify", env=catalog.env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"read model matches the log: {catalog.head()} event(s)" in checked.stdout
    assert "events/s" in checked.stderr  # the progress line

    columns = "id, metadata_location, metadata, version, updated_at"
    before = catalog.sql(f"SELECT {columns} FROM icelog_tabulars WHERE name = 't3'")[0]
    t3, true_location = before[0], before[1]
    namespace = catalog.sql("SELECT id, properties FROM icelog_namespaces")[0]
    catalog.sql("UPDATE icelog_tabulars SET metadata_location = 'corrupt' WHERE id = ?", (t3,))
    catalog.sql("UPDATE icelog_namespaces SET properties = '{\"x\":1}' WHERE id = ?", namespace[:1])
    assert catalog.load("t3")["metadata-location"] == "corrupt"  # served from the read model

    checked = icelog("projections", "verify", env=catalog.env)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "2 row(s) differ from the log" in checked.stdout
    assert f"icelog_tabulars {t3}: metadata_location live='corrupt' rebuilt='{true_location}'" in (
        checked.stdout
    )
    assert f"icelog_namespaces {namespace[0]}: properties live=" in checked.stdout

    # --only: the tabulars are swapped, the namespace stays as it is.
    rebuilt = icelog("projections", "rebuild", "--only", "icelog_tabulars", env=catalog.env)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert "rebuilt icelog_tabulars from" in rebuilt.stdout
    assert "fold: " in rebuilt.stderr
    assert "events/s" in rebuilt.stderr
    remaining = catalog.verify().differences
    assert len(remaining) == 1
    assert remaining[0].startswith(f"icelog_namespaces {namespace[0]}: properties")

    rebuilt = icelog("projections", "rebuild", env=catalog.env)
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert f"rebuilt {', '.join(READ_MODEL_TABLES)} from {catalog.head()} event(s)" in (
        rebuilt.stdout
    )
    checked = icelog("projections", "verify", env=catalog.env)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # Repaired: the row is the one the events produced, every column of it.
    assert catalog.sql(f"SELECT {columns} FROM icelog_tabulars WHERE id = ?", (t3,)) == [before]
    assert catalog.sql("SELECT id, properties FROM icelog_namespaces") == [namespace]
    # The server that was running throughout reads and writes the swapped tables.
    assert catalog.load("t3")["metadata-location"] == true_location
    listed = catalog.client.get(f"{catalog.base}/namespaces/bench/tables").json()
    assert len(listed["identifiers"]) == TABLES
    catalog.commit(5)
    table, value = catalog.last_commit()
    assert catalog.load(table)["metadata"]["properties"]["n"] == value
    assert catalog.verify().differences == []


def test_the_swapped_tables_keep_their_indexes_under_the_live_names(catalog: Catalog) -> None:
    app = catalog.services.catalog.app
    maintenance.rebuild_and_swap(app.recorder, app.mapper)
    if catalog.backend == "postgres":
        expected = {*LIVE_INDEXES, "icelog_tabulars_pkey"}
    else:
        expected = {*LIVE_INDEXES, "sqlite_autoindex_icelog_tabulars_1"}
    assert catalog.indexes("icelog_tabulars") == expected
    assert catalog.tables_named("rebuild%") | catalog.tables_named("old%") == set()
    # What start-up runs (CREATE ... IF NOT EXISTS) finds them: nothing is added.
    for statement in create_statements("postgres" if catalog.backend == "postgres" else "sqlite"):
        catalog.sql(statement)
    assert catalog.indexes("icelog_tabulars") == expected
    # ...and the unique name index still holds.
    with pytest.raises((IntegrityError, sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        catalog.sql(
            "INSERT INTO icelog_tabulars SELECT 'another-id', warehouse_id, ns_key, name, kind, "
            "location || '-2', metadata_location, metadata, version, created_at, updated_at "
            "FROM icelog_tabulars WHERE name = 't3'"
        )
    response = catalog.client.post(
        f"{catalog.base}/namespaces/bench/tables", json={"name": "t3", "schema": SCHEMA}
    )
    assert response.status_code == 409


def test_appends_during_a_rebuild_land_in_the_swapped_tables(catalog: Catalog) -> None:
    app = catalog.services.catalog.app
    stages: list[str] = []

    def progress(stage: str, applied: int, total: int) -> None:
        if stage not in stages:
            stages.append(stage)
            catalog.commit(3)  # while folding, and once the fold is done, before the swap

    result = maintenance.rebuild_and_swap(app.recorder, app.mapper, progress=progress)
    assert stages == ["fold", "swap"]
    assert result.caught_up == 3, "the swap folded what was appended after the fold"
    assert result.events == catalog.head()
    table, value = catalog.last_commit()
    assert catalog.load(table)["metadata"]["properties"]["n"] == value
    assert catalog.verify().differences == []


def test_verify_compares_one_snapshot_while_the_catalog_is_written(catalog: Catalog) -> None:
    app = catalog.services.catalog.app
    head = catalog.head()
    appended: list[int] = []

    def progress(stage: str, applied: int, total: int) -> None:
        if applied and not appended:
            catalog.commit(2)  # not blocked by the verify, not seen by it
            appended.append(catalog.head())

    result = maintenance.verify(app.recorder, app.mapper, progress)
    assert appended and appended[0] > head
    assert (result.head, result.applied, result.differences) == (head, head, [])


def test_a_second_rebuild_at_the_same_time_is_refused(catalog: Catalog) -> None:
    app = catalog.services.catalog.app
    refused: list[str] = []

    def progress(stage: str, applied: int, total: int) -> None:
        if not refused:
            with pytest.raises(maintenance.MaintenanceError) as caught:
                maintenance.rebuild_and_swap(app.recorder, app.mapper)
            refused.append(str(caught.value))

    maintenance.rebuild_and_swap(app.recorder, app.mapper, progress=progress)
    assert refused == ["another rebuild is running on this database"]
    assert catalog.verify().differences == []


def _set(api: Api, name: str, **updates: str) -> None:
    response = api.post(
        f"/namespaces/db/tables/{name}",
        {"updates": [{"action": "set-properties", "updates": updates}]},
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("cache_bytes", [None, 100], ids=["cache", "no-cache"])
def test_every_kind_of_event_folds_the_same_in_a_swap(
    api: Api, cache_bytes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drops, soft drops and undrops, renames, location changes, views, namespace properties,
    tasks, between commits to several tables. A rebuild keeps documents in memory and defers
    commits' row writes; with room for less than one document (no-cache) every commit is
    written and read back at once: both must fold what the inline projection wrote."""
    if cache_bytes is not None:
        monkeypatch.setattr(rebuild_module, "CACHE_BYTES", cache_bytes)
    api.post("/namespaces", {"namespace": ["db"], "properties": {"x": "1"}})
    api.post("/namespaces/db/properties", {"updates": {"y": "2"}, "removals": ["x"]})
    for name in ("a", "b", "s1", "s2"):
        create_table(api, "db", name)
    for i in range(3):
        _set(api, "a", i=str(i))
        _set(api, "b", i=str(i))
    moved = api.get("/namespaces/db/tables/b").json()["metadata"]["location"] + "-moved"
    response = api.post(
        "/namespaces/db/tables/b", {"updates": [{"action": "set-location", "location": moved}]}
    )
    assert response.status_code == 200, response.text
    _set(api, "b", after="move")
    api.post(
        "/tables/rename",
        {
            "source": {"namespace": ["db"], "name": "b"},
            "destination": {"namespace": ["db"], "name": "b2"},
        },
    )
    _set(api, "b2", after="rename")
    _set(api, "a", last="yes")
    create_view(api, "v")
    api.delete("/namespaces/db/tables/a")
    api.client.post(
        f"/management/v1/warehouse/{api.prefix}/delete-profile",
        json={"delete-profile": {"type": "soft", "expiration-seconds": 0}},
    )
    _set(api, "s1", before="drop")
    s1 = api.get("/namespaces/db/tables/s1").json()["metadata"]["table-uuid"]
    api.delete("/namespaces/db/tables/s1")
    api.delete("/namespaces/db/tables/s2", params={"purgeRequested": "true"})
    undone = api.client.post(
        f"/management/v1/warehouse/{api.prefix}/deleted-tabulars/undrop",
        json={"targets": [{"type": "table", "id": s1, "new-name": "s1_back"}]},
    )
    assert undone.status_code == 204
    _set(api, "s1_back", back="yes")
    assert api.run_tasks() == 2
    app = api.services.catalog.app
    assert maintenance.verify(app.recorder, app.mapper).differences == []
    maintenance.rebuild_and_swap(app.recorder, app.mapper)
    assert maintenance.verify(app.recorder, app.mapper).differences == []
    listed = api.get("/namespaces/db/tables").json()["identifiers"]
    assert sorted(t["name"] for t in listed) == ["b2", "s1_back"]
    loaded = api.get("/namespaces/db/tables/s1_back").json()["metadata"]["properties"]
    assert (loaded["before"], loaded["back"]) == ("drop", "yes")
    assert api.get("/namespaces/db/tables/b2").json()["metadata"]["location"] == moved
    # Not vacuous: a changed row is found, named, and repaired by the swap.
    sql = "UPDATE icelog_tabulars SET location = 'elsewhere' WHERE name = 'b2'"
    with write_transaction(app.recorder.datastore) as cur:  # type: ignore[attr-defined]
        cur.execute(sql)
    found = maintenance.verify(app.recorder, app.mapper).differences
    assert len(found) == 1
    assert "location live='elsewhere' rebuilt=" in found[0]
    maintenance.rebuild_and_swap(app.recorder, app.mapper, ["icelog_tabulars"])
    assert maintenance.verify(app.recorder, app.mapper).differences == []


def test_coordination_tables_are_never_touched(api: Api) -> None:
    """Task leases and relay positions are not projections of the log."""
    app = api.services.catalog.app
    datastore = app.recorder.datastore  # type: ignore[attr-defined]
    with write_transaction(datastore) as cur:
        cur.execute("INSERT INTO icelog_task_leases VALUES ('task', 'worker', 1)")
        cur.execute("INSERT INTO icelog_publisher_positions VALUES ('nats', 7, 'relay', 2, 3)")
    maintenance.rebuild_and_swap(app.recorder, app.mapper)
    with write_transaction(datastore) as cur:
        cur.execute("SELECT * FROM icelog_task_leases")
        assert [tuple(r) for r in cur.fetchall()] == [("task", "worker", 1)]
        cur.execute("SELECT * FROM icelog_publisher_positions")
        assert [tuple(r) for r in cur.fetchall()] == [("nats", 7, "relay", 2, 3)]


@pytest.mark.postgres
def test_a_swap_that_cannot_get_its_locks_gives_up_and_changes_nothing(tmp_path: Path) -> None:
    with postgres.temporary_database() as url:
        services = Services.build(make_settings(tmp_path, url))
        try:
            services.ensure_defaults()
            app = services.catalog.app
            before = int(app.recorder.max_notification_id() or 0)
            with psycopg.connect(url) as reader:
                # An open transaction that has read a live table holds it (ACCESS SHARE).
                reader.execute("SELECT COUNT(*) FROM icelog_warehouses").fetchone()
                started = time.monotonic()
                with pytest.raises(maintenance.MaintenanceError, match="did not get its locks"):
                    maintenance.rebuild_and_swap(
                        app.recorder, app.mapper, lock_timeout_s=0.3, attempts=2
                    )
                assert time.monotonic() - started < 10
                # Appends were held back only while the swap waited: they go on now.
                services.catalog.management.create_project(SYSTEM, "after", uuid4())
            datastore = app.recorder.datastore  # type: ignore[attr-defined]
            with write_transaction(datastore) as cur:
                cur.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'rebuild%'")
                assert cur.fetchall() == []
            assert int(app.recorder.max_notification_id() or 0) > before
            assert maintenance.verify(app.recorder, app.mapper).differences == []
            maintenance.rebuild_and_swap(app.recorder, app.mapper)  # the reader is gone
        finally:
            services.close()
