"""Whole metadata documents a client hands the catalog (`register`, `register-view`).

Commits build documents through the update rules, which check every piece they add. A
registered document arrives whole, written by someone else: it is checked here with the same
rules, piece by piece, before the catalog names it — so that no later commit, load or purge
meets a field of the wrong shape (a 500), and no client is handed a table it cannot read.
"""

from __future__ import annotations

from typing import Any

from icelog.domain.errors import BadRequestError, IllegalArgumentError, ValidationError
from icelog.domain.metadata_state import SUPPORTED_FORMAT_VERSIONS, MetadataState
from icelog.domain.properties import reject_secret_properties
from icelog.domain.schema_ids import prepare_schema
from icelog.domain.schema_types import is_int, is_int64
from icelog.domain.snapshot_updates import check_snapshot_fields, check_statistics
from icelog.domain.specs import (
    check_order_compatibility,
    check_spec_compatibility,
    normalize_transform,
    source_ids,
)
from icelog.domain.view_updates import parse_view_version


def _bad(what: str) -> BadRequestError:
    return BadRequestError(f"Invalid metadata file: {what}")


def _objects(document: dict[str, Any], key: str, *, required: bool = False) -> list[Any]:
    value = document.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise _bad(f"{key} must be a list of objects")
    return value


def _string_map(document: dict[str, Any], key: str) -> dict[str, str]:
    value = document.get(key) or {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _bad(f"{key} must be a map of strings")
    return value


def _int_field(item: dict[str, Any], key: str, where: str, *, required: bool = True) -> None:
    value = item.get(key)
    if value is None and not required:
        return
    if not is_int64(value):
        raise _bad(f"{where}.{key} must be an integer")


def _ids(items: list[dict[str, Any]], key: str, where: str) -> set[int]:
    ids: set[int] = set()
    for item in items:
        _int_field(item, key, where)
        if item[key] in ids:
            raise _bad(f"{where} repeats {key} {item[key]}")
        ids.add(item[key])
    return ids


def check_table_metadata(document: dict[str, Any]) -> None:
    """400 unless `document` is table metadata every reader can load (Java's
    `TableMetadataParser` and PyIceberg's parser), with no secret-looking property."""
    version = document.get("format-version")
    if not is_int(version) or version not in SUPPORTED_FORMAT_VERSIONS:
        raise _bad(f"unsupported format-version {version!r}")
    if not isinstance(document.get("table-uuid"), str):
        raise _bad("table-uuid must be a string")
    if not isinstance(document.get("location"), str):
        raise _bad("location must be a string")
    for key in ("last-sequence-number", "last-updated-ms", "last-column-id", "last-partition-id"):
        _int_field(document, key, "metadata", required=False)
    properties = _string_map(document, "properties")
    reject_secret_properties(properties, "Table")
    schemas = _objects(document, "schemas")
    if not schemas and isinstance(document.get("schema"), dict):
        schemas = [{**document["schema"], "schema-id": document["schema"].get("schema-id", 0)}]
    if not schemas:
        raise _bad("no schema")
    prepared = {}
    for schema in schemas:
        prepared[schema.get("schema-id")] = prepare_schema(schema, version)
    _ids(schemas, "schema-id", "schemas")
    current = document.get("current-schema-id", schemas[0].get("schema-id"))
    if current not in prepared:
        raise ValidationError(f"Cannot find current schema: {current}")
    schema = prepared[current]
    specs = _objects(document, "partition-specs")
    for spec in specs:
        if not isinstance(spec.get("fields"), list):
            raise _bad("a partition spec needs a fields array")
        for field in spec["fields"]:
            if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                raise _bad("partition fields must be objects with a name")
            normalize_transform(field.get("transform"))
            source_ids(field)
            _int_field(field, "field-id", "partition field", required=version > 1)
    spec_ids = _ids(specs, "spec-id", "partition-specs")
    if specs:
        default = document.get("default-spec-id", specs[0]["spec-id"])
        if default not in spec_ids:
            raise ValidationError(f"Cannot find default partition spec: {default}")
        check_spec_compatibility(next(s for s in specs if s["spec-id"] == default), schema)
    orders = _objects(document, "sort-orders")
    for order in orders:
        if not isinstance(order.get("fields"), list):
            raise _bad("a sort order needs a fields array")
        for field in order["fields"]:
            if not isinstance(field, dict):
                raise _bad("sort fields must be objects")
            normalize_transform(field.get("transform"))
            source_ids(field)
    order_ids = _ids(orders, "order-id", "sort-orders")
    if orders:
        default = document.get("default-sort-order-id", orders[0]["order-id"])
        if default not in order_ids:
            raise ValidationError(f"Cannot find default sort order: {default}")
        check_order_compatibility(next(o for o in orders if o["order-id"] == default), schema)
    snapshots = _objects(document, "snapshots")
    for snapshot in snapshots:
        check_snapshot_fields(snapshot, version)
        schema_id = snapshot.get("schema-id")
        if schema_id is not None and schema_id not in prepared:
            raise ValidationError(f"Snapshot refers to an unknown schema id: {schema_id}")
    snapshot_ids = _ids(snapshots, "snapshot-id", "snapshots")
    _check_refs(document, snapshot_ids)
    for key in ("statistics", "partition-statistics"):
        for stats in _objects(document, key):
            check_statistics(stats, key, "register")
    for entry in _objects(document, "snapshot-log"):
        _int_field(entry, "timestamp-ms", "snapshot-log")
        _int_field(entry, "snapshot-id", "snapshot-log")
    for entry in _objects(document, "metadata-log"):
        _int_field(entry, "timestamp-ms", "metadata-log")
        if not isinstance(entry.get("metadata-file"), str):
            raise _bad("metadata-log entries need a metadata-file")
    # The state a commit starts from must build from it.
    try:
        MetadataState(document).to_metadata()
    except (KeyError, TypeError, ValueError, StopIteration):
        raise _bad("it cannot be read as table metadata") from None


def _check_refs(document: dict[str, Any], snapshot_ids: set[int]) -> None:
    refs = document.get("refs") or {}
    if not isinstance(refs, dict):
        raise _bad("refs must be an object")
    for name, ref in refs.items():
        if not isinstance(ref, dict) or ref.get("type") not in ("branch", "tag"):
            raise _bad(f"ref {name} must be a branch or a tag")
        if ref.get("snapshot-id") not in snapshot_ids:
            raise ValidationError(f"Ref {name} points to an unknown snapshot")
    current = document.get("current-snapshot-id")
    if current not in (None, -1) and current not in snapshot_ids:
        raise ValidationError(f"current-snapshot-id {current} is not a snapshot of the table")


def check_view_metadata(document: dict[str, Any]) -> None:
    """400 unless `document` is view metadata every reader can load."""
    if document.get("format-version") != 1:
        raise _bad(f"unsupported view format-version {document.get('format-version')!r}")
    for key in ("view-uuid", "location"):
        if not isinstance(document.get(key), str):
            raise _bad(f"{key} must be a string")
    reject_secret_properties(_string_map(document, "properties"), "View")
    schemas = _objects(document, "schemas", required=True)
    for schema in schemas:
        prepare_schema(schema, None)
    schema_ids = _ids(schemas, "schema-id", "schemas")
    versions = _objects(document, "versions", required=True)
    for version in versions:
        parsed = parse_view_version(version, now_ms=0)
        if parsed["schema-id"] not in schema_ids:
            raise ValidationError(f"View version refers to an unknown schema id: {parsed}")
    version_ids = _ids(versions, "version-id", "versions")
    current = document.get("current-version-id")
    if current not in version_ids:
        raise IllegalArgumentError(f"Cannot find current version {current} in view versions")
    for entry in _objects(document, "version-log"):
        _int_field(entry, "timestamp-ms", "version-log")
        _int_field(entry, "version-id", "version-log")
