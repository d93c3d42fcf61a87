"""Commits made under older metadata rules replay exactly as they were written (ADR 0012):
metadata rules 2 made validation stricter and normalises type strings and transforms; a
commit logged under rules 1 must still rebuild its document, byte for byte, and never be
refused."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import orjson

from icelog.commands.application import now_ms
from icelog.domain.identifiers import NamespaceName, TabularName
from icelog.domain.metadata_rules import CURRENT, LEGACY, applying
from icelog.domain.table import Table
from icelog.domain.table_metadata import apply_updates, metadata_file_name
from tests.integration.conftest import Api, create_table
from tests.support.hostile import assert_log_verifies, local_path

# Accepted under rules 1, refused or normalised under rules 2.
LEGACY_UPDATES: list[dict[str, Any]] = [
    {
        "action": "add-schema",
        "schema": {
            "type": "struct",
            "schema-id": 1,
            "fields": [
                {"id": 1, "name": "id", "type": "long", "required": True},
                {"id": 2, "name": "data", "type": "string", "required": False},
                {"id": 3, "name": "ts", "type": "timestamptz", "required": False},
                {"id": 4, "name": "amount", "type": "DECIMAL(9,2)", "required": False},
            ],
        },
        "last-column-id": 4,
    },
    {"action": "set-current-schema", "schema-id": -1},
    {
        "action": "add-spec",
        "spec": {"fields": [{"source-id": 1, "transform": "BUCKET[016]", "name": "b"}]},
    },
    {"action": "set-default-spec", "spec-id": -1},
    {
        "action": "add-snapshot",
        "snapshot": {  # no summary: refused in v2 now
            "snapshot-id": 9,
            "sequence-number": 1,
            "timestamp-ms": 1_700_000_000_000,
            "manifest-list": "file:///nowhere/snap-9.avro",
            "schema-id": 1,
        },
    },
]


def legacy_commit(api: Api, name: str) -> tuple[Table, dict[str, Any]]:
    """Append a commit as icelog wrote them under rules 1 (LEGACY): the event, the
    document built under those rules, and its metadata file."""
    catalog = api.services.catalog
    wid = api.services.warehouse_for_prefix(api.prefix)
    table = catalog.tables.get_table(wid, TabularName(NamespaceName(("db",)), name))
    file_io = catalog.app.file_io(catalog.app.storage_profile(wid))
    base = catalog.app.load_metadata(table.metadata_location, file_io)
    applied = now_ms()
    with applying(LEGACY):
        document = apply_updates(
            base, LEGACY_UPDATES, now_ms=applied, previous_location=table.metadata_location
        )
    location = table.metadata_location.rsplit("/", 1)[0] + "/" + metadata_file_name(1, "legacy")
    data = orjson.dumps(document)
    file_io.write_new(location, data)
    table.trigger_event(
        Table.Committed,
        requirements=[],
        updates=LEGACY_UPDATES,
        previous_metadata_location=table.metadata_location,
        metadata_location=location,
        applied_at_ms=applied,
        rules=LEGACY,
        actor="test",
        request_id="legacy",
    )
    catalog.app.save_all(table, hints={location: data})
    return table, document


def test_the_updates_are_refused_or_normalised_under_the_current_rules(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    response = api.post("/namespaces/db/tables/t", {"requirements": [], "updates": LEGACY_UPDATES})
    assert response.status_code == 400, "otherwise this test proves nothing"


def test_a_legacy_commit_replays_to_the_document_it_wrote(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    _table, document = legacy_commit(api, "t")
    assert document["schemas"][1]["fields"][3]["type"] == "DECIMAL(9,2)", "kept as written"
    # A v2 snapshot without `summary`, as the old rules let it in: served as written, which
    # the spec's schema (tests/support/api_contract.py) does not allow.
    api.client.event_hooks["response"].clear()
    loaded = api.get("/namespaces/db/tables/t").json()
    assert loaded["metadata"] == document
    assert json.loads(local_path(loaded["metadata-location"]).read_text()) == document
    # Rebuilding the read model, folding the log and reading the files all agree.
    assert_log_verifies(api.services)
    # A later commit under the current rules works on top of it.
    later = api.post(
        "/namespaces/db/tables/t",
        {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
    )
    assert later.status_code == 200, later.text
    assert_log_verifies(api.services)


def test_events_written_before_the_rules_field_are_upcast_to_rules_1(api: Api) -> None:
    api.post("/namespaces", {"namespace": ["db"]})
    create_table(api, "db", "t")
    committed = api.post(
        "/namespaces/db/tables/t",
        {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
    )
    assert committed.status_code == 200
    catalog = api.services.catalog
    table_id = UUID(committed.json()["metadata"]["table-uuid"])
    stored = catalog.app.recorder.select_events(table_id)[-1]
    state = json.loads(stored.state)
    assert state["rules"] == CURRENT and state["class_version"] == 2
    del state["rules"], state["class_version"]  # as the previous release wrote it
    old = type(stored)(
        originator_id=stored.originator_id,
        originator_version=stored.originator_version,
        topic=stored.topic,
        state=json.dumps(state).encode(),
    )
    event = catalog.app.mapper.to_domain_event(old)
    assert isinstance(event, Table.Committed) and event.rules == LEGACY
