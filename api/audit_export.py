"""`icelog audit export`: the event log into an Iceberg table, through the catalog itself.

The table (default `audit.events` in a chosen warehouse) is an ordinary Iceberg table that
Spark, PyIceberg or DuckDB query. Exports are incremental: the last exported position is a
table property, set in the same commit as the appended rows, so a re-run appends only what
is new and an interrupted run never leaves a gap or a duplicate.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import orjson
import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

from icelog.projections.event_index import EventFilter, EventIndex

POSITION_PROPERTY = "icelog.audit.exported-position"
BATCH = 10_000

SCHEMA = Schema(
    NestedField(1, "position", LongType(), required=True),
    NestedField(2, "time", TimestamptzType(), required=True),
    NestedField(3, "type", StringType(), required=True),
    NestedField(4, "aggregate_id", StringType(), required=True),
    NestedField(5, "version", LongType(), required=True),
    NestedField(6, "actor", StringType(), required=False),
    NestedField(7, "request_id", StringType(), required=False),
    NestedField(8, "warehouse_id", StringType(), required=False),
    NestedField(9, "namespace", StringType(), required=False),
    NestedField(10, "tabular_id", StringType(), required=False),
    NestedField(11, "subject", StringType(), required=False),
    NestedField(12, "data", StringType(), required=True),
)
ARROW = pa.schema(
    [
        pa.field("position", pa.int64(), nullable=False),
        pa.field("time", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("aggregate_id", pa.string(), nullable=False),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("actor", pa.string()),
        pa.field("request_id", pa.string()),
        pa.field("warehouse_id", pa.string()),
        pa.field("namespace", pa.string()),
        pa.field("tabular_id", pa.string()),
        pa.field("subject", pa.string()),
        pa.field("data", pa.string(), nullable=False),
    ]
)


def _table(catalog: RestCatalog, identifier: str) -> Any:
    namespace = identifier.rsplit(".", 1)[0]
    with contextlib.suppress(NamespaceAlreadyExistsError):
        catalog.create_namespace(namespace)
    try:
        return catalog.load_table(identifier)
    except NoSuchTableError:
        # Unpartitioned: PyIceberg writes transform partitions only with the native
        # pyiceberg-core extension; readers filter on `time`/`position` with file statistics.
        return catalog.create_table(identifier, schema=SCHEMA, properties={POSITION_PROPERTY: "0"})


def _rows(events: list[dict[str, Any]]) -> pa.Table:
    columns: dict[str, list[Any]] = {name: [] for name in ARROW.names}
    for e in events:
        columns["position"].append(e["position"])
        columns["time"].append(datetime.fromisoformat(e["time"]).astimezone(UTC))
        columns["type"].append(e["type"])
        columns["aggregate_id"].append(e["aggregate-id"])
        columns["version"].append(e["version"])
        columns["actor"].append(e["actor"])
        columns["request_id"].append(e["request-id"])
        columns["warehouse_id"].append(e["warehouse-id"])
        columns["namespace"].append(e["namespace"])
        columns["tabular_id"].append(e["tabular-id"])
        columns["subject"].append(e["subject"])
        columns["data"].append(orjson.dumps(e["data"]).decode())
    return pa.table(columns, schema=ARROW)


def export_events(
    index: EventIndex, uri: str, warehouse: str, identifier: str = "audit.events"
) -> tuple[int, int]:
    """Append the indexed events after the table's exported position; returns (events
    appended, exported position now)."""
    catalog = RestCatalog("icelog-audit-export", uri=uri, warehouse=warehouse)
    table = _table(catalog, identifier)
    position = int(table.properties.get(POSITION_PROPERTY, "0"))
    appended = 0
    while True:
        events = index.query(EventFilter(after=position, limit=BATCH))
        # Never export the events this export itself causes (its own commits): they are
        # exported by the next run, so every run ends.
        if not events:
            return appended, position
        last = events[-1]["position"]
        with table.transaction() as tx:
            tx.append(_rows(events))
            tx.set_properties({POSITION_PROPERTY: str(last)})
        appended += len(events)
        position = last
        if len(events) < BATCH:
            return appended, position
