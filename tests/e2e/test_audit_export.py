"""`icelog audit export`: the event log as an Iceberg table, appended incrementally through
the catalog, and queried with Spark SQL ("who changed table X last week")."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from typing import Any

import httpx
import pytest

from tests.support.clients import rest_catalog
from tests.support.fixtures import ServerFactory
from tests.support.server import REPO_ROOT, CatalogServer
from tests.support.spark import register_rest_catalog

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.timeout(300)]

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def export(server: CatalogServer) -> str:
    env = {**os.environ, "ICELOG_DATA_DIR": str(server.data_dir), "ICELOG_TASK_WORKERS": "0"}
    env.pop("ICELOG_DATABASE_URL", None)
    if server.database_url:
        env["ICELOG_DATABASE_URL"] = server.database_url
    done = subprocess.run(
        [sys.executable, "-m", "icelog.api", "audit", "export", "--uri", server.uri],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def commit(server: CatalogServer, table: str, n: int, who: str) -> None:
    response = httpx.post(
        f"{server.uri}/v1/namespaces/shop/tables/{table}",
        json={"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
        headers={"X-Request-Id": who},
    )
    assert response.status_code == 200, response.text


def test_export_is_incremental_and_answers_who_changed_a_table(
    spark: Any, catalog_server_factory: ServerFactory
) -> None:
    server = catalog_server_factory("sqlite", {"ICELOG_TASK_WORKERS": "0"})
    try:
        httpx.post(f"{server.uri}/v1/namespaces", json={"namespace": ["shop"]})
        for table in ("orders", "customers"):
            created = httpx.post(
                f"{server.uri}/v1/namespaces/shop/tables", json={"name": table, "schema": SCHEMA}
            )
            assert created.status_code == 200
        commit(server, "orders", 1, "job-nightly")
        commit(server, "customers", 1, "job-crm")
        first = export(server)
        assert "appended" in first
        events = rest_catalog(server).load_table("audit.events")
        rows = events.scan().to_arrow()
        positions = rows["position"].to_pylist()
        assert positions == sorted(positions) and len(set(positions)) == len(positions)
        commit(server, "orders", 2, "job-hotfix")
        second = export(server)
        again = rest_catalog(server).load_table("audit.events").scan().to_arrow()
        new_positions = again["position"].to_pylist()
        assert len(set(new_positions)) == len(new_positions), "nothing exported twice"
        assert set(positions) < set(new_positions), "the second run only appended"
        assert int(second.split("position ")[1]) > max(positions)

        cat = register_rest_catalog(spark, f"audit_{server.port}", server.uri)
        example = runpy.run_path(str(REPO_ROOT / "examples" / "audit_who_changed.py"))
        who = example["who_changed"](spark, cat, "shop.orders", 7)
        assert [(r.request_id, r.type) for r in who] == [
            (who[0].request_id, "io.icelog.table.created.v1"),
            ("job-nightly", "io.icelog.table.committed.v1"),
            ("job-hotfix", "io.icelog.table.committed.v1"),
        ]
    finally:
        server.stop()
