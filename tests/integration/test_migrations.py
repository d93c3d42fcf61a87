"""`icelog migrate`: creates and upgrades the schema, records each step once, is safe to
repeat, to run concurrently and next to a serving catalog; `serve` refuses a schema it
does not know (newer) and, on PostgreSQL, one that needs `icelog migrate` (older)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services, icelog_version, open_application
from icelog.commands.application import CatalogApplication
from icelog.commands.users import UserFacts
from icelog.domain.context import SYSTEM
from icelog.domain.identifiers import NamespaceName, namespace_id
from icelog.projections import migrations
from icelog.projections.migrations import LATEST, STEPS
from tests.integration.conftest import BACKENDS, make_settings
from tests.integration.test_cli import icelog
from tests.support import postgres
from tests.support.in_process import with_table_db_t
from tests.support.server import free_port


class Db:
    """A catalog database of one backend, and raw SQL on it."""

    def __init__(self, backend: str, tmp_path: Path, url: str | None) -> None:
        self.backend = backend
        self.url = url
        self.data_dir = tmp_path / "data"
        self.env = {"ICELOG_DATA_DIR": str(self.data_dir), "ICELOG_TASK_WORKERS": "0"}
        if url is not None:
            self.env |= {
                "ICELOG_DATABASE_URL": url,
                "ICELOG_SECRETS_KEY": postgres.TEST_SECRETS_KEY,
            }
        self.tmp_path = tmp_path

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.url is not None:
            with psycopg.connect(self.url, autocommit=True) as conn:
                cur = conn.execute(statement.replace("?", "%s"), params)
                return [tuple(r) for r in cur.fetchall()] if cur.description else []
        lite = sqlite3.connect(self.data_dir / "catalog.db", isolation_level=None)
        try:
            return [tuple(r) for r in lite.execute(statement, params).fetchall()]
        finally:
            lite.close()

    def schema(self) -> set[tuple[str, ...]]:
        """Every table's columns and every index, as text: equal means the same schema."""
        if self.url is not None:
            columns = self.sql(
                "SELECT table_name, column_name, data_type, is_nullable, "
                "coalesce(column_default, '') FROM information_schema.columns "
                "WHERE table_schema = 'public'"
            )
            indexes = self.sql(
                "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
            )
            types = self.sql(
                "SELECT 'type', typname, '' FROM pg_type t JOIN pg_namespace n "
                "ON n.oid = t.typnamespace WHERE n.nspname = 'public' AND t.typtype = 'c'"
            )
            return {tuple(map(str, r)) for r in [*columns, *indexes, *types]}
        return {
            tuple(map(str, r))
            for r in self.sql("SELECT type, name, tbl_name, sql FROM sqlite_master")
        }

    def tables(self) -> set[str]:
        if self.url is not None:
            rows = self.sql(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        else:
            rows = self.sql("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {str(r[0]) for r in rows}

    def versions(self) -> list[tuple[int, str]]:
        rows = self.sql(
            "SELECT version, icelog_version FROM icelog_schema_version ORDER BY version"
        )
        return [(int(r[0]), str(r[1])) for r in rows]

    def migrate(self, **env: str) -> subprocess.CompletedProcess[str]:
        return icelog("migrate", env={**self.env, **env})

    def serve_until_exit(self, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`icelog serve` that is expected to refuse (exit) rather than serve."""
        return subprocess.run(
            [sys.executable, "-m", "icelog.api", "serve", "--port", str(free_port())],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def build(self) -> Services:
        return Services.build(make_settings(self.tmp_path, self.url))


@pytest.fixture(params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Db]:
    if request.param == "postgres":
        with postgres.temporary_database() as url:
            yield Db("postgres", tmp_path, url)
    else:
        yield Db("sqlite", tmp_path, None)


def expected_versions() -> list[int]:
    return [s.version for s in STEPS]


def test_migrate_twice_gives_one_schema_and_records_each_step_once(db: Db) -> None:
    first = db.migrate()
    assert first.returncode == 0, first.stderr
    assert f"schema at version {LATEST}" in first.stdout
    assert f"applied {len(STEPS)} step(s)" in first.stdout
    schema = db.schema()
    assert {
        "icelog_schema_version",
        "icelog_tabulars",
        "icelog_namespaces",
        "icelog_secrets",
        "icelog_event_index",
        "icelog_audit_chain",
        "icelog_publisher_positions",
        "icelog_task_leases",
        "icelog_catalog_versions",
        "icelog_catalog_locations",
        "icelog_catalog_history_position",
    } <= db.tables()
    versions = db.versions()
    assert [v for v, _ in versions] == expected_versions()
    assert {by for _, by in versions} == {icelog_version()}

    second = db.migrate()
    assert second.returncode == 0, second.stderr
    assert "already up to date" in second.stdout
    assert db.schema() == schema
    assert [v for v, _ in db.versions()] == expected_versions(), "recorded once"


def test_concurrent_migrations_of_an_empty_database_all_succeed(db: Db) -> None:
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "icelog.api", "migrate"],
            env={**os.environ, **db.env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [p.communicate(timeout=120) for p in processes]
    for process, (out, err) in zip(processes, outcomes, strict=True):
        assert process.returncode == 0, f"{out}\n{err}"
    applied = [out for out, _ in outcomes if f"applied {len(STEPS)} step(s)" in out]
    assert len(applied) == 1, "exactly one of them applied the steps; the others found them"
    assert [v for v, _ in db.versions()] == expected_versions()


def test_an_older_schema_is_upgraded_and_keeps_its_data(db: Db) -> None:
    services = db.build()  # creates the schema, and the default project and warehouse
    try:
        services.ensure_defaults()
        warehouse = services.default_warehouse_id()
    finally:
        services.close()
    # What an older release left: without the tables steps 4 and 5 add, and without the
    # column step 7 adds (steps 8 finds step 5's table in its current shape).
    db.sql("DROP TABLE icelog_event_index")
    db.sql("DROP TABLE icelog_secrets")
    db.sql("ALTER TABLE icelog_tasks DROP COLUMN result")
    for table in ("icelog_catalog_versions", "icelog_catalog_locations"):
        db.sql(f"DROP TABLE {table}")
    db.sql("DROP TABLE icelog_catalog_history_position")
    if db.backend == "postgres":
        db.sql("DROP FUNCTION icelog_append_rows")  # step 18
    db.sql("DELETE FROM icelog_schema_version WHERE version >= 4")

    if db.backend == "postgres":
        # An existing database is altered by `icelog migrate` only, never by serve.
        refused = db.serve_until_exit()
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "run `icelog migrate`" in refused.stderr
        assert "version 3" in refused.stderr
        upgraded = db.migrate()
        assert upgraded.returncode == 0, upgraded.stderr
        assert "applied step 4: event index" in upgraded.stdout
        assert f"applied {LATEST - 3} step(s)" in upgraded.stdout
        functions = "SELECT count(*) FROM pg_proc WHERE proname = 'icelog_append_rows'"
        assert db.sql(functions) == [(1,)]
    else:
        # The embedded store upgrades itself when the server starts.
        services = db.build()
        assert [s.version for s in services.schema_applied] == list(range(4, LATEST + 1))
        services.close()
    assert {"icelog_event_index", "icelog_secrets", "icelog_catalog_versions"} <= db.tables()
    assert db.sql("SELECT count(result) FROM icelog_tasks") == [(0,)], "step 7 added it"
    assert [v for v, _ in db.versions()] == expected_versions()
    services = db.build()
    try:
        assert services.schema_applied == []
        assert services.default_warehouse_id() == warehouse, "the data is still there"
    finally:
        services.close()


def test_a_database_from_before_versions_were_recorded_is_adopted(db: Db) -> None:
    assert db.migrate().returncode == 0
    services = db.build()
    try:
        services.ensure_defaults()
        events = int(services.catalog.app.recorder.max_notification_id() or 0)
    finally:
        services.close()
    db.sql("DROP TABLE icelog_schema_version")  # the schema the previous releases made
    status = _status(db)
    assert status.version == 0 and not status.fresh
    upgraded = db.migrate()
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"applied {len(STEPS)} step(s)" in upgraded.stdout
    assert [v for v, _ in db.versions()] == expected_versions()
    assert int(db.sql(_max_position(db))[0][0]) == events


def _max_position(db: Db) -> str:
    if db.backend == "postgres":
        return "SELECT max(notification_id) FROM icelog_events"
    return "SELECT max(rowid) FROM stored_events"


def _status(db: Db) -> migrations.Status:
    with pytest.raises(migrations.SchemaOutdatedError):
        open_application(make_settings(db.tmp_path, db.url), upgrade_schema=False)
    app = CatalogApplication(
        env=make_settings(db.tmp_path, db.url).eventsourcing_env() | {"CREATE_TABLE": "n"}
    )
    try:
        return migrations.status(migrations.recorders_of(app))
    finally:
        app.close()


def test_a_schema_from_a_newer_icelog_is_refused_by_serve_and_migrate(db: Db) -> None:
    assert db.migrate().returncode == 0
    db.sql(
        "INSERT INTO icelog_schema_version (version, description, applied_at, icelog_version) "
        "VALUES (?, 'from the future', '2099-01-01T00:00:00+00:00', '99.0.0')",
        (LATEST + 1,),
    )
    refused = db.migrate()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"version {LATEST + 1}" in refused.stderr and "icelog 99.0.0" in refused.stderr
    assert "newer than this icelog" in refused.stderr
    served = db.serve_until_exit()
    assert served.returncode == 2, served.stdout + served.stderr
    assert "newer than this icelog" in served.stderr
    assert "Traceback" not in served.stderr
    assert [v for v, _ in db.versions()] == [*expected_versions(), LATEST + 1], "untouched"


@pytest.mark.postgres
def test_migrate_next_to_a_serving_catalog_does_not_disturb_it(tmp_path: Path) -> None:
    """Re-running every step (as on a database from before versions were recorded) while
    commits keep landing: no commit fails, and the migration completes."""
    with postgres.temporary_database() as url:
        db = Db("postgres", tmp_path, url)
        settings = make_settings(tmp_path, url)
        services = Services.build(settings)
        failures: list[str] = []
        commits = [0]
        stop = threading.Event()
        try:
            with TestClient(create_app(settings, services), raise_server_exceptions=False) as c:
                base = with_table_db_t(c)

                def commit_forever() -> None:
                    n = 0
                    while not stop.is_set():
                        n += 1
                        done = c.post(
                            f"{base}/namespaces/db/tables/t",
                            json={
                                "updates": [{"action": "set-properties", "updates": {"n": str(n)}}]
                            },
                        )
                        if done.status_code != 200:
                            failures.append(f"{done.status_code} {done.text[:200]}")
                        loaded = c.get(f"{base}/namespaces/db/tables/t")
                        if loaded.status_code != 200:
                            failures.append(f"load {loaded.status_code}")
                        commits[0] += 1

                writer = threading.Thread(target=commit_forever)
                writer.start()
                try:
                    time.sleep(0.5)
                    db.sql("DROP TABLE icelog_schema_version")
                    migrated = db.migrate()
                    time.sleep(0.5)
                finally:
                    stop.set()
                    writer.join(timeout=30)
        finally:
            services.close()
        assert migrated.returncode == 0, migrated.stderr
        assert f"applied {len(STEPS)} step(s)" in migrated.stdout
        assert failures == []
        assert commits[0] > 5


@pytest.mark.postgres
def test_a_migration_that_cannot_lock_a_table_gives_up_in_time(tmp_path: Path) -> None:
    with postgres.temporary_database() as url:
        db = Db("postgres", tmp_path, url)
        assert db.migrate().returncode == 0
        db.sql("DELETE FROM icelog_schema_version")
        # A long write transaction: step 1's CREATE INDEX IF NOT EXISTS locks the table
        # against writes (SHARE) before it finds that the index exists.
        with psycopg.connect(url) as holder:
            holder.execute("LOCK TABLE icelog_tabulars IN ROW EXCLUSIVE MODE")
            started = time.monotonic()
            busy = db.migrate(ICELOG_PG_LOCK_TIMEOUT_SECONDS="1")
            waited = time.monotonic() - started
            holder.rollback()
        assert busy.returncode == 1, busy.stdout + busy.stderr
        assert "run the migration again" in busy.stderr
        assert waited < 15
        assert db.versions() == [], "nothing half-applied"
        again = db.migrate()
        assert again.returncode == 0, again.stderr
        assert [v for v, _ in db.versions()] == expected_versions()


@pytest.mark.attack
def test_step_17_ends_the_grants_of_objects_that_are_gone(db: Db) -> None:
    """What an older release left behind: grants on a dropped namespace's id, on the previous
    namespace of a name made again, held by a deleted user (also one who came back), by a
    deleted role, on a dropped table. Step 17 deletes those and keeps the rest."""
    services = db.build()
    try:
        services.ensure_defaults()
        catalog = services.catalog
        warehouse = UUID(services.default_warehouse_id())
        catalog.namespaces.create_namespace(SYSTEM, warehouse, NamespaceName(("kept",)), {})
        catalog.namespaces.create_namespace(SYSTEM, warehouse, NamespaceName(("again",)), {})
        for who in ("gone", "back", "stays"):
            facts = UserFacts(user_id=f"oidc~{who}", name=who, email=None, user_type="human")
            catalog.access.provision_user(SYSTEM, facts, how="token")
        catalog.access.delete_user(SYSTEM, "oidc~gone")
        catalog.access.delete_user(SYSTEM, "oidc~back")
        later = "9999-01-01T00:00:00+00:00"
        catalog.access.provision_user(
            SYSTEM, UserFacts("oidc~back", "b", None, "human"), how="token"
        )
        kept = str(namespace_id(warehouse, NamespaceName(("kept",))))
        again = str(namespace_id(warehouse, NamespaceName(("again",))))
        dropped = str(namespace_id(warehouse, NamespaceName(("dropped",))))
    finally:
        services.close()
    long_ago = "2000-01-01T00:00:00+00:00"
    rows = [
        ("keep-1", "namespace", kept, "select", "user", "oidc~stays", later),
        ("keep-2", "namespace", again, "select", "user", "oidc~stays", later),
        ("keep-3", "namespace", kept, "select", "user", "oidc~never-seen", later),
        ("keep-4", "namespace", kept, "select", "user", "oidc~back", later),
        ("gone-1", "namespace", dropped, "ownership", "user", "oidc~stays", later),
        ("gone-2", "namespace", again, "ownership", "user", "oidc~stays", long_ago),
        ("gone-3", "namespace", kept, "modify", "user", "oidc~gone", later),
        ("gone-4", "namespace", kept, "modify", "user", "oidc~back", long_ago),
        ("gone-5", "namespace", kept, "select", "role", str(uuid4()), later),
        ("gone-6", "table", str(uuid4()), "select", "user", "oidc~stays", later),
        ("gone-7", "role", str(uuid4()), "assignee", "user", "oidc~stays", later),
        ("gone-8", "warehouse", str(uuid4()), "select", "user", "oidc~stays", later),
    ]
    for row in rows:
        db.sql(
            "INSERT INTO icelog_grants (id, object_kind, object_id, relation, principal_kind, "
            "principal_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            row,
        )
    db.sql("DELETE FROM icelog_schema_version WHERE version = 17")
    upgraded = db.migrate()
    assert upgraded.returncode == 0, upgraded.stderr
    assert "applied step 17" in upgraded.stdout
    left = {str(r[0]) for r in db.sql("SELECT id FROM icelog_grants")}
    assert {r[0] for r in rows if r[0].startswith("keep")} <= left
    assert not {r[0] for r in rows if r[0].startswith("gone")} & left
    assert [v for v, _ in db.versions()] == expected_versions()
