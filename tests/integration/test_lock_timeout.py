"""A transaction stuck holding the event table's lock cannot stall every writer: a commit
gives up within about ICELOG_PG_LOCK_TIMEOUT_SECONDS with a clean 503 (nothing was
appended, so retrying is safe), and the next commit after the lock is released lands."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from icelog.api.app import create_app
from icelog.api.services import Services
from tests.integration.conftest import make_settings
from tests.support import postgres
from tests.support.in_process import with_table_db_t

# A lock timeout must not be retried like a lost connection (eventsourcing's @retry on
# OperationalError did that ten times over): projections/sql.py raises DatabaseBusyError.
pytestmark = [pytest.mark.postgres]

LOCK_TIMEOUT_S = 2
# A commit may wait for the lock once, plus the work around it; never ten times over.
BOUND_S = 2 * LOCK_TIMEOUT_S + 2
# However the server behaves, the test itself ends: the lock is released after this.
HOLD_AT_MOST_S = 45


@dataclasses.dataclass
class Served:
    url: str
    client: TestClient
    base: str

    def commit(self, value: str) -> Any:
        return self.client.post(
            f"{self.base}/namespaces/db/tables/t",
            json={"updates": [{"action": "set-properties", "updates": {"v": value}}]},
        )

    def events(self) -> int:
        with psycopg.connect(self.url) as conn:
            found = conn.execute("SELECT count(*) FROM icelog_events").fetchone()
        return int(found[0]) if found else 0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with postgres.temporary_database() as url:
        settings = dataclasses.replace(
            make_settings(tmp_path, url), pg_lock_timeout_seconds=LOCK_TIMEOUT_S
        )
        services = Services.build(settings)
        try:
            with TestClient(create_app(settings, services), raise_server_exceptions=False) as c:
                base = with_table_db_t(c)
                yield Served(url, c, base)
        finally:
            services.close()


def commit_while_locked(served: Served, mode: str) -> tuple[Any, float]:
    """One commit while another session holds `LOCK TABLE icelog_events IN <mode>`."""
    outcome: list[Any] = []
    with psycopg.connect(served.url) as holder:
        holder.execute(f"LOCK TABLE icelog_events IN {mode} MODE")

        def commit() -> None:
            started = time.monotonic()
            response = served.commit("under-lock")
            outcome.append((response, time.monotonic() - started))

        worker = threading.Thread(target=commit)
        worker.start()
        worker.join(timeout=HOLD_AT_MOST_S)
        holder.rollback()  # release, whatever happened
    worker.join(timeout=60)
    assert outcome, "the commit never returned"
    response, seconds = outcome[0]
    return response, seconds


@pytest.mark.parametrize(
    "mode",
    [
        # What a writer takes: a writer that stalled inside its append transaction.
        "EXCLUSIVE",
        # What DDL or VACUUM FULL takes: it also blocks the command's reads of the log.
        "ACCESS EXCLUSIVE",
    ],
)
def test_a_stuck_lock_holder_fails_a_commit_in_time_with_a_503(served: Served, mode: str) -> None:
    assert served.commit("before").status_code == 200
    events = served.events()

    response, seconds = commit_while_locked(served, mode)

    assert seconds < BOUND_S, f"waited {seconds:.1f} s (lock timeout {LOCK_TIMEOUT_S} s)"
    assert seconds >= LOCK_TIMEOUT_S * 0.9, "it did wait for the lock first"
    assert response.status_code == 503, response.text
    error = response.json()["error"]
    assert error["type"] == "ServiceUnavailableException"
    assert error["code"] == 503
    assert served.events() == events, "nothing was appended"

    after = served.commit("after")
    assert after.status_code == 200, after.text
    assert after.json()["metadata"]["properties"]["v"] == "after"
    assert served.events() == events + 1
