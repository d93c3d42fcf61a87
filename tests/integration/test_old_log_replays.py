"""A log written by an earlier release replays, under this code, to the read models that
release wrote.

The fixtures were written by the code of commit 6110573 (the last before the catalog was
recomposed from parts, tables and views put on one core and the read model given one
writer): its events document scenario — every event type the catalog appended then — and
105 commits on one table and 205 property changes on one namespace, so that both hold an
aggregate snapshot that release stored. `6110573.sqlite.gz` is the embedded database;
`6110573.postgres.sql.gz` is `pg_dump` of the same on PostgreSQL, with the two server-side
append functions that release used.

What must hold, on both: the schema upgrades in place; `icelog projections verify` folds
the whole log with today's fold and finds every read-model row the old code wrote; the
audit chain verifies; every aggregate loads, and one loaded through the old snapshot
equals one replayed from its events alone; the table at the snapshot takes a new commit.
"""

from __future__ import annotations

import base64
import gzip
import json
import secrets
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast
from uuid import UUID

import psycopg
import pytest

from icelog.api.settings import Settings
from tests.integration.test_cli import icelog
from tests.support import postgres
from tests.support.in_process import default_prefix, serving

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
EVENTS = 504  # in each fixture
SNAPSHOTTED = 2  # aggregates with a stored snapshot (the table and the namespace)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a catalog whose store holds the old release's log."""
    env = {"ICELOG_DATA_DIR": str(tmp_path), "ICELOG_TASK_WORKERS": "0"}
    if request.param == "sqlite":
        raw = gzip.decompress((FIXTURES / "6110573.sqlite.gz").read_bytes())
        (tmp_path / "catalog.db").write_bytes(raw)
        yield env
        return
    with postgres.temporary_database() as url:
        dump = gzip.decompress((FIXTURES / "6110573.postgres.sql.gz").read_bytes())
        subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", url],
            input=dump,
            check=True,
            capture_output=True,
            timeout=120,
        )
        # The release's storage credentials were encrypted with a key not kept here:
        # nothing below reads them.
        key = secrets.token_bytes(32)
        yield {
            **env,
            "ICELOG_DATABASE_URL": url,
            "ICELOG_SECRETS_KEY": base64.b64encode(key).decode(),
        }


def _stored(env: dict[str, str]) -> list[tuple[UUID, int]]:
    """Every aggregate of the log and its last version."""
    query = "SELECT originator_id, max(originator_version) FROM {} GROUP BY originator_id"
    url = env.get("ICELOG_DATABASE_URL")
    if url is None:
        with sqlite3.connect(Path(env["ICELOG_DATA_DIR"]) / "catalog.db") as conn:
            rows: list[Any] = conn.execute(query.format("stored_events")).fetchall()
        return [(UUID(hex=str(r[0])), int(r[1])) for r in rows]
    with psycopg.connect(url) as pg:
        found = pg.execute(query.format("icelog_events")).fetchall()
    return [(UUID(str(r[0])), int(r[1])) for r in found]


def _restore_metadata_file(location: str, metadata: dict[str, Any]) -> None:
    """Put the table's current metadata file back where the old release wrote it: the
    fixture holds the log, not the warehouse's files, and a commit reads the current file.
    The document is the one the log folds to (what loadTable answers)."""
    path = Path(location.removeprefix("file://"))
    # Each fixture's warehouse is /tmp/replay-old[-pg]/warehouse: nothing else is written.
    assert path.parts[:2] == ("/", "tmp") and path.parts[2].startswith("replay-old"), location
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():  # an earlier run put it there
        return
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
    partial.write_text(json.dumps(metadata))
    partial.replace(path)


def test_the_log_of_an_earlier_release_replays_to_its_read_models(
    old_store: dict[str, str],
) -> None:
    migrated = icelog("migrate", env=old_store)
    assert migrated.returncode == 0, migrated.stderr
    verified = icelog("projections", "verify", env=old_store)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"read model matches the log: {EVENTS} event(s)" in verified.stdout
    chain = icelog("audit", "verify", env=old_store)
    assert chain.returncode == 0, chain.stdout + chain.stderr


def test_every_aggregate_of_an_earlier_release_loads_as_its_events_say(
    old_store: dict[str, str],
) -> None:
    assert icelog("migrate", env=old_store).returncode == 0
    stored = _stored(old_store)
    assert len(stored) > 50
    settings = Settings.from_env(old_store)
    with serving(settings) as (services, client):
        app = services.catalog.app
        snapshotted = 0
        for aggregate_id, version in stored:
            loaded: Any = app.repository.get(aggregate_id)
            assert loaded.version == version
            replayed: Any = None
            for event in app.events.get(aggregate_id):
                replayed = cast(Any, event).mutate(replayed)
            assert vars(loaded) == vars(replayed), f"{type(loaded).__name__} {aggregate_id}"
            snapshots = app.snapshots
            if snapshots is not None and list(snapshots.get(aggregate_id)):
                snapshotted += 1
        assert snapshotted == SNAPSHOTTED

        base = f"/catalog/v1/{default_prefix(client)}/namespaces/snap/tables/t"
        loaded_table = client.get(base).json()
        table = loaded_table["metadata"]
        _restore_metadata_file(loaded_table["metadata-location"], table)
        assert len(table["snapshots"]) == 105
        parent = table["current-snapshot-id"]
        snapshot = {
            "snapshot-id": parent + 1,
            "parent-snapshot-id": parent,
            "sequence-number": table["last-sequence-number"] + 1,
            "timestamp-ms": table["last-updated-ms"] + 1,
            "manifest-list": f"{table['location']}/metadata/snap-next.avro",
            "summary": {"operation": "append"},
            "schema-id": 0,
        }
        committed = client.post(
            base,
            json={
                "requirements": [
                    {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}
                ],
                "updates": [
                    {"action": "add-snapshot", "snapshot": snapshot},
                    {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                     "snapshot-id": parent + 1},
                ],
            },
        )  # fmt: skip
        assert committed.status_code == 200, committed.text
        assert committed.json()["metadata"]["current-snapshot-id"] == parent + 1
