"""Crash: a commit storm while the server process is SIGKILLed 10 times (5 on SQLite) and
restarted on the same database and data directory.

Commits in flight when the process dies get no answer (CommitStateUnknown): they may or
may not have landed, but never half (an append is three updates in one commit; a
transaction sets a key on two tables). Every acknowledged commit must be there at the
end; the read model must equal the log (`icelog projections verify`); every table's
metadata file must match what its events fold to (`icelog metadata verify`) and what
loadTable serves; every metadata file an event names must exist.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import load
from tests.support.server import CatalogServer, start_server

KILLS = {"postgres": 10, "sqlite": 5}  # SQLite: fewer, to stay in the CI time budget
CLIENTS = 6
TABLES = 6
# Commits only; appends conflict with each other (409, reloaded and retried).
STORM = load.Mix(load=0, list_tables=0, get_namespace=0, set_property=40, append=40, transaction=20)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.mark.parametrize(
    "backend",
    [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"],
)
def test_sigkill_during_commit_storm(
    backend: str, tmp_path: Path, pg_database_factory: Callable[[], str]
) -> None:
    url = pg_database_factory() if backend == "postgres" else None
    data_dir = tmp_path / "icelog"
    env = {"ICELOG_LOG_LEVEL": "warning"}

    def start() -> CatalogServer:
        # start_server truncates server.log: keep each killed incarnation's log.
        log = data_dir / "server.log"
        if log.exists():
            log.rename(data_dir / f"server.log.{len(killed)}")
        return start_server(data_dir, backend=backend, database_url=url, env=env, timeout=60)

    killed: list[CatalogServer] = []

    server = start()
    rng = random.Random(8)
    ledger = load.Ledger()
    started = time.monotonic()
    try:
        prefix = load.warehouse_prefix(server.base)
        tables = load.create_tables(load.RestClient(server.base, prefix), "crash", TABLES)
        with load.running_load(
            [server.base], prefix, tables, CLIENTS, ledger, mix=STORM, timeout=30
        ) as workers:
            for _ in range(KILLS[backend]):
                before = ledger.acknowledged()
                # Let commits land (and be in flight) before the kill.
                deadline = time.monotonic() + 10
                while ledger.acknowledged() < before + 5 and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(rng.uniform(0.1, 0.8))
                server.process.send_signal(signal.SIGKILL)
                server.process.wait(timeout=10)
                killed.append(server)
                server = start()
                for worker in workers:
                    worker.retarget([server.base])
            time.sleep(1.0)  # commits on the last incarnation too
        elapsed = time.monotonic() - started
        print(f"\ncrash ({backend}): {load.summary(ledger, elapsed)}")

        assert ledger.server_errors == [], f"5xx: {ledger.server_errors[:5]}"
        assert ledger.client_errors == [], f"4xx other than 409: {ledger.client_errors[:5]}"
        assert ledger.acknowledged() >= KILLS[backend] * 5
        client = load.RestClient(server.base, prefix, timeout=60)
        problems, totals = load.check_tables(client, tables, ledger)
        print(f"crash ({backend}): final state {totals}")
        assert problems == [], "\n".join(problems[:20])
        assert load.check_metadata_files(client, tables) == []
        event_problems, files = load.check_event_files(server.base)
        assert event_problems == [], "\n".join(event_problems[:20])
        assert files > ledger.acknowledged()
        server.stop()
        assert load.verify_with_cli(server) == []
    finally:
        server.stop()
        for old in killed:
            old.stop()
