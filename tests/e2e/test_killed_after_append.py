"""A process killed between a commit's append and its answer. The client hears nothing; a
retry with the same Idempotency-Key, on a fresh server, is answered with the commit that
landed (not a 409 that Java clients read as "failed" — they would re-apply the append or
delete its files), the metadata file the log names is there, and the log, the read model and
the files all verify."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import start_icelog, start_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def commit(snapshot_id: int) -> dict[str, Any]:
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
        "updates": [
            {
                "action": "add-snapshot",
                "snapshot": {
                    "snapshot-id": snapshot_id,
                    "sequence-number": 1,
                    "timestamp-ms": 1_700_000_000_000,
                    "manifest-list": "file:///nowhere/snap.avro",
                    "summary": {"operation": "append"},
                    "schema-id": 0,
                },
            },
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
             "snapshot-id": snapshot_id},
        ],
    }  # fmt: skip


@pytest.mark.parametrize(
    "backend", [pytest.param("postgres", marks=pytest.mark.postgres), "sqlite"]
)
def test_a_retry_after_the_server_died_between_append_and_answer(
    backend: str, tmp_path: Path, pg_database_factory: Callable[[], str]
) -> None:
    url = pg_database_factory() if backend == "postgres" else None
    data = tmp_path / "icelog"
    # Dies right after its first table commit is in the log, before answering it.
    dying = (sys.executable, "-m", "tests.support.dying_server", "1")
    doomed = start_server(data, backend=backend, database_url=url, icelog=dying)
    base = f"{doomed.base}/catalog/v1"
    schema = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long",
                                            "required": True}]}  # fmt: skip
    assert httpx.post(f"{base}/namespaces", json={"namespace": ["db"]}).status_code == 200
    made = httpx.post(f"{base}/namespaces/db/tables", json={"name": "t", "schema": schema})
    assert made.status_code == 200, made.text
    key = {"Idempotency-Key": str(uuid.uuid4())}
    with pytest.raises(httpx.HTTPError):  # the process dies before it answers
        httpx.post(f"{base}/namespaces/db/tables/t", json=commit(1), headers=key, timeout=30)
    assert doomed.process.wait(timeout=30) == 137
    server = start_server(data, backend=backend, database_url=url)
    try:
        base = f"{server.base}/catalog/v1"
        retry = httpx.post(f"{base}/namespaces/db/tables/t", json=commit(1), headers=key)
        assert retry.status_code == 200, retry.text
        assert retry.json()["metadata"]["current-snapshot-id"] == 1
        loaded = httpx.get(f"{base}/namespaces/db/tables/t").json()
        assert loaded["metadata-location"] == retry.json()["metadata-location"]
        assert Path(loaded["metadata-location"].removeprefix("file://")).is_file()
        # Without the key the same request is a conflict: the commit happened once.
        assert httpx.post(f"{base}/namespaces/db/tables/t", json=commit(1)).status_code == 409
    finally:
        server.stop()
    for check in (["audit", "verify"], ["projections", "verify"], ["metadata", "verify"]):
        done = start_icelog(server, check, {}, tmp_path / "verify.log")
        assert done.wait(timeout=120) == 0, (tmp_path / "verify.log").read_text()
