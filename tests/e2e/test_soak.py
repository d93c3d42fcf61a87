"""Soak: 32 clients, mixed reads and commits, against two `icelog serve` replicas on one
PostgreSQL database, for ICELOG_SOAK_SECONDS (default 60).

Asserts: no response with status >= 500 and no request that failed or hung; every
acknowledged commit is in the final metadata, whole, and nothing nobody sent is (see
tests/support/load.py); every acknowledged commit was visible on the other replica at
once (read-your-writes); the metadata files match what is served; `icelog projections
verify` and `icelog metadata verify` pass.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import load
from tests.support.server import CatalogServer, start_server

SOAK_SECONDS = float(os.environ.get("ICELOG_SOAK_SECONDS", "60"))
CLIENTS = 32
TABLES = 16
# Client-side pause between two operations of one client (randomised +-50 %): 32
# clients, the two servers and PostgreSQL share 2 cores, and the point is concurrency
# over time, not the client's throughput.
THINK_SECONDS = 0.01

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.timeout(SOAK_SECONDS + 240),
]


@pytest.fixture
def replicas(
    tmp_path: Path, pg_database_factory: Callable[[], str]
) -> Iterator[list[CatalogServer]]:
    url = pg_database_factory()
    env = {"ICELOG_LOG_LEVEL": "warning"}
    servers: list[CatalogServer] = []
    try:
        for i in range(2):
            servers.append(
                start_server(
                    tmp_path / f"replica{i}", backend="postgres", database_url=url, env=env
                )
            )
        yield servers
    finally:
        for server in servers:
            server.stop()


def test_soak_two_replicas(replicas: list[CatalogServer]) -> None:
    bases = [s.base for s in replicas]
    prefix = load.warehouse_prefix(bases[0])
    admin = load.RestClient(bases[0], prefix, timeout=60)
    # Old metadata files are deleted as commits go (bounded disk; exercises the deletion
    # path on both replicas); metadata-log entries left must still exist.
    tables = load.create_tables(
        admin,
        "soak",
        TABLES,
        **{
            "write.metadata.delete-after-commit.enabled": "true",
            "write.metadata.previous-versions-max": "20",
        },
    )
    ledger = load.Ledger()
    started = time.monotonic()
    with load.running_load(bases, prefix, tables, CLIENTS, ledger, think_s=THINK_SECONDS):
        time.sleep(SOAK_SECONDS)
    elapsed = time.monotonic() - started
    print(f"\nsoak: {load.summary(ledger, elapsed)}")
    problems = _problems(replicas, prefix, tables, ledger)
    if problems:
        for i, server in enumerate(replicas):
            print(f"--- replica {i} log (tail) ---\n{server.log()[-6000:]}")
    assert problems == [], "\n".join(problems)


def _problems(
    replicas: list[CatalogServer], prefix: str, tables: list[load.TableRef], ledger: load.Ledger
) -> list[str]:
    """Every check, all reported together (a 5xx must not hide a lost commit)."""
    problems = [f"replica {i} died" for i, s in enumerate(replicas) if s.process.poll() is not None]
    if ledger.server_errors:
        problems.append(f"{len(ledger.server_errors)} 5xx: {ledger.server_errors[:5]}")
    if ledger.client_errors:
        problems.append(f"{len(ledger.client_errors)} 4xx: {ledger.client_errors[:5]}")
    if ledger.transport_errors:
        problems.append(
            f"{len(ledger.transport_errors)} requests failed: {ledger.transport_errors[:5]}"
        )
    if ledger.retries_exhausted:
        problems.append(f"{ledger.retries_exhausted} appends still conflicting after 50 tries")
    if ledger.stale_reads:
        problems.append(f"read-your-writes broken: {ledger.stale_reads[:5]}")
    if not ledger.acknowledged():
        problems.append("no commit was acknowledged")
    # The end state, read through the replica that did NOT create the tables.
    reader = load.RestClient(replicas[1].base, prefix, timeout=60)
    lost, totals = load.check_tables(reader, tables, ledger)
    print(f"soak: final state {totals}")
    problems += lost[:20]
    problems += load.check_metadata_files(reader, tables)[:20]
    problems += load.verify_with_cli(replicas[0])
    return problems
