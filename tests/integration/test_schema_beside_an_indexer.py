"""A replica that starts (and makes sure of its schema) while another replica's indexer is
writing must not deadlock with it (found under load: "deadlock detected" between the
Iceberg events' tracking row and `CREATE INDEX IF NOT EXISTS`'s lock on the events table,
answered to a client as a 503).

The indexer's transaction moves its tracking row, then inserts rows; `ensure_schema`
took the table's SHARE lock (CREATE INDEX IF NOT EXISTS takes it even when the index
exists) and then waited for that row in `INSERT ... ON CONFLICT DO NOTHING`."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from tests.integration.conftest import Api

pytestmark = pytest.mark.postgres

TRACKING_AND_TABLE = [
    ("icelog_iceberg_events_position", "icelog_iceberg_events"),
    ("icelog_catalog_history_position", "icelog_catalog_versions"),
]


@pytest.mark.parametrize(("tracking", "table"), TRACKING_AND_TABLE)
def test_ensure_schema_beside_a_writing_indexer_does_not_deadlock(
    pg_api: Api, tracking: str, table: str
) -> None:
    url = pg_api.services.settings.database_url
    assert url is not None
    indexer = pg_api.client.app.state.indexer  # type: ignore[attr-defined]
    failures: list[BaseException] = []
    with psycopg.connect(url, autocommit=False) as writer:
        cur = writer.cursor()
        cur.execute("SET lock_timeout = '20s'")
        # An indexer's batch: its tracking row first (moved on: a new row version of an
        # open transaction, which `ON CONFLICT` waits for) ...
        cur.execute(f"UPDATE {tracking} SET position = position WHERE id = 1")

        def start_a_replica() -> None:
            try:
                indexer.ensure_schema()
            except BaseException as exc:
                failures.append(exc)

        starting = threading.Thread(target=start_a_replica)
        starting.start()
        time.sleep(1.0)  # the other replica is now inside its schema transaction
        try:
            # ... then the rows it writes (the lock an INSERT takes on the table).
            cur.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")
        except psycopg.Error as exc:
            failures.append(exc)
        writer.rollback()
        starting.join(timeout=30)
    assert not starting.is_alive()
    assert failures == []
