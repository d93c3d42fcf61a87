"""Unit tests for the pure view-metadata layer (domain.view_metadata)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from icelog.domain.errors import (
    BadRequestError,
    CommitFailedError,
    IllegalArgumentError,
    ValidationError,
)
from icelog.domain.view_metadata import (
    ViewMetadata,
    apply_view_updates,
    check_view_requirements,
    new_view_metadata,
    view_metadata_file_name,
    view_sql_dialects,
)
from tests.unit.test_table_metadata import RCK_SCHEMA

UUID = "fa6506c3-7681-40c8-86dc-e36561f83385"
LOC = "s3://bucket/ns/view"

SCHEMA = RCK_SCHEMA  # the tables' schema: ids 3 and 4, schema-id 5
OTHER_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "some_id", "required": True, "type": "long"}],
}
SCHEMA_THREE: dict[str, Any] = {
    "type": "struct",
    "fields": [{"id": 1, "name": "n", "required": False, "type": "string"}],
}


def rep(sql: str, dialect: str = "spark") -> dict[str, Any]:
    return {"type": "sql", "sql": sql, "dialect": dialect}


def version(
    version_id: int = 1,
    *,
    schema_id: int = 0,
    reps: list[dict[str, Any]] | None = None,
    ts: int = 1_000,
    operation: str = "create",
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    v: dict[str, Any] = {
        "version-id": version_id,
        "timestamp-ms": ts,
        "schema-id": schema_id,
        "summary": {"operation": operation, "engine-name": "spark"},
        "default-namespace": ["ns"],
        "representations": reps if reps is not None else [rep("select * from ns.tbl")],
    }
    v.update(extra or {})
    return v


def new(
    *,
    reps: list[dict[str, Any]] | None = None,
    properties: dict[str, str] | None = None,
    **kwargs: Any,
) -> ViewMetadata:
    args: dict[str, Any] = {
        "uuid": UUID,
        "location": LOC,
        "schema": SCHEMA,
        "view_version": version(7, schema_id=5, reps=reps),
        "properties": properties if properties is not None else {"prop": "1"},
        "now_ms": 500,
    }
    args.update(kwargs)
    return new_view_metadata(**args)


def replace_updates(
    meta: ViewMetadata,
    *,
    schema: dict[str, Any] = OTHER_SCHEMA,
    reps: list[dict[str, Any]] | None = None,
    version_id: int | None = None,
    ts: int = 2_000,
) -> list[dict[str, Any]]:
    """What Java's `BaseMetastoreViewCatalog` replace sends: schema, version (-1), current (-1)."""
    next_id = max(v["version-id"] for v in meta["versions"]) + 1
    new_version = version(
        next_id if version_id is None else version_id,
        schema_id=-1,
        reps=reps if reps is not None else [rep("select count(*) from ns.tbl")],
        ts=ts,
        operation="replace",
    )
    return [
        {"action": "add-schema", "schema": schema, "last-column-id": 1},
        {"action": "add-view-version", "view-version": new_version},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]


def ids(meta: ViewMetadata) -> list[int]:
    return [v["version-id"] for v in meta["versions"]]


def log_ids(meta: ViewMetadata) -> list[int]:
    return [e["version-id"] for e in meta["version-log"]]


def current(meta: ViewMetadata) -> dict[str, Any]:
    found: dict[str, Any] = next(
        v for v in meta["versions"] if v["version-id"] == meta["current-version-id"]
    )
    return found


# --------------------------------------------------------------------- create


def test_basic_create_view() -> None:
    meta = new(location=LOC + "/")
    assert meta["format-version"] == 1
    assert meta["view-uuid"] == UUID
    assert meta["location"] == LOC
    assert meta["properties"] == {"prop": "1"}
    # Schema id replaced by 0; field ids kept as sent.
    assert meta["schemas"] == [{**SCHEMA, "schema-id": 0}]
    assert [f["id"] for f in meta["schemas"][0]["fields"]] == [3, 4]
    assert meta["current-version-id"] == 1
    assert ids(meta) == [1]
    v1 = current(meta)
    assert v1["schema-id"] == 0
    assert v1["timestamp-ms"] == 1_000
    assert v1["summary"] == {"operation": "create", "engine-name": "spark"}
    assert v1["default-namespace"] == ["ns"]
    assert "default-catalog" not in v1
    assert v1["representations"] == [rep("select * from ns.tbl")]
    assert meta["version-log"] == [{"timestamp-ms": 1_000, "version-id": 1}]


def test_create_field_order_matches_java_parser() -> None:
    meta = new(view_version=version(1))
    assert list(meta) == [
        "view-uuid",
        "format-version",
        "location",
        "properties",
        "schemas",
        "current-version-id",
        "versions",
        "version-log",
    ]
    v = version(1, extra={"default-catalog": "cat"})
    assert list(new(view_version=v)["versions"][0]) == [
        "version-id",
        "timestamp-ms",
        "schema-id",
        "summary",
        "default-catalog",
        "default-namespace",
        "representations",
    ]


def test_complete_create_view_keeps_dialects_catalog_and_empty_namespace() -> None:
    reps = [rep("select * from ns.tbl", "spark"), rep("select * from ns.tbl", "trino")]
    v = version(1, reps=reps, extra={"default-catalog": "cat", "default-namespace": []})
    meta = new(view_version=v, properties={"a": "b"})
    assert current(meta)["representations"] == reps
    assert current(meta)["default-catalog"] == "cat"
    assert current(meta)["default-namespace"] == []
    assert view_sql_dialects(current(meta)) == ["spark", "trino"]


def test_create_without_timestamp_uses_now() -> None:
    v = version(1)
    del v["timestamp-ms"]
    meta = new(view_version=v, now_ms=4_242)
    assert current(meta)["timestamp-ms"] == 4_242
    assert meta["version-log"] == [{"timestamp-ms": 4_242, "version-id": 1}]


def test_create_duplicate_dialect_is_illegal_argument() -> None:
    reps = [rep("select 1", "trino"), rep("select 2", "Trino")]
    with pytest.raises(IllegalArgumentError) as err:
        new(reps=reps)
    assert err.value.status == 400
    assert err.value.error_type == "IllegalArgumentException"
    assert err.value.message == (
        "Invalid view version: Cannot add multiple queries for dialect trino"
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("representations", [{"type": "unknown", "sql": "x", "dialect": "spark"}]),
        ("representations", [{"type": "sql", "dialect": "spark"}]),
        ("representations", [{"type": "sql", "sql": "x", "dialect": 1}]),
        ("representations", "select 1"),
        ("default-namespace", None),
        ("default-namespace", "ns"),
        ("default-catalog", 3),
        ("summary", {"operation": 1}),
        ("timestamp-ms", "now"),
        ("version-id", None),
    ],
)
def test_create_rejects_malformed_versions(field: str, value: Any) -> None:
    v = version(1)
    if value is None:
        del v[field]
    else:
        v[field] = value
    with pytest.raises(BadRequestError) as err:
        new(view_version=v)
    assert err.value.status == 400


def test_create_rejects_empty_query_bad_schema_location_and_properties() -> None:
    with pytest.raises(IllegalArgumentError, match="without specifying a query"):
        new(reps=[])
    with pytest.raises(IllegalArgumentError, match="multiple fields with id 3"):
        new(schema={**SCHEMA, "fields": [SCHEMA["fields"][0], SCHEMA["fields"][0]]})
    with pytest.raises(IllegalArgumentError):
        new(location="")
    with pytest.raises(IllegalArgumentError):
        new(properties={"a": 1})  # type: ignore[dict-item]


def test_create_never_mutates_inputs() -> None:
    schema, v, props = copy.deepcopy(SCHEMA), version(9, schema_id=9), {"p": "q"}
    before = copy.deepcopy((schema, v, props))
    meta = new(schema=schema, view_version=v, properties=props)
    assert (schema, v, props) == before
    meta["properties"]["x"] = "y"
    meta["schemas"][0]["schema-id"] = 99
    assert props == {"p": "q"}
    assert schema["schema-id"] == 5


def test_metadata_file_name_is_gzip() -> None:
    assert view_metadata_file_name(0, "abc") == "00000-abc.gz.metadata.json"
    assert view_metadata_file_name(12, "abc") == "00012-abc.gz.metadata.json"


# --------------------------------------------------------------- requirements


def test_assert_view_uuid() -> None:
    meta = new()
    check_view_requirements(meta, [])
    check_view_requirements(meta, [{"type": "assert-view-uuid", "uuid": UUID}])
    check_view_requirements(meta, [{"type": "ASSERT-VIEW-UUID", "uuid": UUID.upper()}])
    other = "00000000-0000-0000-0000-000000000000"
    with pytest.raises(CommitFailedError) as err:
        check_view_requirements(meta, [{"type": "assert-view-uuid", "uuid": other}])
    assert err.value.status == 409
    assert err.value.message == (
        f"Requirement failed: view UUID does not match: expected {UUID} != {other}"
    )


@pytest.mark.parametrize(
    "requirement",
    [
        {"type": "assert-table-uuid", "uuid": UUID},
        {"type": "assert-create"},
        {"uuid": UUID},
        {"type": "assert-view-uuid"},
        "assert-view-uuid",
    ],
)
def test_unknown_or_malformed_requirement_is_400(requirement: Any) -> None:
    with pytest.raises(BadRequestError) as err:
        check_view_requirements(new(), [requirement])
    assert err.value.status == 400


# -------------------------------------------------------------------- actions


def test_no_updates_and_no_op_updates_return_base() -> None:
    meta = new()
    assert apply_view_updates(meta, [], now_ms=9_000) is meta
    no_ops: list[dict[str, Any]] = [
        {"action": "assign-uuid", "uuid": UUID},
        {"action": "upgrade-format-version", "format-version": 1},
        {"action": "add-schema", "schema": SCHEMA},
        {"action": "set-location", "location": LOC},
        {"action": "set-properties", "updates": {"prop": "1"}},
        {"action": "remove-properties", "removals": ["absent"]},
        {"action": "add-view-version", "view-version": version(5, ts=77)},
        {"action": "set-current-view-version", "view-version-id": 1},
    ]
    for update in no_ops:
        assert apply_view_updates(meta, [update], now_ms=9_000) is meta, update
    assert apply_view_updates(meta, no_ops, now_ms=9_000) is meta


def test_assign_uuid_cannot_reassign() -> None:
    with pytest.raises(IllegalArgumentError, match=r"^Cannot reassign uuid$"):
        apply_view_updates(new(), [{"action": "assign-uuid", "uuid": "other"}], now_ms=1)


def test_upgrade_format_version_errors() -> None:
    meta = new()
    update = {"action": "upgrade-format-version", "format-version": 2}
    with pytest.raises(IllegalArgumentError, match="Unsupported format version: 2"):
        apply_view_updates(meta, [update], now_ms=1)
    update = {"action": "upgrade-format-version", "format-version": 0}
    with pytest.raises(IllegalArgumentError, match=r"^Cannot downgrade v1 view to v0$"):
        apply_view_updates(meta, [update], now_ms=1)
    with pytest.raises(BadRequestError):
        apply_view_updates(meta, [{"action": "upgrade-format-version"}], now_ms=1)


def test_add_schema_reuses_identical_else_max_plus_one() -> None:
    meta = new()
    # The requested schema-id is ignored; ids follow the highest existing one.
    out = apply_view_updates(meta, [{"action": "add-schema", "schema": OTHER_SCHEMA}], now_ms=1)
    assert [s["schema-id"] for s in out["schemas"]] == [0, 1]
    assert out["schemas"][1] == {**OTHER_SCHEMA, "schema-id": 1}
    again = apply_view_updates(out, [{"action": "add-schema", "schema": OTHER_SCHEMA}], now_ms=1)
    assert again is out
    # A version may point at the schema added in the same request with -1.
    updates: list[dict[str, Any]] = [
        {"action": "ADD-SCHEMA", "schema": {**SCHEMA, "fields": SCHEMA["fields"][:1]}},
        {"action": "add-view-version", "view-version": version(2, schema_id=-1)},
    ]
    added = apply_view_updates(out, updates, now_ms=1)
    assert [s["schema-id"] for s in added["schemas"]] == [0, 1, 2]
    assert added["versions"][-1]["schema-id"] == 2
    assert added["current-version-id"] == 1


def test_add_schema_rejects_malformed_schema() -> None:
    with pytest.raises(IllegalArgumentError):
        apply_view_updates(new(), [{"action": "add-schema", "schema": {"type": "map"}}], now_ms=1)
    with pytest.raises(BadRequestError, match="missing field schema"):
        apply_view_updates(new(), [{"action": "add-schema"}], now_ms=1)


def test_set_location() -> None:
    meta = new()
    out = apply_view_updates(meta, [{"action": "set-location", "location": "s3://x/y"}], now_ms=1)
    assert out["location"] == "s3://x/y"
    assert out["versions"] == meta["versions"]
    assert out["version-log"] == meta["version-log"]
    for update in ({"action": "set-location", "location": None}, {"action": "set-location"}):
        with pytest.raises(IllegalArgumentError, match=r"^Invalid location: null$"):
            apply_view_updates(meta, [update], now_ms=1)
    with pytest.raises(BadRequestError):
        apply_view_updates(meta, [{"action": "set-location", "location": 5}], now_ms=1)


def test_update_view_properties_leaves_versions_and_history() -> None:
    meta = new(properties={"prop1": "val1", "prop2": "val2"})
    updates: list[dict[str, Any]] = [
        {"action": "set-properties", "updates": {"prop1": "new", "prop3": "val3"}},
        {"action": "remove-properties", "removals": ["prop2"]},
    ]
    out = apply_view_updates(meta, updates, now_ms=9_000)
    assert out["properties"] == {"prop1": "new", "prop3": "val3"}
    assert out["versions"] == meta["versions"]
    assert out["version-log"] == meta["version-log"]
    assert out["current-version-id"] == 1


def test_legacy_property_update_field_names() -> None:
    meta = new(properties={"a": "1"})
    legacy: list[dict[str, Any]] = [
        {"action": "set-properties", "updated": {"b": "2"}},
        {"action": "remove-properties", "removed": ["a"]},
    ]
    assert apply_view_updates(meta, legacy, now_ms=1)["properties"] == {"b": "2"}
    for bad in (
        {"action": "set-properties", "updates": {"a": 1}},
        {"action": "set-properties"},
        {"action": "remove-properties", "removals": "a"},
    ):
        with pytest.raises(BadRequestError):
            apply_view_updates(meta, [bad], now_ms=1)


def test_unknown_or_missing_action_is_400() -> None:
    for bad in ({"action": "add-snapshot"}, {"no": "action"}, "set-location"):
        with pytest.raises(BadRequestError) as err:
            apply_view_updates(new(), [bad], now_ms=1)  # type: ignore[list-item]
        assert err.value.status == 400
    with pytest.raises(BadRequestError):
        apply_view_updates(new(), {"action": "x"}, now_ms=1)  # type: ignore[arg-type]


# ------------------------------------------------------------------- replace


def test_create_or_replace_view() -> None:
    meta = new(properties={"prop1": "val1"})
    updates: list[dict[str, Any]] = [
        {"action": "set-properties", "updates": {"replacedProp1": "val1"}},
        *replace_updates(meta),
    ]
    out = apply_view_updates(meta, updates, now_ms=9_000)
    assert out["current-version-id"] == 2
    assert ids(out) == [1, 2]
    v2 = current(out)
    assert v2["schema-id"] == 1
    assert v2["summary"]["operation"] == "replace"
    assert v2["representations"] == [rep("select count(*) from ns.tbl")]
    # The log takes the new version's own timestamp, not the server clock.
    assert out["version-log"] == [
        {"timestamp-ms": 1_000, "version-id": 1},
        {"timestamp-ms": 2_000, "version-id": 2},
    ]
    assert out["properties"] == {"prop1": "val1", "replacedProp1": "val1"}


def test_concurrent_replace_view_version_lands_as_three() -> None:
    base = new()
    first = replace_updates(base, reps=[rep("select 'first'")])
    second = replace_updates(base, reps=[rep("select 'second'")], ts=3_000)
    assert first[1]["view-version"]["version-id"] == 2
    assert second[1]["view-version"]["version-id"] == 2
    after_first = apply_view_updates(base, first, now_ms=9_000)
    after_second = apply_view_updates(after_first, second, now_ms=9_500)
    assert ids(after_second) == [1, 2, 3]
    assert after_second["current-version-id"] == 3
    assert current(after_second)["representations"] == [rep("select 'second'")]
    # Both replaces used the same schema, so it is shared.
    assert [s["schema-id"] for s in after_second["schemas"]] == [0, 1]
    assert log_ids(after_second) == [1, 2, 3]


def test_replace_view_version_by_updating_sql_for_dialect() -> None:
    reps = [rep("select * from ns.tbl", "spark"), rep("select * from ns.tbl", "trino")]
    meta = new(reps=reps)
    new_reps = [rep("select count(*) from ns.tbl", "spark"), reps[1]]
    out = apply_view_updates(meta, replace_updates(meta, reps=new_reps), now_ms=1)
    assert out["current-version-id"] == 2
    assert current(out)["representations"] == new_reps


def test_add_view_version_id_is_max_of_requested_and_next() -> None:
    meta = new()
    out = apply_view_updates(meta, replace_updates(meta, version_id=10), now_ms=1)
    assert ids(out) == [1, 10]
    again = apply_view_updates(
        out, replace_updates(out, version_id=1, reps=[rep("select 1")]), now_ms=1
    )
    assert ids(again) == [1, 10, 11]


def test_identical_version_reuses_existing_id() -> None:
    meta = new()
    same = version(2, schema_id=0, ts=99_999)  # differs only in id and timestamp
    updates: list[dict[str, Any]] = [
        {"action": "add-view-version", "view-version": same},
        {"action": "set-current-view-version", "view-version-id": 1},
    ]
    assert apply_view_updates(meta, updates, now_ms=1) is meta
    # Unlike Java, "-1" then means the reused version: here already current.
    last: list[dict[str, Any]] = [
        updates[0],
        {"action": "set-current-view-version", "view-version-id": -1},
    ]
    assert apply_view_updates(meta, last, now_ms=1) is meta


def test_stale_replace_whose_schema_and_version_already_landed() -> None:
    """A retried replace repeats what a concurrent commit already wrote: nothing changes."""
    base = new()
    updates = replace_updates(base)
    once = apply_view_updates(base, updates, now_ms=9_000)
    assert apply_view_updates(once, updates, now_ms=9_500) is once
    # Same new schema, different SQL: schema-id -1 resolves to the existing schema 1.
    other = apply_view_updates(once, replace_updates(base, reps=[rep("select 9")]), now_ms=1)
    assert ids(other) == [1, 2, 3]
    assert current(other)["schema-id"] == 1
    assert [s["schema-id"] for s in other["schemas"]] == [0, 1]


def test_identical_version_added_twice_in_one_request_counts_once() -> None:
    meta = new()
    v = version(2, schema_id=0, reps=[rep("select 2")], ts=5)
    updates: list[dict[str, Any]] = [
        {"action": "add-view-version", "view-version": v},
        {"action": "add-view-version", "view-version": {**v, "version-id": 8}},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]
    out = apply_view_updates(meta, updates, now_ms=1)
    assert ids(out) == [1, 2]
    assert out["current-version-id"] == 2
    assert out["version-log"][-1] == {"timestamp-ms": 5, "version-id": 2}


def test_add_view_version_errors() -> None:
    meta = new()
    no_schema = [{"action": "add-view-version", "view-version": version(2, schema_id=-1)}]
    with pytest.raises(ValidationError, match="no schema has been added"):
        apply_view_updates(meta, no_schema, now_ms=1)
    unknown = [{"action": "add-view-version", "view-version": version(2, schema_id=9, reps=[])}]
    with pytest.raises(IllegalArgumentError, match=r"^Cannot add version with unknown schema: 9$"):
        apply_view_updates(meta, unknown, now_ms=1)
    dup = version(2, reps=[rep("a", "spark"), rep("b", "SPARK")])
    with pytest.raises(IllegalArgumentError) as err:
        apply_view_updates(meta, [{"action": "add-view-version", "view-version": dup}], now_ms=1)
    assert err.value.message == (
        "Invalid view version: Cannot add multiple queries for dialect spark"
    )
    with pytest.raises(BadRequestError, match="missing field view-version"):
        apply_view_updates(meta, [{"action": "add-view-version"}], now_ms=1)


def test_set_current_view_version() -> None:
    meta = new()
    out = apply_view_updates(meta, replace_updates(meta), now_ms=9_000)
    # Re-activating an older version is logged at the server's clock.
    back = apply_view_updates(
        out, [{"action": "set-current-view-version", "view-version-id": 1}], now_ms=9_100
    )
    assert back["current-version-id"] == 1
    assert back["version-log"][-1] == {"timestamp-ms": 9_100, "version-id": 1}
    assert ids(back) == [1, 2]
    with pytest.raises(IllegalArgumentError, match=r"^Cannot set current version to unknown"):
        apply_view_updates(
            out, [{"action": "set-current-view-version", "view-version-id": 7}], now_ms=1
        )
    with pytest.raises(ValidationError, match="no current version id has been set"):
        apply_view_updates(
            out, [{"action": "set-current-view-version", "view-version-id": -1}], now_ms=1
        )
    with pytest.raises(BadRequestError):
        apply_view_updates(out, [{"action": "set-current-view-version"}], now_ms=1)


def test_switching_twice_in_one_request_logs_only_the_last() -> None:
    meta = new()
    updates: list[dict[str, Any]] = [
        *replace_updates(meta),
        {"action": "set-current-view-version", "view-version-id": 1},
        {"action": "set-current-view-version", "view-version-id": 2},
    ]
    out = apply_view_updates(meta, updates, now_ms=9_000)
    assert out["version-log"] == [
        {"timestamp-ms": 1_000, "version-id": 1},
        {"timestamp-ms": 2_000, "version-id": 2},
    ]


# --------------------------------------------------------------- dialect drop


def test_dropping_a_dialect_is_rejected_by_default() -> None:
    meta = new(reps=[rep("select 1", "spark"), rep("select 1", "Trino")])
    with pytest.raises(IllegalArgumentError) as err:
        apply_view_updates(meta, replace_updates(meta, reps=[rep("select 2", "spark")]), now_ms=1)
    assert err.value.status == 400
    assert err.value.message == (
        "Cannot replace view due to loss of view dialects "
        "(replace.drop-dialect.allowed=false):\n"
        "Previous dialects: [spark, trino]\n"
        "New dialects: [spark]"
    )
    # Adding a version without making it current drops nothing.
    added_only = replace_updates(meta, reps=[rep("select 2", "spark")])[:2]
    assert ids(apply_view_updates(meta, added_only, now_ms=1)) == [1, 2]
    # Dialects compare case-insensitively.
    swapped = [rep("select 2", "SPARK"), rep("select 2", "trino"), rep("select 2", "hive")]
    assert (
        apply_view_updates(meta, replace_updates(meta, reps=swapped), now_ms=1)[
            "current-version-id"
        ]
        == 2
    )


@pytest.mark.parametrize("value", ["true", "TRUE", "True"])
def test_dropping_a_dialect_is_allowed_by_the_resulting_property(value: str) -> None:
    meta = new(reps=[rep("select 1", "spark"), rep("select 1", "trino")])
    allow = {"action": "set-properties", "updates": {"replace.drop-dialect.allowed": value}}
    updates: list[dict[str, Any]] = [*replace_updates(meta, reps=[rep("select 2", "spark")]), allow]
    out = apply_view_updates(meta, updates, now_ms=1)
    assert view_sql_dialects(current(out)) == ["spark"]
    # Allowed before, but removed in the same request: the resulting properties decide.
    allowed = apply_view_updates(meta, [allow], now_ms=1)
    removal = {"action": "remove-properties", "removals": ["replace.drop-dialect.allowed"]}
    with pytest.raises(IllegalArgumentError, match="loss of view dialects"):
        apply_view_updates(
            allowed, [*replace_updates(allowed, reps=[rep("x", "spark")]), removal], now_ms=1
        )


# -------------------------------------------------------------------- expiry


def test_version_expiry_with_history_size_two() -> None:
    meta = new(properties={"version.history.num-entries": "2"})
    for i in range(3):
        meta = apply_view_updates(
            meta, replace_updates(meta, reps=[rep(f"select {i}")], ts=2_000 + i), now_ms=1
        )
    assert ids(meta) == [3, 4]
    assert meta["current-version-id"] == 4
    assert meta["version-log"] == [
        {"timestamp-ms": 2_001, "version-id": 3},
        {"timestamp-ms": 2_002, "version-id": 4},
    ]


def test_expiry_keeps_every_version_added_in_the_request_and_the_current_one() -> None:
    meta = new(properties={"version.history.num-entries": "1"})
    updates: list[dict[str, Any]] = []
    for i in range(2, 5):
        v = version(i, reps=[rep(f"select {i}")], ts=i)
        updates.append({"action": "add-view-version", "view-version": v})
    out = apply_view_updates(meta, updates, now_ms=1)
    # Three added plus the (unchanged) current one: nothing may go.
    assert ids(out) == [1, 2, 3, 4]
    assert out["current-version-id"] == 1


def test_expiry_keeps_an_old_current_version_and_trims_the_log() -> None:
    meta = new()
    for i in range(2):
        meta = apply_view_updates(meta, replace_updates(meta, reps=[rep(f"q{i}")]), now_ms=1)
    assert ids(meta) == [1, 2, 3]
    updates: list[dict[str, Any]] = [
        {"action": "set-current-view-version", "view-version-id": 1},
        {"action": "set-properties", "updates": {"version.history.num-entries": "2"}},
    ]
    out = apply_view_updates(meta, updates, now_ms=7_000)
    assert ids(out) == [1, 3]
    # Entry 2 no longer resolves, so everything before it goes.
    assert out["version-log"] == [
        {"timestamp-ms": 2_000, "version-id": 3},
        {"timestamp-ms": 7_000, "version-id": 1},
    ]


@pytest.mark.parametrize(
    ("value", "message"), [("0", "must be positive but was 0"), ("x", "x is not an integer")]
)
def test_invalid_history_size_is_400(value: str, message: str) -> None:
    update = {"action": "set-properties", "updates": {"version.history.num-entries": value}}
    with pytest.raises(IllegalArgumentError, match=message):
        apply_view_updates(new(), [update], now_ms=1)


# ------------------------------------------------------------------- purity


def test_updates_never_mutate_inputs() -> None:
    both = [rep("select 1", "spark"), rep("select 1", "trino")]
    meta = new(reps=both)
    meta = apply_view_updates(meta, replace_updates(meta, reps=both[::-1]), now_ms=2)
    updates: list[dict[str, Any]] = [
        {"action": "set-properties", "updates": {"version.history.num-entries": "1"}},
        {"action": "set-properties", "updates": {"replace.drop-dialect.allowed": "true"}},
        {"action": "remove-properties", "removals": ["prop"]},
        {"action": "set-location", "location": "s3://elsewhere"},
        *replace_updates(meta, schema=SCHEMA_THREE, reps=[rep("select 3")]),
    ]
    base_before, updates_before = copy.deepcopy(meta), copy.deepcopy(updates)
    out = apply_view_updates(meta, updates, now_ms=3)
    assert meta == base_before
    assert updates == updates_before
    assert ids(out) == [3]
    # What came from the request is copied, not aliased.
    assert out["schemas"][-1]["schema-id"] == 2
    out["versions"][0]["summary"]["x"] = "y"
    out["versions"][0]["representations"][0]["sql"] = "changed"
    out["schemas"][-1]["fields"].append({})
    assert meta == base_before
    assert updates == updates_before


# ---------------------------------------------------------------- property


DIALECTS = ["spark", "trino", "hive"]
CANDIDATE_SCHEMAS = [SCHEMA, OTHER_SCHEMA, SCHEMA_THREE]
PROPERTY_VALUES: dict[str, list[str]] = {
    "owner": ["me", "you"],
    "version.history.num-entries": ["1", "2", "3"],
    "replace.drop-dialect.allowed": ["true", "false"],
}


class ViewDriver:
    """Draws valid CommitViewRequest update lists for the current metadata."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.sql_counter = 0

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def reps(self) -> list[dict[str, Any]]:
        dialects = self.draw(st.lists(st.sampled_from(DIALECTS), min_size=1, unique=True))
        # Unique SQL keeps each drawn version distinct from every earlier one.
        self.sql_counter += 1
        return [rep(f"select {self.sql_counter} -- {d}", d) for d in dialects]

    def create(self) -> ViewMetadata:
        keys = self.draw(st.lists(st.sampled_from(sorted(PROPERTY_VALUES)), unique=True))
        props = {k: self.draw(st.sampled_from(PROPERTY_VALUES[k])) for k in keys}
        return new(reps=self.reps(), properties=props)

    def updates(self, meta: ViewMetadata, now: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        schema_added = False
        existing_versions = ids(meta)
        for _ in range(self.draw(st.integers(1, 5))):
            kind = self.draw(
                st.sampled_from(
                    # Versions twice: expiry needs more versions than the history size.
                    [
                        "schema",
                        "version",
                        "version",
                        "current",
                        "props",
                        "remove",
                        "location",
                        "noop",
                    ]
                )
            )
            if kind == "schema":
                schema = self.draw(st.sampled_from(CANDIDATE_SCHEMAS))
                out.append({"action": "add-schema", "schema": schema})
                schema_added = True
            elif kind == "version":
                schema_ids = [s["schema-id"] for s in meta["schemas"]]
                schema_id = -1 if schema_added else self.draw(st.sampled_from(schema_ids))
                requested = self.draw(st.integers(1, max(existing_versions) + 2))
                v = version(requested, schema_id=schema_id, reps=self.reps(), ts=now)
                out.append({"action": "add-view-version", "view-version": v})
                if self.draw(st.booleans()):
                    out.append({"action": "set-current-view-version", "view-version-id": -1})
            elif kind == "current":
                target = self.draw(st.sampled_from(existing_versions))
                out.append({"action": "set-current-view-version", "view-version-id": target})
            elif kind == "props":
                key = self.draw(st.sampled_from(sorted(PROPERTY_VALUES)))
                value = self.draw(st.sampled_from(PROPERTY_VALUES[key]))
                out.append({"action": "set-properties", "updates": {key: value}})
            elif kind == "remove":
                keys = self.draw(st.lists(st.sampled_from(sorted(PROPERTY_VALUES)), unique=True))
                out.append({"action": "remove-properties", "removals": keys})
            elif kind == "location":
                location = self.draw(st.sampled_from([LOC, LOC + "/moved"]))
                out.append({"action": "set-location", "location": location})
            else:
                out.append(
                    self.draw(
                        st.sampled_from(
                            [
                                {"action": "assign-uuid", "uuid": UUID},
                                {"action": "upgrade-format-version", "format-version": 1},
                            ]
                        )
                    )
                )
        return out


def check_invariants(before: ViewMetadata, after: ViewMetadata) -> None:
    version_ids = ids(after)
    assert len(set(version_ids)) == len(version_ids)
    schema_ids = {s["schema-id"] for s in after["schemas"]}
    assert len(schema_ids) == len(after["schemas"])
    assert {v["schema-id"] for v in after["versions"]} <= schema_ids
    assert after["current-version-id"] in version_ids
    assert after["version-log"][-1]["version-id"] == after["current-version-id"]
    assert set(log_ids(after)) <= set(version_ids)
    added = len(set(version_ids) - set(ids(before)))
    size = int(after["properties"].get("version.history.num-entries", "10"))
    assert len(version_ids) <= max(size, added + 1)
    allowed = after["properties"].get("replace.drop-dialect.allowed") == "true"
    if not allowed:
        assert set(view_sql_dialects(current(before))) <= set(view_sql_dialects(current(after)))


def check_pyiceberg_reads(meta: ViewMetadata) -> None:
    from pyiceberg.view.metadata import ViewMetadata as PyViewMetadata

    parsed = PyViewMetadata.model_validate(json.loads(json.dumps(meta)))
    assert parsed.view_uuid == meta["view-uuid"]
    assert parsed.current_version_id == meta["current-version-id"]
    assert [v.version_id for v in parsed.versions] == ids(meta)
    assert [e.version_id for e in parsed.version_log] == log_ids(meta)
    assert [s.schema_id for s in parsed.schemas] == [s["schema-id"] for s in meta["schemas"]]
    assert parsed.properties == meta["properties"]
    assert PyViewMetadata.model_validate_json(parsed.model_dump_json()) == parsed


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_view_updates_stay_valid_for_pyiceberg(data: st.DataObject) -> None:
    driver = ViewDriver(data)
    meta = driver.create()
    check_pyiceberg_reads(meta)
    for step in range(data.draw(st.integers(1, 8))):
        now = 10_000 + step
        updates = driver.updates(meta, now)
        frozen_base, frozen_updates = copy.deepcopy(meta), copy.deepcopy(updates)
        try:
            out = apply_view_updates(meta, updates, now_ms=now)
        except IllegalArgumentError as err:
            # The only way a drawn request can be refused: it drops a dialect.
            assert "loss of view dialects" in err.message
            event("refused: dialect dropped")
            continue
        finally:
            assert meta == frozen_base
            assert updates == frozen_updates
        event("unchanged" if out is meta else "changed")
        if set(ids(meta)) - set(ids(out)):
            event("versions expired")
        if out is not meta:
            check_invariants(meta, out)
            check_pyiceberg_reads(out)
        meta = out
