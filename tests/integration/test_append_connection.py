"""The group committer's plain-commit appends keep one connection out of the pool
(projections/sql.py HeldConnection): reused across appends, replaced when it dies, when a
statement on it fails and when it is old, and given back before the pool closes."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.table import Table
from icelog.projections.recorders import InlinePostgresRecorder
from icelog.projections.sql import HeldConnection
from tests.integration.conftest import SCHEMA, Api, create_table, replica_settings
from tests.integration.test_tables_api import append

pytestmark = pytest.mark.postgres


def _held(api: Api) -> HeldConnection:
    recorder = api.services.catalog.app.recorder
    assert isinstance(recorder, InlinePostgresRecorder)
    return recorder._append_connection


def _held_pid(api: Api) -> int | None:
    held: Any = _held(api)._held
    return None if held is None else int(held[1].info.backend_pid)


def _commit_n(api: Api, first: int, n: int, parent: int | None) -> int | None:
    for i in range(first, first + n):
        response = append(api, "db", "t", i, i, parent)
        assert response.status_code == 200, response.text
        parent = i
    return parent


def _table_with_commits(api: Api, n: int) -> tuple[int | None, int]:
    """Table db.t with `n` commits; (its last snapshot, the held connection's backend)."""
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    parent = _commit_n(api, 1, n, None)
    pid = _held_pid(api)
    assert pid is not None
    return parent, pid


def test_appends_share_one_connection_which_is_replaced_when_it_dies(pg_api: Api) -> None:
    api = pg_api
    parent, pid = _table_with_commits(api, 3)
    parent = _commit_n(api, 4, 3, parent)
    assert _held_pid(api) == pid  # the same connection for every append

    url = api.services.settings.database_url
    assert url is not None
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # The next commit finds it dead before using it: no error, a new connection.
    parent = _commit_n(api, 7, 2, parent)
    assert _held_pid(api) not in (None, pid)
    rows = api.get("/namespaces/db/tables/t").json()["metadata"]["snapshots"]
    assert [s["snapshot-id"] for s in rows] == list(range(1, 9))


def test_an_old_connection_is_replaced_and_closing_gives_it_back(pg_api: Api) -> None:
    api = pg_api
    parent, pid = _table_with_commits(api, 2)
    held = _held(api)
    held._max_age_s = 0.0
    _commit_n(api, 3, 1, parent)
    assert _held_pid(api) not in (None, pid)
    pool = api.services.catalog.app.recorder.datastore.pool  # type: ignore[attr-defined]
    out_before = pool.get_stats()["pool_size"] - pool.get_stats()["pool_available"]
    held.release()
    assert _held_pid(api) is None
    stats = pool.get_stats()
    assert stats["pool_size"] - stats["pool_available"] == out_before - 1


def test_a_small_pool_is_never_starved_by_the_held_connection(pg_api: Api) -> None:
    """With one pooled connection, holding it after an append left nothing for the reads
    of the next request (503 after the pool's timeout)."""
    settings = replica_settings(
        pg_api,
        {"ICELOG_PG_POOL_SIZE": "1", "ICELOG_PG_MAX_OVERFLOW": "0", "ICELOG_TASK_WORKERS": "0"},
    )
    services = Services.build(settings)
    try:
        with TestClient(create_app(settings, services)) as client:
            prefix = client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
            base = f"/catalog/v1/{prefix['overrides']['prefix']}"
            assert client.post(f"{base}/namespaces", json={"namespace": ["db"]}).status_code == 200
            made = client.post(f"{base}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA})
            assert made.status_code == 200, made.text
            for i in (1, 2):
                body = {"updates": [{"action": "set-properties", "updates": {"i": str(i)}}]}
                done = client.post(f"{base}/namespaces/db/tables/t", json=body)
                assert done.status_code == 200, done.text
                listed = client.get(f"{base}/namespaces")
                assert listed.status_code == 200, listed.text
        recorder = services.catalog.app.recorder
        assert isinstance(recorder, InlinePostgresRecorder)
        assert recorder._append_connection._held is None
    finally:
        services.close()


def test_a_table_is_still_snapshotted_at_its_hundredth_event(
    pg_api: Api,
) -> None:
    """The group committer takes aggregate snapshots (now after it has woken the writers)."""
    api = pg_api
    _table_with_commits(api, 99)  # created + 99 commits: version 100
    catalog = api.services.catalog
    table = catalog.tables.core.find(
        Table, api.services.warehouse_for_prefix(api.prefix), _name("db", "t")
    )
    assert table is not None
    table_id = table.id
    snapshots = catalog.app.snapshots
    assert snapshots is not None
    deadline = time.monotonic() + 10
    while not list(snapshots.get(table_id)):
        assert time.monotonic() < deadline, "no snapshot taken at version 100"
        time.sleep(0.05)
    assert list(snapshots.get(table_id))[-1].originator_version == 100
    assert api.get("/namespaces/db/tables/t").status_code == 200


def _name(ns: str, name: str) -> TabularName:
    return TabularName(NamespaceName((ns,)), name)
