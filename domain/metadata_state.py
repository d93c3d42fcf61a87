"""Working state of one table-metadata document: load, look up, serialise.

`MetadataState` reads a metadata dict (normalising legacy v1 layouts) into
plain Python containers and writes it back in the field order of Java's
`TableMetadataParser.toJson`. The update actions live in
`domain.table_updates`, which subclasses it.
"""

from __future__ import annotations

from typing import Any

from icelog.domain.errors import ValidationError
from icelog.domain.specs import UNPARTITIONED_LAST_ASSIGNED_ID, spec_last_assigned_id

Metadata = dict[str, Any]

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
MAX_FORMAT_VERSION = SUPPORTED_FORMAT_VERSIONS[-1]
DEFAULT_FORMAT_VERSION = 2
MIN_NULL_CURRENT_SNAPSHOT_VERSION = 3
MIN_ROW_LINEAGE_VERSION = 3
MAIN_BRANCH = "main"
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
PREVIOUS_VERSIONS_MAX_DEFAULT = 100


def refs_of(metadata: Metadata) -> dict[str, dict[str, Any]]:
    """The refs map, deriving `main` from `current-snapshot-id` for legacy files."""
    refs = dict(metadata.get("refs") or {})
    current = metadata.get("current-snapshot-id")
    if MAIN_BRANCH not in refs and current is not None and current != -1:
        refs[MAIN_BRANCH] = {"snapshot-id": current, "type": "branch"}
    return refs


class MetadataState:
    """Working state of one metadata document."""

    def __init__(
        self, base: Metadata | None, *, format_version: int = DEFAULT_FORMAT_VERSION
    ) -> None:
        self.base = base
        if base is None:
            self._init_empty(format_version)
        else:
            self._init_from(base)

    def _init_empty(self, format_version: int) -> None:
        self.format_version = format_version
        self.uuid: str | None = None
        self.location: str | None = None
        self.last_sequence_number = 0
        self.last_updated_ms: int | None = None
        self.last_column_id = 0
        self.schemas: list[dict[str, Any]] = []
        self.current_schema_id: int | None = None
        self.specs: list[dict[str, Any]] = []
        self.default_spec_id: int | None = None
        self.last_partition_id = UNPARTITIONED_LAST_ASSIGNED_ID
        self.sort_orders: list[dict[str, Any]] = []
        self.default_sort_order_id: int | None = None
        self.properties: dict[str, str] = {}
        self.snapshots: list[dict[str, Any]] = []
        self.refs: dict[str, dict[str, Any]] = {}
        self.statistics: list[dict[str, Any]] = []
        self.partition_statistics: list[dict[str, Any]] = []
        self.snapshot_log: list[dict[str, Any]] = []
        self.metadata_log: list[dict[str, Any]] = []
        self.next_row_id = 0
        self.encryption_keys: list[dict[str, Any]] = []

    def _init_from(self, base: Metadata) -> None:
        self.format_version = int(base["format-version"])
        self.uuid = base.get("table-uuid")
        self.location = base.get("location")
        self.last_sequence_number = int(base.get("last-sequence-number") or 0)
        self.last_updated_ms = base.get("last-updated-ms")
        self.last_column_id = int(base.get("last-column-id") or 0)
        if base.get("schemas"):
            self.schemas = list(base["schemas"])
            self.current_schema_id = base.get(
                "current-schema-id", self.schemas[0].get("schema-id", 0)
            )
        else:
            # Legacy v1 files carry only `schema`.
            legacy = base.get("schema") or {"type": "struct", "fields": []}
            self.schemas = [{**legacy, "schema-id": legacy.get("schema-id", 0)}]
            self.current_schema_id = self.schemas[0]["schema-id"]
        if base.get("partition-specs"):
            self.specs = list(base["partition-specs"])
            self.default_spec_id = base.get("default-spec-id", self.specs[0]["spec-id"])
        else:
            self.specs = [{"spec-id": 0, "fields": list(base.get("partition-spec") or [])}]
            self.default_spec_id = 0
        self.last_partition_id = int(
            base.get("last-partition-id", max(spec_last_assigned_id(s) for s in self.specs))
        )
        self.sort_orders = list(base.get("sort-orders") or [{"order-id": 0, "fields": []}])
        self.default_sort_order_id = base.get(
            "default-sort-order-id", self.sort_orders[0]["order-id"]
        )
        self.properties = dict(base.get("properties") or {})
        self.snapshots = list(base.get("snapshots") or [])
        self.refs = refs_of(base)
        self.statistics = list(base.get("statistics") or [])
        self.partition_statistics = list(base.get("partition-statistics") or [])
        self.snapshot_log = list(base.get("snapshot-log") or [])
        self.metadata_log = list(base.get("metadata-log") or [])
        self.next_row_id = int(base.get("next-row-id") or 0)
        self.encryption_keys = list(base.get("encryption-keys") or [])

    # ------------------------------------------------------------------ lookups

    def schema_by_id(self, schema_id: int | None) -> dict[str, Any] | None:
        return next((s for s in self.schemas if s.get("schema-id") == schema_id), None)

    def current_schema(self) -> dict[str, Any]:
        schema = self.schema_by_id(self.current_schema_id)
        if schema is None:
            raise ValidationError("Cannot find current schema: no schema has been set")
        return schema

    def snapshot_by_id(self, snapshot_id: int) -> dict[str, Any] | None:
        return next((s for s in self.snapshots if s.get("snapshot-id") == snapshot_id), None)

    def to_metadata(self) -> Metadata:
        """Serialise in `TableMetadataParser.toJson` field order."""
        v = self.format_version
        main = self.refs.get(MAIN_BRANCH)
        out: Metadata = {"format-version": v, "table-uuid": self.uuid, "location": self.location}
        if v >= 2:
            out["last-sequence-number"] = self.last_sequence_number
        out["last-updated-ms"] = self.last_updated_ms
        out["last-column-id"] = self.last_column_id
        if v == 1:
            out["schema"] = self.current_schema()
        out["current-schema-id"] = self.current_schema_id
        out["schemas"] = list(self.schemas)
        default_spec = next(s for s in self.specs if s["spec-id"] == self.default_spec_id)
        if v == 1:
            out["partition-spec"] = list(default_spec["fields"])
        out["default-spec-id"] = self.default_spec_id
        out["partition-specs"] = list(self.specs)
        out["last-partition-id"] = self.last_partition_id
        out["default-sort-order-id"] = self.default_sort_order_id
        out["sort-orders"] = list(self.sort_orders)
        out["properties"] = dict(self.properties)
        if main is not None:
            out["current-snapshot-id"] = main["snapshot-id"]
        else:
            out["current-snapshot-id"] = None if v >= MIN_NULL_CURRENT_SNAPSHOT_VERSION else -1
        if v >= MIN_ROW_LINEAGE_VERSION:
            out["next-row-id"] = self.next_row_id
        if self.encryption_keys:
            out["encryption-keys"] = list(self.encryption_keys)
        out["refs"] = dict(self.refs)
        out["snapshots"] = list(self.snapshots)
        out["statistics"] = list(self.statistics)
        out["partition-statistics"] = list(self.partition_statistics)
        out["snapshot-log"] = list(self.snapshot_log)
        out["metadata-log"] = list(self.metadata_log)
        return out
