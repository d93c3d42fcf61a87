"""PostgreSQL restarts under load: the catalog recovers without being restarted.

A private cluster (tests/support/pg_cluster.py; the machine's shared PostgreSQL is never
restarted) serves one `icelog serve`. With reads and commits running:

1. `pg_ctl restart -m fast` (every backend terminated, back in well under a second);
2. a longer outage: `pg_ctl stop -m fast`, a few seconds down, `pg_ctl start`;
3. with the load stopped, another restart while the server is idle, then one request of
   each kind: the first requests after an idle restart are the ones that meet the dead
   pooled connections.

While PostgreSQL is down, requests may fail with 503 (or wait for it); none may hang
(client timeout 30 s), none may answer 500, and from a short grace period after
PostgreSQL is back every request must succeed. No acknowledged write is lost, nothing
is half applied, and `icelog projections verify` / `icelog metadata verify` pass.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from eventsourcing.persistence import OperationalError
from eventsourcing.postgres import PostgresDatastore

from icelog.domain.errors import ServiceUnavailableError
from icelog.domain.identifiers import NamespaceName
from icelog.projections.fast_reads import PostgresTabularReader
from icelog.projections.schema import create_statements
from icelog.projections.sql import harden_postgres_datastore
from tests.support import load
from tests.support.pg_cluster import ClusterUnavailable, PgCluster, create_cluster
from tests.support.server import CatalogServer, start_server

CLIENTS = 8
TABLES = 4
OUTAGE_SECONDS = 3.0
# Requests already waiting when PostgreSQL comes back finish within this; later ones
# must all succeed.
GRACE_SECONDS = 2.0

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    try:
        pg = create_cluster()
    except ClusterUnavailable as exc:
        pytest.skip(f"no private PostgreSQL cluster here: {exc}")
    try:
        yield pg
    finally:
        pg.destroy()


@pytest.fixture
def server(cluster: PgCluster, tmp_path: Path) -> Iterator[CatalogServer]:
    url = cluster.create_database("icelog")
    catalog = start_server(
        tmp_path / "icelog",
        backend="postgres",
        database_url=url,
        env={"ICELOG_LOG_LEVEL": "warning"},
    )
    try:
        yield catalog
    finally:
        catalog.stop()


def _probe(client: load.RestClient, tables: list[load.TableRef], tag: str) -> list[str]:
    """One request of each kind, sequentially; the failures."""
    table = tables[0]
    calls: list[tuple[str, Callable[[], httpx.Response]]] = [
        ("listTables", lambda: client.request("GET", f"/namespaces/{table.namespace}/tables")),
        ("getNamespace", lambda: client.request("GET", f"/namespaces/{table.namespace}")),
        ("listNamespaces", lambda: client.request("GET", "/namespaces")),
        ("loadTable", lambda: client.load_table(table)),
        (
            "commit",
            lambda: client.commit(
                table,
                {
                    "requirements": [],
                    "updates": [{"action": "set-properties", "updates": {tag: "1"}}],
                },
            ),
        ),
    ]
    failures = []
    for _ in range(3):
        for name, call in calls:
            response = call()
            if response.status_code >= 300:
                failures.append(f"{name} {response.status_code} {response.text[:300]}")
    return failures


def test_server_recovers_from_postgres_restarts(cluster: PgCluster, server: CatalogServer) -> None:
    prefix = load.warehouse_prefix(server.base)
    client = load.RestClient(server.base, prefix, timeout=30)
    tables = load.create_tables(client, "pgr", TABLES)
    ledger = load.Ledger()
    outages: list[tuple[float, float]] = []
    with load.running_load(
        [server.base], prefix, tables, CLIENTS, ledger, think_s=0.01, timeout=30
    ):
        time.sleep(2.0)
        down = time.monotonic()
        cluster.restart("fast")
        outages.append((down, time.monotonic()))
        time.sleep(4.0)
        down = time.monotonic()
        cluster.stop("fast")
        time.sleep(OUTAGE_SECONDS)
        cluster.start()
        outages.append((down, time.monotonic()))
        time.sleep(5.0)
    print(f"\npg restart: {load.summary(ledger, time.monotonic() - outages[0][0] + 2)}")
    print(f"pg restart: outages {[round(b - a, 2) for a, b in outages]} s")

    # While it was down: 503s or waiting, never another 5xx; outside the outages (and a
    # short grace after each) nothing but success. A request that hung would show here
    # as a timeout, 30 s after it started.
    not_503 = [k for k in ledger.statuses if k.split()[-1][0] == "5" and not k.endswith(" 503")]
    assert not_503 == [], ledger.server_errors[:5]
    assert ledger.client_errors == [], ledger.client_errors[:5]  # 4xx other than 409
    unexpected = [
        f"{t - outages[0][0]:+.2f} s: {e}"
        for t, e in ledger.errors_after
        if not any(down <= t <= up + GRACE_SECONDS for down, up in outages)
    ]
    assert unexpected == [], "\n".join(unexpected[:10])
    assert server.process.poll() is None, "the server died"

    # The idle case: no request in flight when PostgreSQL restarts.
    cluster.restart("fast")
    assert _probe(client, tables, "after-idle-restart") == []

    problems, totals = load.check_tables(client, tables, ledger)
    print(f"pg restart: final state {totals}")
    assert problems == [], "\n".join(problems[:20])
    assert ledger.acknowledged() > 0
    assert load.check_metadata_files(client, tables) == []
    assert load.verify_with_cli(server) == []


def test_pools_survive_restart_and_fail_fast_when_down(cluster: PgCluster) -> None:
    """The two connection sets a server holds, on their own (seconds, pinpoints a
    regression the end-to-end test above would only show as a 500): the write side's
    pool (eventsourcing's PostgresDatastore, hardened) and the async loadTable reader."""
    url = cluster.create_database("components")
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in create_statements("postgres"):
            conn.execute(statement)  # the read model's tables, for the reader's queries
    datastore = PostgresDatastore(
        "components", "127.0.0.1", cluster.port, cluster.user, "",
        pool_size=3, max_overflow=0, connect_timeout=2,
    )  # fmt: skip
    harden_postgres_datastore(datastore)
    reader = PostgresTabularReader(
        {"dbname": "components", "host": "127.0.0.1", "port": cluster.port, "user": cluster.user},
        max_size=3,
        cache_bytes=1 << 20,
    )
    ns = NamespaceName(("ns",))

    def select_one() -> None:
        with datastore.get_connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == {"?column?": 1}

    async def scenario() -> None:
        await reader.open()
        try:
            # Fill both pools, so that a restart leaves only dead connections in them.
            for _ in range(6):
                select_one()
            await asyncio.gather(*(reader.load_tabular("w", ns, "t", "table") for _ in range(6)))

            cluster.restart("fast")
            for _ in range(6):  # before: OperationalError (a 500) once per dead connection
                select_one()
                assert await reader.load_tabular("w", ns, "t", "table") is None

            cluster.stop("fast")
            try:
                started = time.monotonic()
                with pytest.raises(ServiceUnavailableError):
                    await reader.load_tabular("w", ns, "t", "table")
                with pytest.raises(ServiceUnavailableError) as down:
                    select_one()
                # Still the library's OperationalError: its own retries keep working.
                assert isinstance(down.value, OperationalError)
                assert time.monotonic() - started < 10  # bounded by connect_timeout=2
            finally:
                cluster.start()
            select_one()
            assert await reader.load_tabular("w", ns, "t", "table") is None
        finally:
            await reader.close()
            datastore.close()

    asyncio.run(scenario())
