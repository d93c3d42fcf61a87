"""Metadata validation as strict as Iceberg Java's builders and parsers (rules 2).

One case per rule: each refused input names the exception type Java would throw
(`ValidationException` -> ValidationError, `IllegalArgumentException` ->
IllegalArgumentError, a parse failure -> BadRequestError) and a message close to
Java's. Where PyIceberg 0.12 refuses what Java accepts, the rule says so. Every
case runs through the domain entry points: `new_table_metadata` (CreateTable),
`apply_updates(None, ...)` (create transactions), `apply_updates(base, ...)`
(commits) and the view equivalents.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import pytest

from icelog.domain.errors import (
    BadRequestError,
    CatalogError,
    CommitFailedError,
    IllegalArgumentError,
    ValidationError,
)
from icelog.domain.schema_types import MAX_SCHEMA_DEPTH, type_depth
from icelog.domain.table_metadata import Metadata, apply_updates, new_table_metadata
from icelog.domain.view_metadata import ViewMetadata, apply_view_updates, new_view_metadata
from tests.support.metadata_docs import first_view_version, nested_schema

UUID = "9c12d441-03fe-4693-9a96-a0705ddf69c1"
LOC = "s3://bucket/db/t"
PREV = f"{LOC}/metadata/00000-a.metadata.json"


# ------------------------------------------------------------------ helpers


def field(fid: int, name: str, type_: Any, required: bool = False, **extra: Any) -> dict[str, Any]:
    return {"id": fid, "name": name, "required": required, "type": type_, **extra}


def struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


def base_schema() -> dict[str, Any]:
    return struct(
        field(1, "id", "long", True),
        field(2, "s", struct(field(3, "a", "int"))),
        field(
            4, "l", {"type": "list", "element-id": 5, "element-required": False, "element": "int"}
        ),
        field(6, "ts", "timestamp"),
    )


def create(
    schema: Any,
    *,
    version: int = 2,
    spec: dict[str, Any] | None = None,
    order: dict[str, Any] | None = None,
) -> Metadata:
    return new_table_metadata(
        uuid=UUID,
        location=LOC,
        schema=schema,
        partition_spec=spec,
        sort_order=order,
        properties={"format-version": str(version)},
        now_ms=1_000,
    )


def commit(base: Metadata, *updates: Any) -> Metadata:
    return apply_updates(base, list(updates), now_ms=5_000, previous_location=PREV)


def create_transaction(schema: Any, *more: dict[str, Any], version: int = 2) -> Metadata:
    updates: list[dict[str, Any]] = [
        {"action": "upgrade-format-version", "format-version": version},
        {"action": "add-schema", "schema": schema},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "set-location", "location": LOC},
        {"action": "add-spec", "spec": {"fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        *more,
    ]
    return apply_updates(None, updates, now_ms=1_000, previous_location=None)


def add_schema(schema: Any) -> dict[str, Any]:
    return {"action": "add-schema", "schema": schema}


def refused(
    error: type[CatalogError], pattern: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> None:
    """`fn` fails with exactly `error` (a 400 unless it is a commit conflict) and `pattern`."""
    with pytest.raises(CatalogError) as info:
        fn(*args, **kwargs)
    assert type(info.value) is error, f"{type(info.value).__name__}: {info.value.message}"
    assert info.value.status == (409 if error is CommitFailedError else 400)
    assert re.search(pattern, info.value.message), info.value.message


def schema_paths(schema: Any) -> list[Callable[[], Any]]:
    """Every way a table or view schema reaches the catalog."""
    return [
        lambda: create(schema, version=3),
        lambda: create_transaction(schema, version=3),
        lambda: commit(create(base_schema(), version=3), add_schema(schema)),
        lambda: new_view(schema),
        lambda: apply_view_updates(new_view(base_schema()), [add_schema(schema)], now_ms=2_000),
    ]


def assert_schema_refused(error: type[CatalogError], pattern: str, schema: Any) -> None:
    for path in schema_paths(schema):
        refused(error, pattern, path)


def new_view(schema: Any) -> ViewMetadata:
    return new_view_metadata(
        uuid=UUID,
        location="s3://bucket/db/v",
        schema=schema,
        view_version=first_view_version(),
        properties={},
        now_ms=1_000,
    )


def with_column(type_: Any, **extra: Any) -> dict[str, Any]:
    schema = base_schema()
    schema["fields"].append(field(10, "c", type_, **extra))
    return schema


def stored_type(metadata: Metadata) -> Any:
    return metadata["schemas"][-1]["fields"][-1]["type"]


# ------------------------------------------------------------------ nesting depth


def nested(kind: str, depth: int) -> dict[str, Any]:
    """A schema whose types nest `depth` levels (the schema's own struct is level 1)."""
    return nested_schema([kind], depth)


@pytest.mark.parametrize("kind", ["struct", "list", "map"])
def test_nesting_at_the_limit_is_accepted(kind: str) -> None:
    schema = nested(kind, MAX_SCHEMA_DEPTH)
    assert type_depth(schema) == MAX_SCHEMA_DEPTH
    for path in schema_paths(schema):
        path()


@pytest.mark.parametrize("depth", [MAX_SCHEMA_DEPTH + 1, 100, 300, 900, 5_000])
@pytest.mark.parametrize("kind", ["struct", "list", "map"])
def test_deep_nesting_is_a_clear_400_never_a_recursion_error(kind: str, depth: int) -> None:
    # Java has no limit; PyIceberg 0.12 fails from 65 nested structs / 139 lists (see
    # MAX_SCHEMA_DEPTH), so icelog refuses beyond 32 levels, on every path.
    assert_schema_refused(
        IllegalArgumentError, f"nest deeper than {MAX_SCHEMA_DEPTH} levels", nested(kind, depth)
    )


def test_depth_is_checked_before_anything_walks_malformed_input() -> None:
    # A deep chain whose innermost type is broken: the depth check answers first.
    schema = nested("list", 900)
    inner = schema["fields"][0]["type"]
    while isinstance(inner["element"], dict):
        inner = inner["element"]
    inner["element"] = {"type": "bogus", "junk": [[[[1]]]]}
    refused(IllegalArgumentError, "nest deeper than", create, schema)


# ------------------------------------------------------------------ primitive types (Types)


@pytest.mark.parametrize(
    ("type_", "error", "pattern"),
    [
        # Java Types.DecimalType: precision <= 38.
        ("decimal(99, 2)", IllegalArgumentError, "precision larger than 38 .*: 99"),
        ("decimal(39,0)", IllegalArgumentError, "precision larger than 38 .*: 39"),
        # Java accepts precision 0; PyIceberg refuses to load it.
        ("decimal(0, 0)", IllegalArgumentError, "precision smaller than 1"),
        # Integer.parseInt overflows (NumberFormatException is an IllegalArgumentException).
        ("decimal(9, 99999999999)", IllegalArgumentError, "Cannot parse type string"),
        ("fixed[99999999999]", IllegalArgumentError, "Cannot parse type string"),
        # Types.fromTypeName: no match.
        ("bogus", IllegalArgumentError, "Cannot parse type string to primitive: bogus"),
        (" int", IllegalArgumentError, "Cannot parse type string to primitive"),
        ("decimal(-1, 2)", IllegalArgumentError, "Cannot parse type string to primitive"),
        ("fixed[-3]", IllegalArgumentError, "Cannot parse type string to primitive"),
        # GeometryType / GeographyType / EdgeAlgorithm.
        ("geometry()", IllegalArgumentError, r"Invalid CRS: \(empty string\)"),
        ("geography(srid:4326, flat)", IllegalArgumentError, "Invalid edge interpolation"),
        # Valid in Java, but PyIceberg 0.12 cannot load them.
        ("variant", IllegalArgumentError, "variant .*PyIceberg"),
        ("geometry(srid:4326)", IllegalArgumentError, "PyIceberg reads geometry"),
        ("geography(OGC:CRS84, karney)", IllegalArgumentError, "PyIceberg reads geometry"),
    ],
)
def test_primitive_type_rules(type_: str, error: type[CatalogError], pattern: str) -> None:
    assert_schema_refused(error, pattern, with_column(type_))


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        # Java lower-cases type names and writes them back canonically; PyIceberg 0.12
        # reads only the canonical spelling (case-sensitive, no space inside brackets).
        ("INT", "int"),
        ("Decimal( 9 ,2 )", "decimal(9, 2)"),
        ("decimal(9,2)", "decimal(9, 2)"),
        ("FIXED[ 16 ]", "fixed[16]"),
        ("geometry(OGC:CRS84)", "geometry"),
        ("geography(ogc:crs84, Spherical)", "geography"),
        ("TimestampTZ_NS", "timestamptz_ns"),
    ],
)
def test_type_strings_are_stored_in_canonical_form(sent: str, stored: str) -> None:
    assert stored_type(create(with_column(sent), version=3)) == stored
    table = commit(create(base_schema(), version=3), add_schema(with_column(sent)))
    assert stored_type(table) == stored
    view = new_view(with_column(sent))
    assert view["schemas"][0]["fields"][-1]["type"] == stored


def test_canonical_types_make_an_identical_schema_a_no_op() -> None:
    base = create(with_column("decimal(9, 2)"))
    same = copy.deepcopy(base["schemas"][0])
    same["fields"][-1]["type"] = "DECIMAL(9,2)"
    assert commit(base, add_schema(same)) is base


# ------------------------------------------------------------------ fields (SchemaParser, Schema)


def test_duplicate_field_names_are_a_validation_exception() -> None:
    # Java IndexByName: "Invalid schema: multiple fields for name %s: %s and %s".
    schema = base_schema()
    schema["fields"].append(field(10, "id", "int"))
    assert_schema_refused(ValidationError, "multiple fields for name id: 1 and 10", schema)


def test_dotted_name_colliding_with_a_nested_field_is_a_duplicate() -> None:
    schema = base_schema()
    schema["fields"].append(field(10, "s.a", "int"))
    assert_schema_refused(ValidationError, "multiple fields for name s.a: 3 and 10", schema)


def test_duplicate_names_in_a_nested_struct() -> None:
    schema = base_schema()
    schema["fields"][1]["type"]["fields"].append(field(10, "a", "string"))
    assert_schema_refused(ValidationError, "multiple fields for name s.a", schema)


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda s: s["fields"].append(field(-3, "neg", "int")), "Invalid id .*-3"),
        (lambda s: s["fields"][2]["type"].update({"element-id": -1}), "Invalid element-id"),
        (lambda s: s["fields"].append(field(2**31, "big", "int")), "integer value: id"),
        (lambda s: s.update({"schema-id": 2**31}), "schema-id"),
        (lambda s: s.update({"identifier-field-ids": [2**40]}), "identifier-field-ids"),
    ],
)
def test_field_ids_are_non_negative_java_ints(
    mutate: Callable[[dict[str, Any]], Any], pattern: str
) -> None:
    schema = base_schema()
    mutate(schema)
    assert_schema_refused(IllegalArgumentError, pattern, schema)


def test_doc_must_be_a_string() -> None:
    # JsonUtil.getStringOrNull(doc); PyIceberg refuses it too.
    assert_schema_refused(IllegalArgumentError, "string value: doc", with_column("int", doc=5))
    assert stored_type(create(with_column("int", doc="fine"))) == "int"


@pytest.mark.parametrize(
    ("type_", "required", "name"),
    [
        ("unknown", True, "c"),
        (
            {"type": "list", "element-id": 11, "element-required": True, "element": "unknown"},
            False,
            "element",
        ),
        (
            {
                "type": "map",
                "key-id": 11,
                "key": "unknown",
                "value-id": 12,
                "value-required": False,
                "value": "int",
            },
            False,
            "key",
        ),
    ],
)
def test_required_unknown_is_refused(type_: Any, required: bool, name: str) -> None:
    # Java NestedField: "Cannot create required field with unknown type: %s".
    assert_schema_refused(
        IllegalArgumentError,
        f"required field with unknown type: {name}",
        with_column(type_, required=required),
    )


# ------------------------------------------------------------------ default values


@pytest.mark.parametrize(
    ("type_", "default", "pattern"),
    [
        # NestedField.castDefault: nested types have no default.
        (struct(field(11, "x", "int")), {}, "must be null"),
        (
            {"type": "list", "element-id": 11, "element-required": False, "element": "int"},
            [1],
            "must be null",
        ),
        # SingleValueParser.fromJson.
        ("int", "abc", "default as a int value"),
        ("int", 2**40, "default as a int value"),
        ("long", 2**70, "default as a long value"),
        ("float", 5, "default as a float value"),
        ("boolean", "true", "default as a boolean value"),
        ("decimal(9, 2)", "1.5", "default as a decimal"),
        ("decimal(9, 2)", 1.5, "default as a decimal"),
        ("date", "2024-02-30", "default as a date value"),
        ("time", "25:00", "default as a time value"),
        ("timestamptz", "2024-01-01T00:00:00+01:00", "default as a timestamptz value"),
        ("timestamp", "2024-01-01T00:00:00+00:00", "default as a timestamp value"),
        ("uuid", "not-a-uuid", "default as a uuid value"),
        ("fixed[2]", "abc", "default as a fixed"),
        ("binary", "xyz0", "default as a binary value"),
        # PyIceberg 0.12 reads no nanosecond default.
        ("timestamp_ns", "2024-01-01T00:00:00", "default as a timestamp_ns value"),
        ("unknown", 1, "default as a unknown value"),
    ],
)
def test_default_values_must_parse_as_their_type(type_: Any, default: Any, pattern: str) -> None:
    assert_schema_refused(
        IllegalArgumentError, pattern, with_column(type_, **{"write-default": default})
    )


@pytest.mark.parametrize(
    ("type_", "default"),
    [
        ("int", 5),
        ("long", 2**40),
        ("double", 1.5),
        ("boolean", True),
        ("string", "x"),
        ("decimal(9, 2)", "1.50"),
        ("date", "2024-02-29"),
        ("time", "12:30:00.123456"),
        ("timestamp", "2024-01-01T00:00:00"),
        ("timestamptz", "2024-01-01T00:00:00.123+00:00"),
        ("uuid", "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        ("fixed[2]", "0aFF"),
        ("binary", "00ff"),
    ],
)
def test_valid_default_values_are_kept(type_: str, default: Any) -> None:
    column = create(with_column(type_, **{"initial-default": default}), version=3)
    assert column["schemas"][0]["fields"][-1]["initial-default"] == default


# ------------------------------------------------------------------ transforms and specs


@pytest.mark.parametrize(
    ("transform", "pattern"),
    [
        # Java Bucket.get / Truncate.get.
        ("bucket[0]", r"Invalid number of buckets: 0 \(must be > 0\)"),
        ("truncate[0]", r"Invalid truncate width: 0 \(must be > 0\)"),
        # HAS_WIDTH needs digits; Java keeps an UnknownTransform, which a server must not bind.
        ("bucket[-1]", "Unsupported transform: .*bucket\\[-1\\]"),
        # Integer.parseInt overflows.
        ("bucket[2147483648]", "not an int"),
        ("truncate[99999999999999999999]", "not an int"),
    ],
)
def test_transform_arguments(transform: str, pattern: str) -> None:
    spec = {"fields": [{"source-id": 1, "name": "p", "transform": transform}]}
    refused(IllegalArgumentError, pattern, create, base_schema(), spec=spec)
    refused(
        IllegalArgumentError,
        pattern,
        commit,
        create(base_schema()),
        {"action": "add-spec", "spec": spec},
    )
    order = {
        "fields": [
            {
                "source-id": 1,
                "transform": transform,
                "direction": "asc",
                "null-order": "nulls-first",
            }
        ]
    }
    refused(IllegalArgumentError, pattern, create, base_schema(), order=order)


def test_transform_arguments_are_stored_canonically() -> None:
    spec = {"fields": [{"source-id": 1, "name": "p", "transform": "BUCKET[016]"}]}
    assert create(base_schema(), spec=spec)["partition-specs"][0]["fields"][0]["transform"] == (
        "bucket[16]"
    )


def test_multi_argument_source_ids_are_refused() -> None:
    # PyIceberg 0.12: "Multi argument transforms are not yet supported".
    spec = {"fields": [{"source-ids": [1, 3], "name": "p", "transform": "bucket[4]"}]}
    refused(
        IllegalArgumentError,
        "multi-argument",
        commit,
        create(base_schema(), version=3),
        {"action": "add-spec", "spec": spec},
    )
    single = {"fields": [{"source-ids": [1], "name": "p", "transform": "bucket[4]"}]}
    assert commit(create(base_schema(), version=3), {"action": "add-spec", "spec": single})


def test_partition_source_inside_a_list_is_refused() -> None:
    # Java PartitionSpec.checkCompatibility: "Invalid partition field parent: %s".
    spec = {"fields": [{"source-id": 5, "name": "le", "transform": "identity"}]}
    refused(ValidationError, "Invalid partition field parent", create, base_schema(), spec=spec)
    table = create(base_schema())
    element_id = table["schemas"][0]["fields"][2]["type"]["element-id"]  # ids are fresh
    spec["fields"][0]["source-id"] = element_id
    refused(
        ValidationError,
        "Invalid partition field parent",
        commit,
        table,
        {"action": "add-spec", "spec": spec},
    )


def test_sort_by_void_still_needs_its_source_column() -> None:
    # SortOrder.checkCompatibility has no void exception (PartitionSpec has).
    order = {
        "fields": [
            {"source-id": 77, "transform": "void", "direction": "asc", "null-order": "nulls-first"}
        ]
    }
    refused(
        ValidationError,
        "Cannot find source column for sort field",
        commit,
        create(base_schema()),
        {"action": "add-sort-order", "sort-order": order},
    )


def test_source_ids_are_java_ints() -> None:
    spec = {"fields": [{"source-id": 2**31 + 1, "name": "p", "transform": "identity"}]}
    refused(
        IllegalArgumentError,
        "source-id",
        commit,
        create(base_schema()),
        {"action": "add-spec", "spec": spec},
    )


# ------------------------------------------------------------------ snapshots (SnapshotParser)


def snapshot(
    sid: int, seq: int | None, *, parent: int | None = None, **extra: Any
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "snapshot-id": sid,
        "timestamp-ms": 2_000,
        "manifest-list": f"{LOC}/metadata/snap-{sid}.avro",
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    if seq is not None:
        s["sequence-number"] = seq
    if parent is not None:
        s["parent-snapshot-id"] = parent
    s.update(extra)
    return {k: v for k, v in s.items() if v is not None}


def add(s: dict[str, Any]) -> dict[str, Any]:
    return {"action": "add-snapshot", "snapshot": s}


def main(sid: int) -> dict[str, Any]:
    return {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": sid}


def with_snapshot(version: int = 2) -> Metadata:
    first_row = {"first-row-id": 0, "added-rows": 5} if version >= 3 else {}
    return commit(create(base_schema(), version=version), add(snapshot(1, 1, **first_row)), main(1))


def test_snapshot_with_unknown_schema_id_is_refused() -> None:
    refused(
        ValidationError,
        "unknown schema id: 7",
        commit,
        with_snapshot(),
        add(snapshot(2, 2, parent=1, **{"schema-id": 7})),
    )
    # In a create transaction the schema added earlier in the request counts.
    assert create_transaction(base_schema(), add(snapshot(1, 1)), main(1))["snapshots"]
    refused(
        ValidationError,
        "unknown schema id: 3",
        create_transaction,
        base_schema(),
        add(snapshot(1, 1, **{"schema-id": 3})),
    )


@pytest.mark.parametrize(
    ("summary", "pattern"),
    [
        (None, "summary is required"),
        ({}, "missing operation"),
        ({"added-records": "3"}, "missing operation"),
        ({"operation": "APPEND"}, "unknown operation APPEND"),
        ({"operation": "merge"}, "unknown operation merge"),
    ],
)
def test_snapshot_summary_needs_a_known_operation(
    summary: dict[str, str] | None, pattern: str
) -> None:
    s = snapshot(2, 2, parent=1)
    s["summary"] = summary
    s = {k: v for k, v in s.items() if v is not None}
    refused(ValidationError, pattern, commit, with_snapshot(), add(s))


def test_v1_snapshot_without_sequence_number_or_summary_is_accepted() -> None:
    # Spark's v1 tables: no sequence numbers; the v1 spec makes the summary optional.
    m = commit(create(base_schema(), version=1), add(snapshot(1, None, summary=None)), main(1))
    assert m["snapshots"][0].get("sequence-number") is None


@pytest.mark.parametrize(
    ("extra", "error", "pattern"),
    [
        ({"manifest-list": None, "manifests": ["a.avro"]}, BadRequestError, "manifest-list"),
        ({"snapshot-id": 2**63}, BadRequestError, "snapshot-id must be a long"),
        ({"timestamp-ms": -(2**64)}, BadRequestError, "timestamp-ms must be a long"),
        ({"schema-id": 2**31}, BadRequestError, "schema-id must be an integer"),
        ({"key-id": 5}, BadRequestError, "key-id must be a string"),
        ({"first-row-id": -1, "added-rows": 1}, IllegalArgumentError, "first-row-id .*negative"),
        ({"first-row-id": 0, "added-rows": -1}, IllegalArgumentError, "added-rows .*negative"),
        ({"first-row-id": 0}, IllegalArgumentError, "required when first-row-id is set"),
    ],
)
def test_snapshot_fields_parse_like_java(
    extra: dict[str, Any], error: type[CatalogError], pattern: str
) -> None:
    s = snapshot(2, 2, parent=1)
    s.update(extra)
    s = {k: v for k, v in s.items() if v is not None}
    refused(error, pattern, commit, with_snapshot(), add(s))


def test_snapshot_key_id_string_is_accepted() -> None:
    assert commit(with_snapshot(), add(snapshot(2, 2, parent=1, **{"key-id": "k1"})))


def test_sequence_number_not_above_last_with_a_parent_is_a_retryable_conflict() -> None:
    # Java: RetryableValidationException (a concurrent commit took the number).
    refused(
        CommitFailedError,
        "sequence number 1 older than last sequence number 1",
        commit,
        with_snapshot(),
        add(snapshot(2, 1, parent=1)),
    )


def test_sequence_number_without_parent_follows_javas_exact_condition() -> None:
    # `seq > last || parentId == null`: equal to last without parent is allowed ...
    m = commit(with_snapshot(), add(snapshot(2, 1)))
    assert m["last-sequence-number"] == 1
    # ... but going below a kept snapshot is refused when the metadata is built.
    m3 = commit(m, add(snapshot(3, 5, parent=2)))
    refused(
        ValidationError,
        "sequence number 5 greater than last sequence number 2",
        commit,
        m3,
        add(snapshot(4, 2)),
    )


def test_set_current_schema_to_an_unknown_schema() -> None:
    refused(
        IllegalArgumentError,
        "unknown schema: 9",
        commit,
        create(base_schema()),
        {"action": "set-current-schema", "schema-id": 9},
    )
    refused(
        ValidationError,
        "no schema has been added",
        commit,
        create(base_schema()),
        {"action": "set-current-schema", "schema-id": -1},
    )


def test_removing_a_schema_a_kept_snapshot_reads_with_is_refused() -> None:
    # The counterpart of the add-snapshot rule: no removal may leave a dangling schema id.
    m = commit(
        with_snapshot(),
        add_schema(with_column("int")),
        {"action": "set-current-schema", "schema-id": -1},
    )
    refused(
        IllegalArgumentError,
        "Cannot remove schema 0: snapshot 1 still refers to it",
        commit,
        m,
        {"action": "remove-schemas", "schema-ids": [0]},
    )
    # Removing the snapshot in the same request (as ExpireSnapshots does) makes it legal.
    expired = commit(
        m,
        {"action": "remove-snapshots", "snapshot-ids": [1]},
        {"action": "remove-schemas", "schema-ids": [0]},
    )
    assert [s["schema-id"] for s in expired["schemas"]] == [1]


def test_snapshot_ref_retention_is_a_java_int() -> None:
    ref = main(1) | {"min-snapshots-to-keep": 2**31}
    refused(BadRequestError, "min-snapshots-to-keep", commit, with_snapshot(), ref)


# ------------------------------------------------------------------ statistics


def statistics(**extra: Any) -> dict[str, Any]:
    stats: dict[str, Any] = {
        "snapshot-id": 1,
        "statistics-path": f"{LOC}/metadata/stats.puffin",
        "file-size-in-bytes": 100,
        "file-footer-size-in-bytes": 10,
        "blob-metadata": [
            {
                "type": "apache-datasketches-theta-v1",
                "snapshot-id": 1,
                "sequence-number": 1,
                "fields": [1],
                "properties": {"ndv": "3"},
            }
        ],
    }
    stats.update(extra)
    return {k: v for k, v in stats.items() if v is not None}


def test_valid_statistics_are_kept() -> None:
    m = commit(with_snapshot(), {"action": "set-statistics", "statistics": statistics()})
    assert m["statistics"] == [statistics()]


@pytest.mark.parametrize(
    ("stats", "error", "pattern"),
    [
        (statistics(**{"file-footer-size-in-bytes": None}), BadRequestError, "file-footer-size"),
        (statistics(**{"statistics-path": 5}), BadRequestError, "statistics-path"),
        (statistics(**{"blob-metadata": None}), BadRequestError, "blob metadata"),
        (
            statistics(**{"blob-metadata": [{"type": "x", "snapshot-id": 1, "fields": [1]}]}),
            BadRequestError,
            "sequence-number",
        ),
        # Java takes any blob type; PyIceberg 0.12 only these two.
        (
            statistics(
                **{
                    "blob-metadata": [
                        {"type": "ndv-v9", "snapshot-id": 1, "sequence-number": 1, "fields": []}
                    ]
                }
            ),
            IllegalArgumentError,
            "Unsupported blob type: ndv-v9",
        ),
    ],
)
def test_statistics_files_parse_like_java(
    stats: dict[str, Any], error: type[CatalogError], pattern: str
) -> None:
    refused(
        error, pattern, commit, with_snapshot(), {"action": "set-statistics", "statistics": stats}
    )


def test_partition_statistics_need_a_size() -> None:
    stats = {"snapshot-id": 1, "statistics-path": f"{LOC}/p.parquet"}
    refused(
        BadRequestError,
        "file-size-in-bytes",
        commit,
        with_snapshot(),
        {"action": "set-partition-statistics", "partition-statistics": stats},
    )


# ------------------------------------------------------------------ views


def refused_version(
    error: type[CatalogError], pattern: str, view: ViewMetadata, version: dict[str, Any]
) -> None:
    """Adding `version` to `view` fails with exactly `error` and `pattern`."""
    updates = [{"action": "add-view-version", "view-version": version}]
    refused(error, pattern, apply_view_updates, view, updates, now_ms=3_000)


def test_view_version_ids_are_java_ints() -> None:
    view = new_view(base_schema())
    version = copy.deepcopy(view["versions"][0]) | {"schema-id": 2**31, "version-id": 2}
    refused_version(BadRequestError, "schema-id", view, version)


def test_view_version_naming_an_unknown_schema() -> None:
    view = new_view(base_schema())
    version = copy.deepcopy(view["versions"][0]) | {"schema-id": 4, "version-id": 2}
    version["representations"][0]["sql"] = "select 2"
    refused_version(IllegalArgumentError, "unknown schema: 4", view, version)
