"""Several `icelog serve` processes on one PostgreSQL database behave as one catalog.

Two server processes A and B, started together on one empty database (so they also race
to initialise the schema and the default warehouse):

- read-your-writes: 1,000 times a commit on A, then at once loadTable on B: 0 stale;
- no duplicate names: many threads create the same namespace and table names on A and B
  at once: exactly one 200 per name, every other attempt a 409;
- no lost commits: 8 appenders (4 per server) on one hot table, retrying on 409 as Iceberg
  clients do: every acknowledged snapshot is in the final, linear history;
- one `icelog serve --workers 2` server passes the read-your-writes check too;
- `ICELOG_DATABASE_READ_URL`: the read models are read through it, writes and the
  aggregates commands load are not (a frozen copy of the database stands in for a
  replica that lags forever: real streaming replication is not available here);
- no event lost to a consumer: writers commit on A and B while one consumer follows the
  events endpoint's continuation tokens on A: every acknowledged commit is seen exactly
  once, and the consumer sees every event of the log, in order.
"""

from __future__ import annotations

import functools
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.support import postgres
from tests.support.load import run_for
from tests.support.server import (
    ICELOG_BIN,
    REPO_ROOT,
    CatalogServer,
    free_port,
    start_server,
)

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(90)]

# The servers take the test budget (tests/support/server.py): PostgreSQL's 100 connections
# are shared by the whole test session.
SMALL_POOLS = {"ICELOG_TASK_WORKERS": "0"}
SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": True}],
}


class Rest:
    """Iceberg REST calls on one server (one keep-alive connection per thread)."""

    def __init__(self, server: CatalogServer, *, keep_alive: bool = True) -> None:
        self.server = server
        limits = httpx.Limits() if keep_alive else httpx.Limits(max_keepalive_connections=0)
        self.http = httpx.Client(base_url=server.base, timeout=30, limits=limits)
        config = self.http.get("/catalog/v1/config", params={"warehouse": "default"})
        config.raise_for_status()
        self.base = f"/catalog/v1/{config.json()['overrides']['prefix']}"

    def clone(self, *, keep_alive: bool = True) -> Rest:
        return Rest(self.server, keep_alive=keep_alive)

    def close(self) -> None:
        self.http.close()

    def create_namespace(self, name: str) -> httpx.Response:
        return self.http.post(f"{self.base}/namespaces", json={"namespace": [name]})

    def create_table(self, ns: str, name: str) -> httpx.Response:
        return self.http.post(
            f"{self.base}/namespaces/{ns}/tables", json={"name": name, "schema": SCHEMA}
        )

    def load(self, ns: str, name: str) -> httpx.Response:
        return self.http.get(f"{self.base}/namespaces/{ns}/tables/{name}")

    def commit(
        self, ns: str, name: str, updates: list[Any], requirements: list[Any] | None = None
    ) -> httpx.Response:
        return self.http.post(
            f"{self.base}/namespaces/{ns}/tables/{name}",
            json={"requirements": requirements or [], "updates": updates},
        )

    def set_property(self, ns: str, name: str, key: str, value: str) -> httpx.Response:
        return self.commit(ns, name, [{"action": "set-properties", "updates": {key: value}}])

    def namespaces(self) -> list[str]:
        found = self.http.get(f"{self.base}/namespaces")
        found.raise_for_status()
        return [n[0] for n in found.json()["namespaces"]]

    def tables(self, ns: str) -> list[str]:
        found = self.http.get(f"{self.base}/namespaces/{ns}/tables")
        found.raise_for_status()
        return [t["name"] for t in found.json()["identifiers"]]


def start_together(starters: list[Callable[[], CatalogServer]]) -> list[CatalogServer]:
    with ThreadPoolExecutor(len(starters)) as pool:
        futures = [pool.submit(start) for start in starters]
        return [f.result() for f in futures]


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with postgres.temporary_database() as url:
        yield url


@pytest.fixture(scope="module")
def pair(
    database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[CatalogServer, CatalogServer]]:
    """Servers A and B, started at the same moment on one empty database."""

    def starter(name: str) -> Callable[[], CatalogServer]:
        return lambda: start_server(
            tmp_path_factory.mktemp(f"replica-{name}"),
            backend="postgres",
            database_url=database,
            env=SMALL_POOLS,
        )

    servers = start_together([starter("a"), starter("b")])
    yield servers[0], servers[1]
    for server in servers:
        server.stop()


@pytest.fixture
def rest(pair: tuple[CatalogServer, CatalogServer]) -> Iterator[tuple[Rest, Rest]]:
    a, b = Rest(pair[0]), Rest(pair[1])
    yield a, b
    a.close()
    b.close()


def read_your_writes(writer: Rest, reader: Rest, ns: str, times: int) -> list[int]:
    """Commit on `writer`, then at once loadTable on `reader`; the stale iterations."""
    assert writer.create_namespace(ns).status_code == 200
    assert writer.create_table(ns, "t").status_code == 200
    stale = []
    for i in range(times):
        done = writer.set_property(ns, "t", "counter", str(i))
        assert done.status_code == 200, done.text
        loaded = reader.load(ns, "t")
        assert loaded.status_code == 200, loaded.text
        if loaded.json()["metadata"]["properties"].get("counter") != str(i):
            stale.append(i)
    return stale


def test_a_commit_on_one_replica_is_read_at_once_on_the_other(rest: tuple[Rest, Rest]) -> None:
    a, b = rest
    started = time.monotonic()
    stale = read_your_writes(a, b, "ryw", 1000)
    assert stale == [], f"{len(stale)} stale reads of 1,000, first at {stale[:5]}"
    # The other way round, and for namespace properties (a different read model).
    for i in range(100):
        updated = b.http.post(
            f"{b.base}/namespaces/ryw/properties", json={"updates": {"n": str(i)}}
        )
        assert updated.status_code == 200, updated.text
        loaded = a.http.get(f"{a.base}/namespaces/ryw")
        assert loaded.json()["properties"]["n"] == str(i)
    assert time.monotonic() - started < 60


def race(
    clients: list[Rest], names: list[str], attempt: Callable[[Rest, str], int]
) -> dict[str, list[int]]:
    """Every client tries every name; all of them start each name at the same moment."""
    barrier = threading.Barrier(len(clients))
    statuses: dict[str, list[int]] = {name: [] for name in names}
    lock = threading.Lock()

    def work(client: Rest) -> None:
        for name in names:
            barrier.wait(timeout=30)
            status = attempt(client, name)
            with lock:
                statuses[name].append(status)

    with ThreadPoolExecutor(len(clients)) as pool:
        for future in [pool.submit(work, c) for c in clients]:
            future.result()
    return statuses


def test_concurrent_creates_of_one_name_on_both_replicas_make_one(
    rest: tuple[Rest, Rest],
) -> None:
    a, b = rest
    threads = 16  # 8 on each server
    clients = [(a if i % 2 == 0 else b).clone() for i in range(threads)]
    try:
        namespaces = [f"race_ns_{i}" for i in range(12)]
        created = race(clients, namespaces, lambda c, n: c.create_namespace(n).status_code)
        for name, statuses in created.items():
            assert sorted(statuses) == [200] + [409] * (threads - 1), (name, statuses)

        assert a.create_namespace("race").status_code == 200
        tables = [f"race_t_{i}" for i in range(12)]
        made = race(clients, tables, lambda c, n: c.create_table("race", n).status_code)
        for name, statuses in made.items():
            assert sorted(statuses) == [200] + [409] * (threads - 1), (name, statuses)
    finally:
        for client in clients:
            client.close()
    for server in (a, b):
        listed = server.namespaces()
        assert sorted(n for n in listed if n.startswith("race_ns_")) == sorted(namespaces)
        assert sorted(server.tables("race")) == sorted(tables)


def append_with_retries(
    client: Rest, ns: str, name: str, snapshot_id: int, conflicts: list[int]
) -> None:
    """One Iceberg append as clients make it: read the current main, add a snapshot on
    top of it asserting main has not moved, and on 409 refresh and try again."""
    for _ in range(500):
        metadata = client.load(ns, name).json()["metadata"]
        parent = metadata.get("current-snapshot-id")
        parent = None if parent in (None, -1) else parent
        sequence = metadata["last-sequence-number"] + 1
        snapshot: dict[str, Any] = {
            "snapshot-id": snapshot_id,
            "sequence-number": sequence,
            "timestamp-ms": 1_700_000_000_000 + sequence,
            "manifest-list": f"file:///nowhere/snap-{snapshot_id}.avro",
            "summary": {"operation": "append"},
            "schema-id": 0,
        }
        if parent is not None:
            snapshot["parent-snapshot-id"] = parent
        done = client.commit(
            ns,
            name,
            [
                {"action": "add-snapshot", "snapshot": snapshot},
                {
                    "action": "set-snapshot-ref",
                    "ref-name": "main",
                    "type": "branch",
                    "snapshot-id": snapshot_id,
                },
            ],
            [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        )
        if done.status_code == 200:
            return
        assert done.status_code == 409, done.text
        assert done.json()["error"]["type"] == "CommitFailedException"
        conflicts.append(snapshot_id)
    raise AssertionError(f"snapshot {snapshot_id}: still conflicting after 500 attempts")


def test_appenders_on_both_replicas_lose_no_commit(rest: tuple[Rest, Rest]) -> None:
    a, b = rest
    assert a.create_namespace("hot").status_code == 200
    assert a.create_table("hot", "t").status_code == 200
    appenders, appends = 8, 8
    clients = [(a if i % 2 == 0 else b).clone() for i in range(appenders)]
    conflicts: list[int] = []
    acknowledged: list[int] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        for j in range(appends):
            snapshot_id = 1000 * (i + 1) + j
            append_with_retries(clients[i], "hot", "t", snapshot_id, conflicts)
            with lock:
                acknowledged.append(snapshot_id)

    try:
        with ThreadPoolExecutor(appenders) as pool:
            for future in [pool.submit(work, i) for i in range(appenders)]:
                future.result()
    finally:
        for client in clients:
            client.close()
    assert len(acknowledged) == appenders * appends
    seen = [a.load("hot", "t").json(), b.load("hot", "t").json()]
    assert seen[0]["metadata-location"] == seen[1]["metadata-location"], "one catalog"
    metadata = seen[0]["metadata"]
    by_id = {s["snapshot-id"]: s for s in metadata["snapshots"]}
    assert set(by_id) == set(acknowledged)
    chain, cursor = [], metadata["current-snapshot-id"]
    while cursor is not None:  # one linear history: every append on top of the last
        chain.append(cursor)
        cursor = by_id[cursor].get("parent-snapshot-id")
    assert sorted(chain) == sorted(acknowledged)
    assert metadata["last-sequence-number"] == appenders * appends
    assert conflicts, "the appenders should have collided (409, then retry)"


def start_workers_server(data_dir: Path, database_url: str, workers: int) -> CatalogServer:
    """`icelog serve --workers N` (start_server runs a single process)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    # One budget for the replica, shared by its workers (docs/operations.md).
    budget = str(workers * postgres.SERVER_CONNECTIONS)
    env = {**os.environ, **SMALL_POOLS, "ICELOG_PG_MAX_CONNECTIONS": budget}
    env.pop("ICELOG_DEFAULT_WAREHOUSE_LOCATION", None)
    env |= {"ICELOG_DATA_DIR": str(data_dir), "ICELOG_DATABASE_URL": database_url}
    log_path = data_dir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(ICELOG_BIN), "serve", "--port", str(port), "--workers", str(workers)],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = CatalogServer(port, data_dir, database_url, "postgres", process, log_path)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited early:\n{server.log()}"
        try:
            if httpx.get(f"{server.base}/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.stop()
    raise AssertionError(f"--workers {workers} did not become healthy:\n{server.log()}")


def test_one_server_with_two_workers_reads_its_writes(tmp_path: Path) -> None:
    with postgres.temporary_database() as url:
        server = start_workers_server(tmp_path / "workers", url, workers=2)
        writer = Rest(server)
        # A new connection per read: the kernel hands each to either worker process.
        reader = Rest(server, keep_alive=False)
        try:
            stale = read_your_writes(writer, reader, "workers", 1000)
            # The two workers share the replica's budget (their pools keep what they opened).
            connections = postgres.backends(url)
            probe = httpx.get(f"{server.base}/catalog/v1/config?warehouse=default&probe=q1")
            assert probe.status_code == 200
        finally:
            writer.close()
            reader.close()
            server.stop()
    assert stale == [], f"{len(stale)} stale reads of 1,000"
    assert connections <= 2 * postgres.SERVER_CONNECTIONS, connections
    # SIGTERM reaches the parent (which replaced the CLI process): workers stop, exit 0.
    assert server.process.returncode == 0, server.log()
    log = server.log()
    assert "icelog.access GET /catalog/v1/config 200" in log, "each worker logs its requests"
    # uvicorn's own access line (with the query string) stays off in worker processes too.
    assert "uvicorn.access" not in log and "probe=q1" not in log


def _admin_url(url: str) -> str:
    return url.rsplit("/", 1)[0] + "/postgres"


def _copy_database(url: str) -> str:
    """A copy of a database (no session may be connected to it meanwhile)."""
    name = url.rsplit("/", 1)[1]
    copy = f"{name}_replica"
    with psycopg.connect(_admin_url(url), autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(copy), sql.Identifier(name)
            )
        )
    return url.rsplit("/", 1)[0] + "/" + copy


def _events(url: str) -> int:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT count(*) FROM icelog_events").fetchone()
    return int(found[0]) if found else 0


def test_the_read_url_serves_the_read_models_and_nothing_else(tmp_path: Path) -> None:
    with postgres.temporary_database() as primary:
        first = start_server(tmp_path / "before", database_url=primary, env=SMALL_POOLS)
        rest = Rest(first)
        assert rest.create_namespace("ns").status_code == 200
        assert rest.create_table("ns", "t").status_code == 200
        assert rest.set_property("ns", "t", "v", "1").status_code == 200
        rest.close()
        first.stop()
        # The "replica": a copy frozen at this point, i.e. one that lags forever.
        replica = _copy_database(primary)
        try:
            frozen_events = _events(replica)
            server = start_server(
                tmp_path / "after",
                database_url=primary,
                env={**SMALL_POOLS, "ICELOG_DATABASE_READ_URL": replica},
            )
            rest = Rest(server)
            try:
                # A commit is decided on the primary and answered from it...
                done = rest.set_property("ns", "t", "v", "2")
                assert done.status_code == 200, done.text
                assert done.json()["metadata"]["properties"]["v"] == "2"
                # ...while loadTable reads the replica, which has not seen it.
                loaded = rest.load("ns", "t").json()
                assert loaded["metadata"]["properties"]["v"] == "1"
                # The other read models too (CatalogQueries): listing and loading.
                assert rest.create_namespace("later").status_code == 200
                assert "later" not in rest.namespaces()
                assert rest.http.get(f"{rest.base}/namespaces/later").status_code == 404
                # Names are claimed on the primary: the replica's lag cannot duplicate one.
                assert rest.create_namespace("later").status_code == 409
                with psycopg.connect(replica) as conn:
                    names = {
                        r[0]
                        for r in conn.execute(
                            "SELECT application_name FROM pg_stat_activity "
                            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        )
                    }
                assert "icelog-read" in names
            finally:
                rest.close()
                server.stop()
            assert _events(replica) == frozen_events, "nothing was written to the replica"
            assert _events(primary) > frozen_events
        finally:
            postgres.drop_database(replica)


class _Consumer:
    """Follows the events endpoint's continuation tokens on one server, keeping every
    event it is given; `sizes` are the page sizes it asks for in turn."""

    def __init__(self, client: Rest, sizes: tuple[int, ...]) -> None:
        self.client, self.sizes = client, sizes
        self.token: str | None = None
        self.seen: list[dict[str, Any]] = []
        self.pages = 0

    def page(self, size: int | None = None) -> int:
        body: dict[str, Any] = {"page-size": size or self.sizes[self.pages % len(self.sizes)]}
        if self.token is not None:
            body["continuation-token"] = self.token
        answer = self.client.http.post(f"{self.client.base}/events", json=body)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        self.seen.extend(page["events"])
        self.token = str(page["continuation-token"])
        self.pages += 1
        return len(page["events"])

    def drain(self, size: int | None = None) -> None:
        """Until a page comes back empty: caught up (the endpoint indexes first)."""
        while self.page(size):
            pass


def test_an_events_consumer_misses_no_commit_of_either_replica(
    rest: tuple[Rest, Rest], database: str
) -> None:
    """Writers commit on both replicas (each its own table, and now and then a namespace)
    while consumers follow the continuation tokens on A — one in small pages and pages
    that reach the head, one in mid-sized pages — and B's indexer keeps indexing (an
    events request on B catches it up). At the end, for each consumer: every acknowledged
    commit's `update-table` event was seen exactly once, and what it saw is exactly the
    warehouse's events in log order (the rows of the Iceberg events read model, which
    hold every `table.committed` of the log)."""
    a, b = rest
    ns = "feed"
    assert a.create_namespace(ns).status_code == 200
    writers = [(a if i % 2 == 0 else b).clone() for i in range(4)]
    table_ids = []
    for i, client in enumerate(writers):
        made = client.create_table(ns, f"t{i}")
        assert made.status_code == 200, made.text
        table_ids.append(made.json()["metadata"]["table-uuid"])
    consumers = [_Consumer(a.clone(), (7, 500)), _Consumer(a.clone(), (50,))]
    for consumer in consumers:  # what the module's other tests wrote, in big pages
        consumer.drain(1000)
    b_indexer = _Consumer(b.clone(), (1,))
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def guarded(work: Callable[[], object]) -> threading.Thread:
        def run() -> None:
            while not stop.is_set():
                try:
                    work()
                except BaseException as exc:  # reported after the join
                    errors.append(exc)
                    stop.set()

        return threading.Thread(target=run)

    def write(i: int) -> None:
        done = writers[i].set_property(ns, f"t{i}", "n", str(time.monotonic_ns()))
        assert done.status_code == 200, done.text
        with lock:
            acknowledged.append(done.json()["metadata-location"])
            count = len(acknowledged)
        if count % 50 == 0:  # another aggregate, another shape of event
            assert writers[i].create_namespace(f"feed_{count}").status_code == 200

    def index_on_b() -> None:
        b_indexer.token = None  # always the first page: cheap, and B indexes first
        b_indexer.page()

    threads = [guarded(functools.partial(write, i)) for i in range(4)]
    threads += [guarded(consumer.page) for consumer in consumers]
    threads.append(guarded(index_on_b))
    started = time.monotonic()
    try:
        run_for(threads, stop, 15)
    finally:
        for client in (*writers, b_indexer.client):
            client.close()
    assert not errors, errors
    for consumer in consumers:
        consumer.drain()
        consumer.client.close()
    assert time.monotonic() - started < 45
    assert len(acknowledged) > 200, "the writers should have committed for 15 s"

    warehouse = a.base.rsplit("/", 1)[1]
    with psycopg.connect(database) as conn:
        [project] = conn.execute(
            "SELECT project_id FROM icelog_warehouses WHERE id = %s", (warehouse,)
        ).fetchone() or (None,)
        everything = [
            str(r[0])
            for r in conn.execute(
                "SELECT event_id FROM icelog_iceberg_events WHERE stream = ANY(%s) "
                "ORDER BY position",
                ([warehouse, project],),
            )
        ]
        found = conn.execute(
            "SELECT count(*) FROM icelog_events WHERE originator_id::text = ANY(%s) "
            "AND topic = 'icelog.table.committed.v1'",
            (table_ids,),
        ).fetchone()
    assert found is not None and int(found[0]) == len(acknowledged), "every commit is an event"
    for consumer in consumers:
        ids = [e["event-id"] for e in consumer.seen]
        commits = Counter(
            e["operation"].get("metadata-location")
            for e in consumer.seen
            if e["operation"]["operation-type"] == "update-table"
        )
        missed = [m for m in acknowledged if commits[m] == 0]
        print(
            f"pages of {consumer.sizes}: {consumer.pages}; acknowledged commits "
            f"{len(acknowledged)}, missed {len(missed)}; events {len(ids)} of {len(everything)}"
        )
        assert not missed, f"{len(missed)} of {len(acknowledged)} acknowledged commits missed"
        assert all(commits[m] == 1 for m in acknowledged), "each commit once"
        assert len(ids) == len(set(ids)), "no event twice"
        assert ids == everything, f"missed {len(set(everything) - set(ids))} events"
