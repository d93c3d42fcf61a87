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

# The exported table's columns: (name, Iceberg type, Arrow type, required), in order; the
# Iceberg schema and the Arrow batches are both made from it.
_COLUMNS: tuple[tuple[str, Any, pa.DataType, bool], ...] = (
    ("position", LongType(), pa.int64(), True),
    ("time", TimestamptzType(), pa.timestamp("us", tz="UTC"), True),
    ("type", StringType(), pa.string(), True),
    ("aggregate_id", StringType(), pa.string(), True),
    ("version", LongType(), pa.int64(), True),
    ("actor", StringType(), pa.string(), False),
    ("request_id", StringType(), pa.string(), False),
    ("warehouse_id", StringType(), pa.string(), False),
    ("namespace", StringType(), pa.string(), False),
    ("tabular_id", StringType(), pa.string(), False),
    ("subject", StringType(), pa.string(), False),
    ("data", StringType(), pa.string(), True),
)
SCHEMA = Schema(
    *(
        NestedField(field_id, name, kind, required=required)
        for field_id, (name, kind, _, required) in enumerate(_COLUMNS, start=1)
    )
)
ARROW = pa.schema(
    [pa.field(name, arrow, nullable=not required) for name, _, arrow, required in _COLUMNS]
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
