"""A process keeps to its PostgreSQL connection budget (ICELOG_PG_MAX_CONNECTIONS) under
every kind of concurrent request, and a small pool never starves or deadlocks a request.

The group committer is the one part of a process that asks for a connection while it
holds one (api/connection_budget.py): with a budget of 5 it keeps one for plain commits
and takes another for drops, namespace changes and snapshots while request threads hold
the rest; with 3 it keeps none. Either way every request must be answered, none with a
503 from a pool's timeout, and the database must never see more backends than the budget.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from icelog.api.settings import Settings
from tests.integration.conftest import SCHEMA
from tests.integration.test_concurrency import run_threads
from tests.support import postgres

pytestmark = pytest.mark.postgres

THREADS = 12


class Peak:
    """The most backends of one database seen by a sampler while a block runs."""

    def __init__(self, url: str) -> None:
        self.url, self.most = url, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, postgres.backends(self.url))
            self._stop.wait(0.02)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def database() -> Iterator[str]:
    with postgres.temporary_database() as url:
        yield url


def serve(tmp_path: Path, url: str, budget: int) -> tuple[Settings, Services]:
    # As in production: a task worker and the audit thread share the pool with requests.
    settings = Settings.from_env(
        {
            "ICELOG_DATA_DIR": str(tmp_path / "data"),
            "ICELOG_DATABASE_URL": url,
            "ICELOG_SECRETS_KEY": postgres.TEST_SECRETS_KEY,
            "ICELOG_PG_MAX_CONNECTIONS": str(budget),
        }
    )
    return settings, Services.build(settings)


def workload(client: TestClient, base: str, i: int) -> list[tuple[str, int]]:
    """One client's round of every kind of request; (what, status) of each answer."""
    answers: list[tuple[str, int]] = []

    def call(what: str, method: str, path: str, body: Any = None) -> Any:
        response = client.request(method, path, json=body)
        answers.append((what, response.status_code))
        return response

    ns = f"ns{i}"
    call("create namespace", "POST", f"{base}/namespaces", {"namespace": [ns]})
    for t in range(2):
        table = {"name": f"t{t}", "schema": SCHEMA}
        call("create table", "POST", f"{base}/namespaces/{ns}/tables", table)
    for n in range(8):
        update = {"action": "set-properties", "updates": {f"k{n}": str(n)}}
        call("commit", "POST", f"{base}/namespaces/{ns}/tables/t0", {"updates": [update]})
        call("loadTable", "GET", f"{base}/namespaces/{ns}/tables/t0")
        call("listTables", "GET", f"{base}/namespaces/{ns}/tables")
    # Namespace changes and drops take the event store library's append (the committer's
    # second connection).
    props = {"updates": {"owner": f"client{i}"}}
    call("namespace properties", "POST", f"{base}/namespaces/{ns}/properties", props)
    call("drop table", "DELETE", f"{base}/namespaces/{ns}/tables/t1?purgeRequested=true")
    call("events", "GET", "/management/v1/events?page-size=50")
    call("iceberg events", "POST", f"{base}/events", {"page-size": 50})
    return answers


@pytest.mark.parametrize("budget", [3, 5])
def test_a_process_keeps_to_its_budget_and_answers_every_request(
    tmp_path: Path, database: str, budget: int
) -> None:
    settings, services = serve(tmp_path, database, budget)
    try:
        with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
            config = client.get("/catalog/v1/config", params={"warehouse": "default"}).json()
            base = f"/catalog/v1/{config['overrides']['prefix']}"
            with Peak(database) as peak:
                results = run_threads(THREADS, lambda i: workload(client, base, i))
            after = postgres.backends(database)
    finally:
        services.close()
    failed = [r for r in results if not isinstance(r, list)]
    assert failed == []
    unanswered = [(what, status) for r in results for what, status in r if status >= 300]
    assert unanswered == [], "every request answered (a pool timeout is a 503)"
    assert sum(len(r) for r in results) == THREADS * 31
    # The pools grow on demand and keep what they opened for minutes: what is open after
    # the load is at least what it needed, and neither that nor any sample exceeds the
    # budget (earlier releases kept 10 connections open from the start).
    assert peak.most <= budget and after <= budget, (peak.most, after)


def test_serve_refuses_a_budget_its_workers_cannot_share(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "ICELOG_DATA_DIR": str(tmp_path),
        # Nothing listens there: the refusal must come before any connection is tried.
        "ICELOG_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/icelog",
        "ICELOG_PG_MAX_CONNECTIONS": "8",
    }
    done = subprocess.run(
        [sys.executable, "-m", "icelog.api", "serve", "--port", "0", "--workers", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "configuration error: ICELOG_PG_MAX_CONNECTIONS=8 is too few" in done.stderr
    assert "each of the 4 processes of --workers 4" in done.stderr
    assert "serving" not in done.stdout
