"""Property: every table or view document icelog accepts loads in PyIceberg.

Hypothesis generates CreateTable requests, create transactions and sequences of
commits, mixing what real clients send with hostile input: duplicate or dotted
names, negative and oversized ids, odd type strings (`INT`, `decimal(99, 2)`,
`variant`, `geometry(srid:4326)`), bad defaults, bad transforms
(`bucket[0]`, `truncate[-1]`), sequence numbers around last-sequence-number,
unknown schema ids, missing or odd snapshot summaries, malformed statistics and
schemas nested up to 900 levels. They are applied with icelog's domain functions
(no server). Every attempt must either be refused with a 400 (409 for a commit
conflict) or produce a document that

- orjson can write inside a REST response (it writes at most 254 levels),
- PyIceberg 0.12 parses as its REST client does (`TableResponse` /
  `ViewResponse.model_validate_json`), and whose current schema, partition spec,
  sort order and snapshots it can build, and
- keeps the invariants Java's `TableMetadata` checks when it loads a file.

Anything else (a RecursionError, a KeyError, a document PyIceberg refuses) fails.
"""

from __future__ import annotations

import json
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.rest import TableResponse, ViewResponse
from pyiceberg.io.pyarrow import schema_to_pyarrow

from icelog.domain.errors import CatalogError, CommitFailedError
from icelog.domain.schema_types import MAX_SCHEMA_DEPTH
from icelog.domain.table_metadata import Metadata, apply_updates, new_table_metadata
from icelog.domain.view_metadata import ViewMetadata, apply_view_updates, new_view_metadata
from tests.support.metadata_docs import first_view_version, nested_schema

UUID = "9c12d441-03fe-4693-9a96-a0705ddf69c1"
LOC = "s3://bucket/db/t"

GOOD_TYPES = [
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "string",
    "uuid",
    "binary",
    "decimal(9, 2)",
    "fixed[4]",
    "timestamp_ns",
    "timestamptz_ns",
    "unknown",
    "geometry",
    "geography",
]
ODD_TYPES = [
    "INT",
    " int",
    "Decimal(9,2)",
    "decimal( 38 , 0 )",
    "decimal(99, 2)",
    "decimal(0, 0)",
    "decimal(38, 40)",
    "decimal(9, 99999999999)",
    "fixed[ 3 ]",
    "fixed[0]",
    "FIXED[2147483648]",
    "variant",
    "geometry(OGC:CRS84)",
    "geometry(srid:4326)",
    "geography(srid:4326, karney)",
    "geography(OGC:CRS84, spherical)",
    "geometry()",
    "TimestampTZ",
    "bogus",
    "",
]
NAMES = ["a", "b", "c", "id", "a.b", "x y", "", "A"]
ODD_IDS = [-1, -7, 0, 2**31, 2**31 - 1]
DEFAULTS = [1, 2**40, 1.5, True, "x", "1.50", "2024-01-01", "2024-01-01T00:00:00", {}, [1], None]
TRANSFORMS = [
    "identity",
    "year",
    "month",
    "day",
    "hour",
    "void",
    "bucket[16]",
    "truncate[4]",
    "bucket[0]",
    "bucket[-1]",
    "truncate[0]",
    "bucket[2147483648]",
    "BUCKET[016]",
    "Truncate[ 3 ]",
    "bogus",
]
DIRECTIONS = ["asc", "desc", "ASC", "sideways"]
NULL_ORDERS = ["nulls-first", "nulls-last", "NULLS-LAST", "middle"]
OPERATIONS = ["append", "overwrite", "delete", "replace", "APPEND", "merge", None]
BLOB_TYPES = ["apache-datasketches-theta-v1", "deletion-vector-v1", "ndv-v9"]

VALID_DEFAULTS: dict[str, list[Any]] = {
    "boolean": [True],
    "int": [5],
    "long": [2**40],
    "float": [1.5],
    "double": [2.5],
    "date": ["2024-02-29"],
    "time": ["12:30:00"],
    "timestamp": ["2024-01-01T00:00:00.123456"],
    "timestamptz": ["2024-01-01T00:00:00+00:00"],
    "string": ["x"],
    "uuid": ["f79c3e09-677c-4bbd-a479-3f349cb785e7"],
    "binary": ["00ff"],
    "decimal(9, 2)": ["1.50"],
    "fixed[4]": ["0a0b0c0d"],
}
# Transforms a clean request uses for each source type.
CLEAN_TRANSFORMS: dict[str, list[str]] = {
    "int": ["identity", "bucket[4]", "truncate[10]", "void"],
    "long": ["identity", "bucket[8]"],
    "string": ["identity", "bucket[16]", "truncate[3]"],
    "date": ["identity", "year", "month", "day"],
    "timestamp": ["identity", "day", "hour"],
    "timestamptz": ["hour", "month"],
    "decimal(9, 2)": ["bucket[4]", "truncate[2]"],
    "boolean": ["identity"],
}

Draw = Callable[[st.SearchStrategy[Any]], Any]


class Drawing:
    def __init__(self, draw: Draw) -> None:
        self.draw = draw

    def chance(self, percent: int) -> bool:
        return bool(self.draw(st.integers(0, 99)) < percent)

    def pick(self, options: list[Any]) -> Any:
        return self.draw(st.sampled_from(options))


class Schemas(Drawing):
    """Draws schema JSON: well-formed, or (one in three) with hostile parts."""

    def __init__(self, draw: Draw) -> None:
        super().__init__(draw)
        self.next_id = 1
        self.hostile = False
        self.version = 3

    def odd(self, percent: int) -> bool:
        return self.hostile and self.chance(percent)

    def field_id(self) -> int:
        if self.odd(10):
            return int(self.pick([*ODD_IDS, 1, 2]))
        self.next_id += 1
        return self.next_id - 1

    def primitive(self) -> str:
        if self.odd(15):
            return str(self.pick(ODD_TYPES))
        if self.version < 3 and not self.odd(20):
            return str(self.pick(GOOD_TYPES[:14]))  # no v3-only types
        return str(self.pick(GOOD_TYPES))

    def type_(self, depth: int) -> Any:
        kind = self.pick(["p", "p", "p", "struct", "list", "map"])
        if depth <= 0 or kind == "p":
            return self.primitive()
        if kind == "struct":
            return self.struct(depth - 1)
        if kind == "list":
            element_id = self.field_id()
            return {
                "type": "list",
                "element-id": element_id,
                "element-required": self.draw(st.booleans()),
                "element": self.type_(depth - 1),
            }
        key_id, value_id = self.field_id(), self.field_id()
        return {
            "type": "map",
            "key-id": key_id,
            "key": self.pick(["string", "int", "long"] + (["unknown"] if self.hostile else [])),
            "value-id": value_id,
            "value-required": self.draw(st.booleans()),
            "value": self.type_(depth - 1),
        }

    def field(self, depth: int) -> dict[str, Any]:
        fid = self.field_id()
        type_ = self.type_(depth)
        field: dict[str, Any] = {
            "id": fid,
            "name": f"c{fid}" if not self.odd(15) else self.pick(NAMES),
            "required": self.draw(st.booleans()) and type_ != "unknown",
            "type": type_,
        }
        if self.odd(10):
            field["required"] = True
        if self.chance(10):
            field["doc"] = 5 if self.odd(50) else "a doc"
        if self.chance(15):
            key = "write-default"
            if self.version >= 3 or self.odd(20):
                key = self.pick(["initial-default", "write-default"])
            if self.odd(60):
                field[key] = self.pick(DEFAULTS)
            elif isinstance(type_, str) and type_ in VALID_DEFAULTS:
                field[key] = self.pick(VALID_DEFAULTS[type_])
        return field

    def struct(self, depth: int) -> dict[str, Any]:
        count = self.draw(st.integers(1, 4))
        return {"type": "struct", "fields": [self.field(depth) for _ in range(count)]}

    def schema(self, version: int, hostile: bool | None = None) -> dict[str, Any]:
        self.hostile = self.chance(35) if hostile is None else hostile
        self.version = version
        if self.odd(25):
            return self.deep()
        schema = self.struct(self.draw(st.integers(0, 3)))
        # A required top-level long to partition, sort and identify by.
        self.next_id += 1
        key = {"id": self.next_id - 1, "name": f"k{self.next_id - 1}", "required": True}
        schema["fields"].insert(0, key | {"type": "long"})
        if self.chance(20):
            ids = [f["id"] for f in schema["fields"]]
            schema["identifier-field-ids"] = [ids[0], 999] if self.odd(50) else [ids[0]]
        if self.odd(15):
            schema["schema-id"] = self.pick([7, 2**31])
        return schema

    def deep(self) -> dict[str, Any]:
        """A chain of struct/list/map types around and beyond MAX_SCHEMA_DEPTH."""
        depth = self.pick(
            [2, MAX_SCHEMA_DEPTH - 1, MAX_SCHEMA_DEPTH, MAX_SCHEMA_DEPTH + 1, 100, 300, 900]
        )
        event(f"deep schema: {depth} levels")
        kinds = self.draw(st.lists(st.sampled_from(["struct", "list", "map"]), min_size=1))
        type_: Any = "int"
        for i in range(depth - 1):
            kind = kinds[i % len(kinds)]
            if kind == "struct":
                type_ = {"type": "struct", "fields": [self.plain(f"f{i}", type_)]}
            elif kind == "list":
                self.next_id += 1
                type_ = {
                    "type": "list",
                    "element-id": self.next_id - 1,
                    "element-required": False,
                    "element": type_,
                }
            else:
                self.next_id += 2
                type_ = {
                    "type": "map",
                    "key-id": self.next_id - 2,
                    "key": "string",
                    "value-id": self.next_id - 1,
                    "value-required": False,
                    "value": type_,
                }
        return {"type": "struct", "fields": [self.plain("id", "long"), self.plain("deep", type_)]}

    def plain(self, name: str, type_: Any) -> dict[str, Any]:
        self.next_id += 1
        return {"id": self.next_id - 1, "name": name, "required": False, "type": type_}


def field_ids(schema: dict[str, Any]) -> list[int]:
    ids: list[int] = []
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "struct":
            for f in node.get("fields", []):
                ids.append(f["id"])
                stack.append(f["type"])
        elif kind == "list":
            ids.append(node["element-id"])
            stack.append(node["element"])
        elif kind == "map":
            ids.extend([node["key-id"], node["value-id"]])
            stack.extend([node["key"], node["value"]])
    return ids


class Tables(Drawing):
    """Draws requests against the current document (or none, for creates)."""

    def __init__(self, draw: Draw) -> None:
        super().__init__(draw)
        self.schemas = Schemas(draw)
        self.clock = 1_000
        self.next_snapshot_id = 100

    def columns(self, schema: Any) -> list[dict[str, Any]]:
        fields = schema.get("fields") if isinstance(schema, dict) else None
        return [
            f
            for f in fields or []
            if isinstance(f, dict)
            and isinstance(f.get("type"), str)
            and f["type"] in CLEAN_TRANSFORMS
        ]

    def fields_to_draw(self, schema: Any, most: int) -> tuple[bool, list[dict[str, Any]], range]:
        """Whether the fields are hostile, the columns clean ones may use, and up to `most`
        indexes (drawn in this order)."""
        return self.chance(30), self.columns(schema), range(self.draw(st.integers(0, most)))

    def spec(self, schema: Any) -> dict[str, Any]:
        hostile, columns, indexes = self.fields_to_draw(schema, 3)
        fields = []
        for i in indexes:
            if hostile or not columns:
                field: dict[str, Any] = {
                    "name": self.pick(["p", "id", ""]) + str(i),
                    "transform": self.pick(TRANSFORMS),
                    "source-id": self.pick([*field_ids(schema), 999, -1, 2**31]),
                }
                if self.chance(20):
                    field["source-ids"] = [field.pop("source-id"), self.pick(field_ids(schema))]
            else:
                column = self.pick(columns)
                field = {
                    "name": f"p{i}_{column['name']}",
                    "transform": self.pick(CLEAN_TRANSFORMS[column["type"]]),
                    "source-id": column["id"],
                }
            fields.append(field)
        return {"spec-id": 0, "fields": fields}

    def order(self, schema: Any) -> dict[str, Any]:
        hostile, columns, indexes = self.fields_to_draw(schema, 2)
        fields = []
        for _ in indexes:
            if hostile or not columns:
                fields.append(
                    {
                        "source-id": self.pick([*field_ids(schema), 999]),
                        "transform": self.pick(TRANSFORMS),
                        "direction": self.pick(DIRECTIONS),
                        "null-order": self.pick(NULL_ORDERS),
                    }
                )
            else:
                column = self.pick(columns)
                fields.append(
                    {
                        "source-id": column["id"],
                        "transform": self.pick(CLEAN_TRANSFORMS[column["type"]]),
                        "direction": self.pick(DIRECTIONS[:2]),
                        "null-order": self.pick(NULL_ORDERS[:2]),
                    }
                )
        return {"order-id": 1 if fields else 0, "fields": fields}

    def create(self) -> Metadata:
        version = self.pick([1, 2, 3])
        schema = self.schemas.schema(version)
        return new_table_metadata(
            uuid=UUID,
            location=LOC,
            schema=schema,
            partition_spec=self.spec(schema),
            sort_order=self.order(schema),
            properties={"format-version": str(version)},
            now_ms=self.clock,
        )

    def create_transaction(self) -> list[dict[str, Any]]:
        version = self.pick([1, 2, 3])
        schema = self.schemas.schema(version)
        updates: list[dict[str, Any]] = [
            {"action": "assign-uuid", "uuid": UUID},
            {"action": "upgrade-format-version", "format-version": version},
            {"action": "add-schema", "schema": schema},
            {"action": "set-current-schema", "schema-id": -1 if self.chance(85) else 4},
            {"action": "add-spec", "spec": self.spec(schema)},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": self.order(schema)},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": LOC},
        ]
        if self.chance(50):
            updates += self.append_updates(None, version)
        return updates

    # ----------------------------------------------------------------- commits

    def current_schema(self, m: Metadata) -> dict[str, Any]:
        schema: dict[str, Any] = next(
            s for s in m["schemas"] if s["schema-id"] == m["current-schema-id"]
        )
        return schema

    def snapshot(self, m: Metadata | None, version: int) -> dict[str, Any]:
        hostile = self.chance(35)

        def odd(percent: int) -> bool:
            return hostile and self.chance(percent)

        self.next_snapshot_id += 1
        self.clock += 10
        last = m.get("last-sequence-number", 0) if m else 0
        parents = [s["snapshot-id"] for s in m["snapshots"]] if m else []
        snap: dict[str, Any] = {
            "snapshot-id": self.next_snapshot_id,
            "timestamp-ms": self.clock,
            "manifest-list": f"{LOC}/metadata/snap-{self.next_snapshot_id}.avro",
            "schema-id": m["current-schema-id"] if m else 0,
            "summary": {"operation": self.pick(OPERATIONS[:4]), "added-records": "3"},
        }
        if odd(20):
            snap["snapshot-id"] = self.pick([*parents[:1], 2**63])
        if odd(20):
            snap["schema-id"] = self.pick([7, 2**31, None])
        parent = parents[-1] if parents and not odd(30) else None
        if parent is not None:
            snap["parent-snapshot-id"] = parent
        if version >= 2 or odd(10):
            step = self.pick([0, -1, -5, 5]) if odd(40) else 1
            snap["sequence-number"] = last + step
        if odd(30):
            kind = self.pick(["none", "empty", "no-op", "odd-op"])
            if kind == "none":
                del snap["summary"]
            elif kind == "empty":
                snap["summary"] = {}
            elif kind == "no-op":
                snap["summary"] = {"added-records": "3"}
            else:
                snap["summary"] = {"operation": self.pick(OPERATIONS[4:6])}
        if version >= 3 or odd(10):
            next_row = m.get("next-row-id", 0) if m else 0
            snap["first-row-id"] = next_row + (self.pick([3, -100]) if odd(20) else 0)
            snap["added-rows"] = self.pick([0, -1]) if odd(20) else 5
        if odd(10):
            snap.pop("manifest-list")
            snap["manifests"] = [f"{LOC}/metadata/m.avro"]
        if odd(10):
            snap["key-id"] = self.pick(["k1", 5])
        return snap

    def append_updates(self, m: Metadata | None, version: int) -> list[dict[str, Any]]:
        snap = self.snapshot(m, version)
        ref = self.pick(["main", "main", "b1", "t1"])
        update: dict[str, Any] = {
            "action": "set-snapshot-ref",
            "ref-name": ref,
            "type": "tag" if ref == "t1" else "branch",
            "snapshot-id": snap["snapshot-id"],
        }
        if self.chance(10):
            update["min-snapshots-to-keep"] = self.pick([1, 0, 2**31])
        return [{"action": "add-snapshot", "snapshot": snap}, update]

    def statistics(self, m: Metadata) -> dict[str, Any]:
        ids = [s["snapshot-id"] for s in m["snapshots"]] or [1]
        stats: dict[str, Any] = {
            "snapshot-id": self.pick(ids),
            "statistics-path": f"{LOC}/metadata/s.puffin",
            "file-size-in-bytes": 10,
            "file-footer-size-in-bytes": 5,
            "blob-metadata": [
                {
                    "type": self.pick(BLOB_TYPES),
                    "snapshot-id": ids[0],
                    "sequence-number": 1,
                    "fields": [1],
                    "properties": {"ndv": "3"},
                }
            ],
        }
        if self.chance(25):
            stats.pop(self.pick(sorted(stats)))
        return {"action": "set-statistics", "statistics": stats}

    def commit(self, m: Metadata) -> list[dict[str, Any]]:
        kind = self.pick(
            [
                "add-schema",
                "evolve-schema",
                "evolve-schema",
                "set-current-schema",
                "add-spec",
                "add-sort-order",
                "append",
                "append",
                "append",
                "statistics",
                "partition-statistics",
                "upgrade",
                "remove-snapshots",
                "remove-schemas",
            ]
        )
        event(f"commit: {kind}")
        schema = self.current_schema(m)
        if kind in ("add-schema", "evolve-schema"):
            self.schemas.next_id = m["last-column-id"] + 1
            new = self.schemas.schema(m["format-version"])
            if kind == "evolve-schema":
                new = dict(schema) | {"fields": [*schema["fields"], *new["fields"][1:2]]}
            return [
                {"action": "add-schema", "schema": new},
                {"action": "set-current-schema", "schema-id": -1},
            ]
        if kind == "set-current-schema":
            ids = [s["schema-id"] for s in m["schemas"]]
            return [{"action": "set-current-schema", "schema-id": self.pick([*ids, -1, 99, 2**31])}]
        if kind == "add-spec":
            return [
                {"action": "add-spec", "spec": self.spec(schema)},
                {"action": "set-default-spec", "spec-id": -1},
            ]
        if kind == "add-sort-order":
            return [
                {"action": "add-sort-order", "sort-order": self.order(schema)},
                {"action": "set-default-sort-order", "sort-order-id": -1},
            ]
        if kind == "append":
            return self.append_updates(m, m["format-version"])
        if kind == "statistics":
            return [self.statistics(m)]
        if kind == "partition-statistics":
            stats: dict[str, Any] = {
                "snapshot-id": ([s["snapshot-id"] for s in m["snapshots"]] or [1])[0],
                "statistics-path": f"{LOC}/metadata/p.parquet",
                "file-size-in-bytes": self.pick([10, 10, "10", None]),
            }
            return [{"action": "set-partition-statistics", "partition-statistics": stats}]
        if kind == "upgrade":
            return [{"action": "upgrade-format-version", "format-version": self.pick([2, 3])}]
        if kind == "remove-snapshots":
            ids = [s["snapshot-id"] for s in m["snapshots"]]
            removed = self.draw(st.lists(st.sampled_from(ids), max_size=2)) if ids else []
            return [{"action": "remove-snapshots", "snapshot-ids": removed}]
        ids = [s["schema-id"] for s in m["schemas"] if s["schema-id"] != m["current-schema-id"]]
        return [{"action": "remove-schemas", "schema-ids": ids[:1]}]


# ----------------------------------------------------------------------- checks


def check_refusal(error: CatalogError) -> None:
    """A refusal must be a client error: a 400, or a 409 for a retryable conflict."""
    assert error.status == 400 or isinstance(error, CommitFailedError), repr(error)
    event(f"refused: {error.error_type}")


def assert_java_invariants(m: Metadata) -> None:
    """What Java's TableMetadata constructor checks when it loads the file."""
    snapshots = {s["snapshot-id"]: s for s in m["snapshots"]}
    for s in m["snapshots"]:
        assert (s.get("sequence-number") or 0) <= m.get("last-sequence-number", 0)
        schema_id = s.get("schema-id")
        assert schema_id is None or any(x["schema-id"] == schema_id for x in m["schemas"])
    for name, ref in m["refs"].items():
        assert ref["snapshot-id"] in snapshots, name
    assert any(s["schema-id"] == m["current-schema-id"] for s in m["schemas"])
    assert any(s["spec-id"] == m["default-spec-id"] for s in m["partition-specs"])
    assert any(o["order-id"] == m["default-sort-order-id"] for o in m["sort-orders"])


def assert_loads_in_pyiceberg(m: Metadata) -> None:
    envelope = {"metadata-location": f"{LOC}/metadata/00001-a.metadata.json", "metadata": m}
    # orjson writes at most 254 levels: the REST response and the event must both fit.
    orjson.dumps({"wrapper": [envelope]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = TableResponse.model_validate_json(json.dumps(envelope)).metadata
    schema = loaded.schema()
    schema_to_pyarrow(schema)
    str(schema)
    spec = loaded.spec()
    schema_ids = set(
        field_ids(
            m["schemas"][[s["schema-id"] for s in m["schemas"]].index(m["current-schema-id"])]
        )
    )
    if all(f.source_id in schema_ids for f in spec.fields):
        spec.partition_type(schema)
    assert loaded.sort_order_by_id(loaded.default_sort_order_id) is not None
    for snapshot in loaded.snapshots:
        assert snapshot.manifest_list
        if snapshot.summary is not None:
            assert snapshot.summary.operation is not None
    assert len(loaded.snapshots) == len(m["snapshots"])
    assert_java_invariants(m)


# Documents are large and slow to draw, by design.
SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large]


def attempt(fn: Callable[[], Metadata]) -> Metadata | None:
    try:
        return fn()
    except CatalogError as error:
        check_refusal(error)
        return None


# ----------------------------------------------------------------------- properties


@settings(max_examples=500, deadline=None, suppress_health_check=SLOW_DATA)
@given(data=st.data())
def test_every_accepted_table_document_loads_in_pyiceberg(data: st.DataObject) -> None:
    tables = Tables(data.draw)
    if data.draw(st.booleans()):
        meta = attempt(tables.create)
    else:
        updates = tables.create_transaction()
        meta = attempt(
            lambda: apply_updates(None, updates, now_ms=tables.clock, previous_location=None)
        )
    if meta is None:
        return
    event(f"created v{meta['format-version']}")
    assert_loads_in_pyiceberg(meta)
    for version in range(data.draw(st.integers(0, 6))):
        base = meta
        updates = tables.commit(base)
        tables.clock += 100
        previous = f"{LOC}/metadata/{version:05d}-a.metadata.json"
        try:
            result = apply_updates(base, updates, now_ms=tables.clock, previous_location=previous)
        except CatalogError as error:
            check_refusal(error)
            continue
        if result is base:
            continue
        event("commit accepted")
        assert_loads_in_pyiceberg(result)
        meta = result


def assert_view_loads_in_pyiceberg(view: ViewMetadata) -> None:
    envelope = {"metadata-location": "s3://bucket/db/v/metadata/v.json", "metadata": view}
    orjson.dumps({"wrapper": [envelope]})
    loaded = ViewResponse.model_validate_json(json.dumps(envelope)).metadata
    for schema in loaded.schemas:
        schema_to_pyarrow(schema)
    assert any(v.version_id == loaded.current_version_id for v in loaded.versions)


@settings(max_examples=200, deadline=None, suppress_health_check=SLOW_DATA)
@given(data=st.data())
def test_every_accepted_view_document_loads_in_pyiceberg(data: st.DataObject) -> None:
    schemas = Schemas(data.draw)
    version = first_view_version()

    def create() -> ViewMetadata:
        return new_view_metadata(
            uuid=UUID,
            location="s3://bucket/db/v",
            schema=schemas.schema(3),
            view_version=version,
            properties={},
            now_ms=1_000,
        )

    try:
        view = create()
    except CatalogError as error:
        check_refusal(error)
        return
    assert_view_loads_in_pyiceberg(view)
    for i in range(data.draw(st.integers(0, 3))):
        replace = dict(version) | {
            "version-id": i + 2,
            "schema-id": data.draw(st.sampled_from([-1, -1, 0, 7, 2**31])),
            "representations": [{"type": "sql", "sql": f"select {i}", "dialect": "spark"}],
        }
        updates: list[dict[str, Any]] = [
            {"action": "add-schema", "schema": schemas.schema(3)},
            {"action": "add-view-version", "view-version": replace},
            {"action": "set-current-view-version", "view-version-id": -1},
        ]
        try:
            view = apply_view_updates(view, updates, now_ms=2_000 + i)
        except CatalogError as error:
            check_refusal(error)
            continue
        assert_view_loads_in_pyiceberg(view)


@pytest.mark.parametrize("depth", [MAX_SCHEMA_DEPTH + 1, 100, 300, 900])
@pytest.mark.parametrize("kind", ["struct", "list", "map"])
def test_deep_schemas_are_refused_on_every_path(kind: str, depth: int) -> None:
    type_: Any = "int"
    for i in range(depth - 1):
        type_ = {
            "struct": {
                "type": "struct",
                "fields": [{"id": 100 + i, "name": "f", "required": False, "type": type_}],
            },
            "list": {
                "type": "list",
                "element-id": 100 + i,
                "element-required": False,
                "element": type_,
            },
            "map": {
                "type": "map",
                "key-id": 10_000 + i,
                "key": "string",
                "value-id": 100 + i,
                "value-required": False,
                "value": type_,
            },
        }[kind]
    schema = {
        "type": "struct",
        "fields": [{"id": 1, "name": "x", "required": False, "type": type_}],
    }
    base = new_table_metadata(
        uuid=UUID,
        location=LOC,
        schema={
            "type": "struct",
            "fields": [{"id": 1, "name": "x", "required": False, "type": "int"}],
        },
        partition_spec=None,
        sort_order=None,
        properties={},
        now_ms=1_000,
    )
    paths: list[Callable[[], Any]] = [
        lambda: new_table_metadata(
            uuid=UUID,
            location=LOC,
            schema=schema,
            partition_spec=None,
            sort_order=None,
            properties={},
            now_ms=1_000,
        ),
        lambda: apply_updates(
            None,
            [
                {"action": "add-schema", "schema": schema},
                {"action": "set-current-schema", "schema-id": -1},
                {"action": "set-location", "location": LOC},
            ],
            now_ms=1_000,
            previous_location=None,
        ),
        lambda: apply_updates(
            base, [{"action": "add-schema", "schema": schema}], now_ms=2_000, previous_location="p"
        ),
    ]
    for path in paths:
        with pytest.raises(CatalogError) as info:
            path()
        assert info.value.status == 400
        assert f"deeper than {MAX_SCHEMA_DEPTH}" in info.value.message


def chain(kinds: list[str], depth: int) -> dict[str, Any]:
    """A schema whose types nest exactly `depth` levels (its own struct is level 1)."""
    return nested_schema(kinds, depth, first_id=102)


# PyIceberg 0.12 needs ~490 Python frames for a 32-level struct chain (~15 per level) and
# ~240 for lists or maps (~7): the limit leaves 400+ of Python's default 1,000 frames to
# whatever calls load_table. This bound fails if a PyIceberg upgrade changes that cost.
FRAMES_FOR_THE_DEEPEST_SCHEMA = 600


@pytest.mark.parametrize("kinds", [["struct"], ["list"], ["map"], ["struct", "list", "map"]])
def test_pyiceberg_loads_the_deepest_accepted_schema_with_frames_to_spare(
    kinds: list[str],
) -> None:
    meta = new_table_metadata(
        uuid=UUID,
        location=LOC,
        schema=chain(kinds, MAX_SCHEMA_DEPTH),
        partition_spec=None,
        sort_order=None,
        properties={},
        now_ms=1_000,
    )
    text = json.dumps({"metadata-location": f"{LOC}/metadata/m.json", "metadata": meta})
    # Measured from a fresh thread, so that pytest's own stack does not count.
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            schema = TableResponse.model_validate_json(text).metadata.schema()
            schema_to_pyarrow(schema)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(FRAMES_FOR_THE_DEEPEST_SCHEMA)
    try:
        worker = threading.Thread(target=load)
        worker.start()
        worker.join()
    finally:
        sys.setrecursionlimit(previous)
    assert outcome == [None], outcome


# ----------------------------------------------------------------------- over HTTP


def chain_json(kind: str, depth: int) -> str:
    """`chain([kind], depth)` as JSON text, written without recursion (json and orjson
    cannot write 900 levels)."""
    openers, closers = [], []
    for i in range(depth - 1):
        fid = 100 + 2 * i
        if kind == "struct":
            openers.append(
                f'{{"type":"struct","fields":[{{"id":{fid},"name":"f{i}","required":false,"type":'
            )
            closers.append("}]}")
        elif kind == "list":
            openers.append(
                f'{{"type":"list","element-id":{fid},"element-required":false,"element":'
            )
            closers.append("}")
        else:
            openers.append(
                f'{{"type":"map","key-id":{fid},"key":"string","value-id":{fid + 1},'
                '"value-required":false,"value":'
            )
            closers.append("}")
    inner = "".join(openers) + '"int"' + "".join(reversed(closers))
    return f'{{"type":"struct","fields":[{{"id":1,"name":"x","required":false,"type":{inner}}}]}}'


def hostile_schemas() -> list[tuple[str, str, str]]:
    def column(type_: Any, **extra: Any) -> dict[str, Any]:
        return {
            "type": "struct",
            "fields": [
                {"id": 1, "name": "id", "required": True, "type": "long"},
                {"id": 2, "name": "c", "required": False, "type": type_, **extra},
            ],
        }

    duplicate = column("int")
    duplicate["fields"][1]["name"] = "id"
    negative = column("int")
    negative["fields"][1]["id"] = -3
    nested_default = column(chain(["struct"], 2), **{"write-default": {}})
    return [
        ("duplicate-name", json.dumps(duplicate), "ValidationException"),
        ("decimal-99", json.dumps(column("decimal(99, 2)")), "IllegalArgumentException"),
        ("negative-id", json.dumps(negative), "IllegalArgumentException"),
        ("variant", json.dumps(column("variant")), "IllegalArgumentException"),
        ("nested-default", json.dumps(nested_default), "IllegalArgumentException"),
        *(
            (f"deep-{kind}-{depth}", chain_json(kind, depth), "")
            for kind in ("struct", "list", "map")
            for depth in (MAX_SCHEMA_DEPTH + 1, 100, 300, 900)
        ),
    ]


def test_hostile_metadata_is_a_400_over_http(api: Any) -> None:
    """The domain rules reach every route: a 400 of the right type, never a 500."""
    assert api.post("/namespaces", {"namespace": ["db"]}).status_code == 200
    good = {"type": "struct", "fields": [{"id": 1, "name": "id", "required": True, "type": "long"}]}
    v3 = {"format-version": "3"}
    created = api.post("/namespaces/db/tables", {"name": "t", "schema": good, "properties": v3})
    assert created.status_code == 200, created.text
    view_version = json.dumps(first_view_version())
    table = '{"namespace":["db"],"name":"t"}'

    def post(path: str, text: str) -> Any:
        headers = {"content-type": "application/json"}
        return api.client.post(api.url(path), content=text, headers=headers)

    problems = []
    for name, schema, error_type in hostile_schemas():
        add_schema = f'{{"action":"add-schema","schema":{schema}}}'
        attempts = {
            "create": post(
                "/namespaces/db/tables",
                f'{{"name":"n_{name}","schema":{schema},"properties":{{"format-version":"3"}}}}',
            ),
            "add-schema": post(
                "/namespaces/db/tables/t", f'{{"requirements":[],"updates":[{add_schema}]}}'
            ),
            "transaction": post(
                "/transactions/commit",
                f'{{"table-changes":[{{"identifier":{table},"requirements":[],'
                f'"updates":[{add_schema}]}}]}}',
            ),
            "view": post(
                "/namespaces/db/views",
                f'{{"name":"v_{name}","schema":{schema},"view-version":{view_version}}}',
            ),
        }
        for route, response in attempts.items():
            body = response.json() if response.content else {}
            got = (response.status_code, body.get("error", {}).get("type"))
            if response.status_code != 400 or (error_type and got[1] != error_type):
                problems.append(f"{name} via {route}: {got} {response.text[:200]}")
    assert not problems, "\n".join(problems)
    bad_transform = {"fields": [{"source-id": 1, "name": "b", "transform": "bucket[0]"}]}
    response = api.post(
        "/namespaces/db/tables", {"name": "b0", "schema": good, "partition-spec": bad_transform}
    )
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "IllegalArgumentException"
