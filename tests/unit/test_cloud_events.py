"""Domain events → CloudEvents (pure mapping) and the context resolver's rules."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID, uuid4

from icelog.domain.namespace import Namespace
from icelog.domain.table import Table
from icelog.domain.warehouse import Warehouse
from icelog.publishers.cloud_events import (
    EventContext,
    cloud_event_id,
    from_json,
    to_cloud_event,
    to_json,
)
from icelog.publishers.context import ContextResolver

WHO = {"actor": "alice", "request_id": "req-1"}


def a_table(name: str = "t") -> Table:
    return Table.create(
        table_id=uuid4(),
        warehouse_id=uuid4(),
        namespace_id=uuid4(),
        namespace=["sales", "eu"],
        name=name,
        location="file:///w/sales/eu/t",
        metadata_location="file:///w/sales/eu/t/metadata/00000.metadata.json",
        metadata={"format-version": 2},
        updates=[],
        **WHO,
    )


def test_ids_are_stable_and_distinct_per_aggregate_version() -> None:
    agg = uuid4()
    assert cloud_event_id(agg, 1) == cloud_event_id(agg, 1)
    assert cloud_event_id(agg, 1) != cloud_event_id(agg, 2)
    assert cloud_event_id(agg, 1) != cloud_event_id(uuid4(), 1)
    UUID(cloud_event_id(agg, 1))  # a UUID


def test_a_commit_maps_to_a_complete_cloud_event() -> None:
    table = a_table()
    table.commit(
        requirements=[{"type": "assert-table-uuid", "uuid": "u"}],
        updates=[{"action": "set-properties", "updates": {"k": "v"}}],
        metadata_location="file:///w/sales/eu/t/metadata/00001.metadata.json",
        applied_at_ms=1234,
        **WHO,
    )
    commit = table.collect_events()[-1]
    context = EventContext(
        warehouse_id=table.warehouse_id,
        project_id=UUID(int=0),
        tabular_id=table.id,
        namespace=("sales", "eu"),
        name="t",
        subject="sales.eu.t",
    )
    cloud = to_cloud_event(
        commit, topic="icelog.table.committed.v1", position=42, context=context, source="urn:x"
    )
    assert cloud.get_id() == cloud_event_id(table.id, 2)
    assert cloud.get_type() == "io.icelog.table.committed.v1"
    assert cloud.get_source() == "urn:x"
    assert cloud.get_subject() == "sales.eu.t"
    assert cloud.get_time() == commit.timestamp
    assert cloud.get_extension("sequence") == "00000000000000000042"
    assert cloud.get_extension("warehouseid") == str(table.warehouse_id)
    assert cloud.get_extension("projectid") == str(UUID(int=0))
    assert cloud.get_extension("tabularid") == str(table.id)
    assert cloud.get_extension("namespace") == "sales.eu"
    assert cloud.get_extension("name") == "t"
    assert cloud.get_extension("version") == 2
    assert cloud.get_extension("actor") == "alice"
    assert cloud.get_extension("traceid") == "req-1"
    data: Any = cloud.get_data()
    assert data["updates"] == [{"action": "set-properties", "updates": {"k": "v"}}]
    assert data["requirements"] == [{"type": "assert-table-uuid", "uuid": "u"}]
    assert data["previous-metadata-location"].endswith("00000.metadata.json")
    assert data["metadata-location"].endswith("00001.metadata.json")
    assert data["applied-at-ms"] == 1234
    assert data["aggregate-id"] == str(table.id) and data["aggregate-version"] == 2
    for name in cloud.get_attributes():
        assert re.fullmatch(r"[a-z0-9]+", name), name
    again = from_json(to_json(cloud))
    assert again.get_attributes() == cloud.get_attributes()
    assert again.get_data() == data


def test_sequence_sorts_as_text() -> None:
    table = a_table()
    created = table.collect_events()[0]
    texts = [
        to_cloud_event(
            created, topic="t.v1", position=p, context=EventContext(), source="s"
        ).get_extension("sequence")
        for p in (9, 10, 100, 2)
    ]
    assert sorted(texts) == [texts[3], texts[0], texts[1], texts[2]]


def test_resolver_follows_renames_and_loads_unseen_aggregates_once() -> None:
    table = a_table("orders")
    created, *_ = table.collect_events()
    loads: list[tuple[UUID, int]] = []
    known: dict[UUID, Any] = {}

    def load_at(aggregate_id: UUID, version: int) -> Any:
        loads.append((aggregate_id, version))
        return known.get(aggregate_id)

    resolver = ContextResolver(load_at)
    assert resolver.resolve(created).subject == "sales.eu.orders"
    table.rename(namespace_id=uuid4(), namespace=["archive"], name="orders_2024", **WHO)
    table.commit(requirements=[], updates=[], metadata_location="m2", applied_at_ms=1, **WHO)
    renamed, committed = table.collect_events()
    assert resolver.resolve(renamed).subject == "archive.orders_2024"
    assert resolver.resolve(committed).name == "orders_2024"
    assert [a for a, _ in loads].count(table.id) == 0, "known from the events passed"

    # A relay that starts mid-log loads the aggregate as of the event, once.
    fresh = ContextResolver(load_at)
    known[table.id] = table
    assert fresh.resolve(committed).namespace == ("archive",)
    assert fresh.resolve(committed).namespace == ("archive",)
    assert loads.count((table.id, committed.originator_version)) == 1


def test_resolver_fills_in_the_project_of_a_warehouse() -> None:
    project = uuid4()
    warehouse = Warehouse._create(
        Warehouse.Created,
        id=uuid4(),
        project_id=project,
        name="lake",
        storage_profile={"type": "file"},
        delete_profile={"type": "hard"},
        **WHO,
    )
    ns = Namespace.create(
        namespace_id=uuid4(), warehouse_id=warehouse.id, levels=["db"], properties={}, **WHO
    )
    resolver = ContextResolver(lambda agg, _v: warehouse if agg == warehouse.id else None)
    context = resolver.resolve(ns.collect_events()[0])
    assert (context.warehouse_id, context.project_id, context.subject) == (
        warehouse.id,
        project,
        "db",
    )
