"""Pure table-metadata layer: create, update and name Iceberg metadata files.

Metadata documents are the JSON dicts written to `*.metadata.json`, with the
spec's kebab-case field names. Updates and requirements are the dicts of a
REST `CommitTableRequest`. Nothing here does I/O or mutates its arguments.
See reference/iceberg-rest.md §3 and §5 for the rules followed.
"""

from __future__ import annotations

import re
from typing import Any

from icelog.domain.errors import IllegalArgumentError
from icelog.domain.metadata_updates import check_new_location, check_new_properties
from icelog.domain.schema_ids import (
    assign_fresh_ids,
    highest_field_id,
    id_to_name,
    prepare_schema,
)
from icelog.domain.specs import (
    PARTITION_DATA_ID_START,
    bind_sort_order,
    bind_spec,
    remap_source_ids,
    spec_last_assigned_id,
)
from icelog.domain.table_updates import (
    DEFAULT_FORMAT_VERSION,
    MAX_FORMAT_VERSION,
    SUPPORTED_FORMAT_VERSIONS,
    Metadata,
    MetadataBuilder,
    apply_updates,
    refs_of,
)

__all__ = [
    "RESERVED_PROPERTIES",
    "SUPPORTED_FORMAT_VERSIONS",
    "Metadata",
    "apply_updates",
    "is_create_requirements",
    "metadata_file_name",
    "metadata_file_version",
    "new_table_metadata",
    "refs_of",
]

FORMAT_VERSION_PROPERTY = "format-version"
COMPRESSION_CODEC_PROPERTY = "write.parquet.compression-codec"
DEFAULT_COMPRESSION_CODEC = "zstd"

# Java TableProperties.RESERVED_PROPERTIES: derived from the metadata itself,
# so never persisted in `properties`.
RESERVED_PROPERTIES: frozenset[str] = frozenset(
    {
        "format-version",
        "uuid",
        "snapshot-count",
        "current-snapshot-id",
        "current-snapshot-summary",
        "current-snapshot-timestamp-ms",
        "current-schema",
        "default-partition-spec",
        "default-sort-order",
    }
)

_INT_MAX = 2**31 - 1


def _format_version(properties: dict[str, str]) -> int:
    raw = properties.get(FORMAT_VERSION_PROPERTY)
    if raw is None:
        return DEFAULT_FORMAT_VERSION
    try:
        version = int(str(raw).strip())
    except ValueError:
        raise IllegalArgumentError(f"Invalid format version: {raw}") from None
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise IllegalArgumentError(
            f"Unsupported format version: v{version} (supported: v{MAX_FORMAT_VERSION})"
        )
    return version


def new_table_metadata(
    *,
    uuid: str,
    location: str,
    schema: dict[str, Any],
    partition_spec: dict[str, Any] | None,
    sort_order: dict[str, Any] | None,
    properties: dict[str, str],
    now_ms: int,
) -> Metadata:
    """CreateTableRequest -> initial metadata (Java `TableMetadata.newTableMetadata`)."""
    check_new_properties(properties, "table")
    location = check_new_location(location, "table")
    version = _format_version(properties)
    # Validated, checked for the format version and normalised like every stored schema.
    prepared = prepare_schema(schema, version)

    fresh_schema = assign_fresh_ids(prepared, 0)
    # Partition and sort fields follow their columns by name into the fresh ids.
    old_names = id_to_name(prepared)
    new_ids = {name: fid for fid, name in id_to_name(fresh_schema).items()}
    spec_in = partition_spec or {"fields": []}
    order_in = sort_order or {"fields": []}
    if not isinstance(spec_in, dict) or not isinstance(spec_in.get("fields", []), list):
        raise IllegalArgumentError(
            "Cannot parse partition spec: expected an object with a fields array"
        )
    if not isinstance(order_in, dict) or not isinstance(order_in.get("fields", []), list):
        raise IllegalArgumentError(
            "Cannot parse sort order: expected an object with a fields array"
        )
    spec_fields = [_remap(f, old_names, new_ids, "partition") for f in spec_in.get("fields", [])]
    order_fields = [_remap(f, old_names, new_ids, "sort") for f in order_in.get("fields", [])]
    spec = bind_spec(
        {"fields": spec_fields},
        fresh_schema,
        spec_id=0,
        first_new_field_id=PARTITION_DATA_ID_START,
        reassign_field_ids=True,
    )
    order = bind_sort_order({"fields": order_fields}, fresh_schema, order_id=1)

    persisted = {k: v for k, v in properties.items() if k not in RESERVED_PROPERTIES}
    persisted.setdefault(COMPRESSION_CODEC_PROPERTY, DEFAULT_COMPRESSION_CODEC)

    builder = MetadataBuilder(None, format_version=version)
    builder.uuid = uuid
    builder.location = location
    builder.last_updated_ms = now_ms
    builder.last_column_id = highest_field_id(fresh_schema)
    builder.schemas = [fresh_schema]
    builder.current_schema_id = 0
    builder.specs = [spec]
    builder.default_spec_id = 0
    builder.last_partition_id = spec_last_assigned_id(spec)
    builder.sort_orders = [order]
    builder.default_sort_order_id = order["order-id"]
    builder.properties = persisted
    return builder.to_metadata()


def _remap(
    field: Any, old_names: dict[int, str], new_ids: dict[str, int], kind: str
) -> dict[str, Any]:
    if not isinstance(field, dict):
        raise IllegalArgumentError(f"Cannot parse {kind} field from non-object")
    return remap_source_ids(field, old_names, new_ids, kind)


def is_create_requirements(requirements: list[dict[str, Any]]) -> bool:
    """Java `CatalogHandlers.isCreate`: assert-create must stand alone."""
    types = [str(r.get("type", "")).lower() if isinstance(r, dict) else "" for r in requirements]
    if "assert-create" not in types:
        return False
    others = [t for t in types if t != "assert-create"]
    if others:
        raise IllegalArgumentError(f"Invalid create requirements: [{', '.join(others)}]")
    return True


_VERSION_DIGITS = re.compile(r"^\+?[0-9]+$")


def metadata_file_version(location: str) -> int:
    """Java `BaseMetastoreTableOperations.parseVersion`; -1 when there is no version."""
    start = location.rfind("/") + 1
    end = location.find("-", start)
    if end < 0:
        return -1
    digits = location[start:end]
    if not _VERSION_DIGITS.match(digits):
        return -1
    version = int(digits)
    return version if version <= _INT_MAX else -1


def metadata_file_name(version: int, file_uuid: str, *, gzip: bool = False) -> str:
    """`%05d-<uuid>.metadata.json`, or `.gz.metadata.json` for gzip files."""
    suffix = ".gz.metadata.json" if gzip else ".metadata.json"
    return f"{version:05d}-{file_uuid}{suffix}"
