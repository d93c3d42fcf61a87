"""Task workers as separate processes (`icelog tasks run`) sharing one database.

- a purge worker killed with SIGKILL half-way: the next worker takes the task over once
  the lease runs out and finishes it (the abandoned attempt is in the log);
- two worker processes on one queue never start the same task twice.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from tests.support.clients import files_under, rest_catalog, wait_until
from tests.support.fixtures import OPEN_BACKENDS, ServerFactory
from tests.support.postgres import TEST_SECRETS_KEY
from tests.support.server import CatalogServer, start_icelog

pytestmark = pytest.mark.parametrize("store", OPEN_BACKENDS)

FAST_TASKS = {
    "ICELOG_TASK_WORKERS": "0",  # the server runs no tasks: the worker processes do
    "ICELOG_TASK_LEASE_SECONDS": "2",
    "ICELOG_TASK_POLL_INTERVAL_SECONDS": "0.2",
}


@pytest.fixture
def server(store: str, catalog_server_factory: ServerFactory) -> Iterator[CatalogServer]:
    """A server of its own that runs no tasks, stopped after the test."""
    running = catalog_server_factory(store, FAST_TASKS)
    yield running
    running.stop()


def start_worker(server: CatalogServer, log: Path, **env: str) -> subprocess.Popen[bytes]:
    return start_icelog(
        server, ["tasks", "run"], {**FAST_TASKS, "ICELOG_TASK_WORKERS": "1", **env}, log
    )


def tasks(server: CatalogServer, warehouse_id: str) -> list[dict[str, Any]]:
    response = httpx.post(f"{server.base}/management/v1/warehouse/{warehouse_id}/task/list")
    response.raise_for_status()
    found: list[dict[str, Any]] = response.json()["tasks"]
    return found


def warehouse_id(server: CatalogServer) -> str:
    config = httpx.get(f"{server.uri}/v1/config", params={"warehouse": "default"}).json()
    return str(config["overrides"]["prefix"])


def task_events(server: CatalogServer, task_id: str) -> list[str]:
    """The task's event kinds, read straight from the event store."""
    from icelog.api.services import Services
    from icelog.api.settings import Settings

    env = {"ICELOG_DATA_DIR": str(server.data_dir)}
    if server.database_url:
        env["ICELOG_DATABASE_URL"] = server.database_url
        env["ICELOG_SECRETS_KEY"] = TEST_SECRETS_KEY
    services = Services.build(Settings.from_env(env))
    try:
        from uuid import UUID

        recorded = services.catalog.app.recorder.select_events(UUID(task_id))
        return [e.topic.split(".")[2] for e in recorded]
    finally:
        services.close()


def test_killed_purge_worker_is_taken_over_and_finishes(
    server: CatalogServer, tmp_path: Path
) -> None:
    catalog = rest_catalog(server)
    catalog.create_namespace("killed")
    schema = pa.schema([pa.field("id", pa.int64())])
    table = catalog.create_table("killed.many", schema=schema)
    for i in range(30):
        table.append(pa.table({"id": [i]}, schema=schema))
    location = table.location()
    files = files_under(location)
    assert len(files) > 100
    catalog.purge_table("killed.many")
    wid = warehouse_id(server)
    [task] = tasks(server, wid)
    assert task["status"] == "pending", "the server itself runs no tasks here"

    # 20 files per second: the purge takes several seconds, long enough to kill it.
    first = start_worker(server, tmp_path / "worker1.log", ICELOG_PURGE_DELETE_RATE="20")
    try:
        assert wait_until(lambda: len(files_under(location)) < len(files) - 10, timeout=60)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    remaining = files_under(location)
    assert remaining, "killed half-way"
    assert tasks(server, wid)[0]["status"] == "running"

    second = start_worker(server, tmp_path / "worker2.log")
    try:
        assert wait_until(lambda: tasks(server, wid)[0]["status"] == "succeeded", timeout=60), (
            tmp_path / "worker2.log"
        ).read_text()
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    assert files_under(location) == set(), "every reachable file is gone"
    finished = tasks(server, wid)[0]
    assert finished["attempt"] == 2
    assert task_events(server, task["task-id"]) == [
        "scheduled",
        "attempt-started",
        "attempt-abandoned",
        "attempt-started",
        "succeeded",
    ]


def test_two_worker_processes_never_start_the_same_task_twice(
    server: CatalogServer, tmp_path: Path
) -> None:
    catalog = rest_catalog(server)
    catalog.create_namespace("pair")
    schema = pa.schema([pa.field("id", pa.int64())])
    count = 40
    for i in range(count):
        table = catalog.create_table(f"pair.t{i}", schema=schema)
        table.append(pa.table({"id": [i]}, schema=schema))
        catalog.purge_table(f"pair.t{i}")
    wid = warehouse_id(server)
    assert len(tasks(server, wid)) == count
    # Slow deletes so that both workers are busy at the same time.
    workers = [
        start_worker(server, tmp_path / f"w{n}.log", ICELOG_PURGE_DELETE_RATE="50")
        for n in range(2)
    ]
    try:
        assert wait_until(
            lambda: all(t["status"] == "succeeded" for t in tasks(server, wid)), timeout=120
        )
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(timeout=30)
    done = tasks(server, wid)
    assert all(t["attempt"] == 1 for t in done), "each task started exactly once"
    ran_by = {t["task-id"]: t for t in done}
    assert len(ran_by) == count
    logs = [(tmp_path / f"w{n}.log").read_text() for n in range(2)]
    assert all("succeeded" in log for log in logs), "both workers took part"
    for task in done[:5]:
        assert task_events(server, task["task-id"]) == [
            "scheduled",
            "attempt-started",
            "succeeded",
        ]
