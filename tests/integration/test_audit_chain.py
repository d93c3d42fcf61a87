"""Tamper evidence: the hash chain over the stored events (both backends)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from icelog.api.audit import Chainer, recorded_heads
from icelog.projections.audit_chain import AuditChain
from tests.integration.conftest import Api, create_table


def some_history(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    for name in ("a", "b"):
        create_table(api, "db", name)
        for n in range(3):
            response = api.post(
                f"/namespaces/db/tables/{name}",
                {"updates": [{"action": "set-properties", "updates": {"n": str(n)}}]},
            )
            assert response.status_code == 200


def chained_history(api: Api) -> AuditChain:
    """Some history, every event of it chained: the chain."""
    some_history(api)
    chain = AuditChain(api.services.catalog.app.recorder)
    chain.extend()
    return chain


def stored(api: Api, position: int) -> Any:
    [notification] = api.services.catalog.app.recorder.select_notifications(start=position, limit=1)
    return notification


def execute(api: Api, sql: str, params: tuple[Any, ...]) -> None:
    recorder: Any = api.services.catalog.app.recorder
    table = recorder.events_table_name
    datastore = recorder.datastore
    if api.services.settings.backend == "postgres":
        with datastore.get_connection() as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(sql.format(table=table).replace("?", "%s"), params)
    else:
        with datastore.transaction(commit=True) as cur:
            cur.execute(sql.format(table=table), params)


def where_position(api: Api) -> str:
    """The stored event at a log position (SQLite keeps it as the rowid)."""
    if api.services.settings.backend == "postgres":
        return "notification_id = ?"
    return "rowid = ?"


def flip_one_byte(api: Api, position: int) -> None:
    state = bytearray(stored(api, position).state)
    state[len(state) // 2] ^= 0x01
    execute(
        api,
        f"UPDATE {{table}} SET state = ? WHERE {where_position(api)}",
        (bytes(state), position),
    )


def test_an_untouched_log_verifies_and_the_head_is_recorded_as_an_event(api: Api) -> None:
    some_history(api)
    chainer = Chainer(api.services)
    chained, position, link = chainer.round(anchor=True)
    assert chained == position == api.position() - 2, "the anchor's own 2 events come after"
    assert recorded_heads(api.services) == [(position, link)]
    verdict = AuditChain(api.services.catalog.app.recorder).verify()
    assert verdict.broken_at is None and verdict.checked == position
    # The anchor's own events are chained in the next round, but they alone are no reason
    # to record another head.
    assert chainer.round(anchor=True)[0] == 2
    assert chainer.round(anchor=True)[0] == 0
    assert len(recorded_heads(api.services)) == 1
    create_table(api, "db", "later")
    chainer.round(anchor=True)
    assert len(recorded_heads(api.services)) == 2


def test_one_flipped_byte_is_found_at_its_position(api: Api) -> None:
    chain = chained_history(api)
    target = api.position() // 2
    flip_one_byte(api, target)
    verdict = chain.verify()
    assert verdict.broken_at == target
    assert verdict.reason is not None and "differs" in verdict.reason


def test_a_deleted_event_is_found(api: Api) -> None:
    chain = chained_history(api)
    target = api.position() - 3
    execute(api, f"DELETE FROM {{table}} WHERE {where_position(api)}", (target,))
    verdict = chain.verify()
    assert verdict.broken_at == target
    assert verdict.reason is not None and "deleted" in verdict.reason


def test_events_after_the_head_are_not_judged_until_chained(api: Api) -> None:
    chain = chained_history(api)
    head = chain.head()
    create_table(api, "db", "late")
    assert chain.verify().broken_at is None
    assert chain.head() == head
    assert chain.extend() > 0 and chain.verify().broken_at is None


def test_cli_verify_exit_codes_and_a_recomputed_chain_is_caught_by_a_held_head(
    api: Api,
) -> None:
    if api.services.settings.backend != "sqlite":
        return  # the CLI is the same on both; the in-process tests above cover PostgreSQL
    some_history(api)
    env = {
        **os.environ,
        "ICELOG_DATA_DIR": str(api.services.settings.data_dir),
        "ICELOG_TASK_WORKERS": "0",
    }

    def icelog(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "icelog.api", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    chained = icelog("audit", "chain", "--anchor")
    assert chained.returncode == 0, chained.stderr
    held = chained.stdout.strip().rsplit(" ", 1)[1]  # what an outside party keeps
    assert icelog("audit", "verify", "--expect", held).returncode == 0
    flip_one_byte(api, 3)
    tampered = icelog("audit", "verify")
    assert tampered.returncode == 1 and "broken link at position 3" in tampered.stdout
    # An attacker who also recomputes the whole chain passes the internal check, but not
    # the heads recorded in the log earlier, nor a head held outside.
    chain = AuditChain(api.services.catalog.app.recorder)
    with api.services.catalog.app.recorder.datastore.transaction(commit=True) as cur:  # type: ignore[attr-defined]
        cur.execute("DELETE FROM icelog_audit_chain")
    chain.extend()
    assert chain.verify().broken_at is None
    caught = icelog("audit", "verify", "--expect", held)
    assert caught.returncode == 1
    assert "recorded head" in caught.stdout and "expected head" in caught.stdout


def test_jsonl_export_verifies_offline_and_a_changed_line_does_not(api: Api, tmp_path: Any) -> None:
    chain = chained_history(api)
    head_position, head_link = chain.head()
    script = Path(__file__).resolve().parents[2] / "scripts" / "verify_export.py"
    verifier = [sys.executable, str(script)]
    for after in (0, 5):
        lines = list(chain.export_lines(after=after))
        assert len(lines) == 1 + head_position - after
        export = tmp_path / f"export-{after}.jsonl"
        export.write_text("\n".join(lines) + "\n")
        checked = subprocess.run(
            [*verifier, str(export), "--expect", f"{head_position}:{head_link}"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
    changed = lines[3].replace('"version": ', '"version": 1')
    export.write_text("\n".join([*lines[:3], changed, *lines[4:]]) + "\n")
    refused = subprocess.run([*verifier, str(export)], capture_output=True, text=True, check=False)
    assert refused.returncode == 1 and "does not match" in refused.stdout
