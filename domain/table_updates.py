"""Applying REST `MetadataUpdate`s to table metadata (Java `TableMetadata.Builder`).

`MetadataBuilder` holds a working copy of one metadata document, applies the
update actions of reference/iceberg-rest.md §3.2 one by one and, in
`build()`, performs the finishing steps of `TableMetadata.build()`. Inputs are
never mutated: containers are copied on load and entries replaced, not edited.
"""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Callable
from typing import Any

from icelog.domain.errors import (
    BadRequestError,
    CommitFailedError,
    IllegalArgumentError,
    ValidationError,
)
from icelog.domain.metadata_rules import legacy
from icelog.domain.metadata_state import (
    DEFAULT_FORMAT_VERSION,
    LAST_ADDED,
    MAIN_BRANCH,
    MAX_FORMAT_VERSION,
    MIN_ROW_LINEAGE_VERSION,
    PREVIOUS_VERSIONS_MAX,
    PREVIOUS_VERSIONS_MAX_DEFAULT,
    SUPPORTED_FORMAT_VERSIONS,
    Metadata,
    MetadataState,
    refs_of,
)
from icelog.domain.metadata_state import (
    is_int as _is_int,
)
from icelog.domain.schema_ids import (
    highest_field_id,
    is_int32,
    is_int64,
    prepare_schema,
    same_schema,
)
from icelog.domain.specs import (
    PARTITION_DATA_ID_START,
    bind_sort_order,
    bind_spec,
    check_order_compatibility,
    check_spec_compatibility,
    has_sequential_ids,
    same_order,
    spec_compatible_with,
    spec_last_assigned_id,
)

__all__ = [
    "DEFAULT_FORMAT_VERSION",
    "MAX_FORMAT_VERSION",
    "SUPPORTED_FORMAT_VERSIONS",
    "Metadata",
    "MetadataBuilder",
    "apply_updates",
    "refs_of",
]


def _show(value: Any) -> str:
    """Format like Java's String.format("%s"): null, not None."""
    return "null" if value is None else str(value)


def _require(update: dict[str, Any], key: str, kind: str = "field") -> Any:
    if key not in update or update[key] is None:
        raise BadRequestError(f"Cannot parse {update.get('action')} update: missing {kind} {key}")
    return update[key]


def _require_str(update: dict[str, Any], key: str) -> str:
    value = _require(update, key)
    if not isinstance(value, str):
        raise BadRequestError(f"Cannot parse {update.get('action')} update: {key} must be a string")
    return value


def _require_obj(update: dict[str, Any], key: str) -> dict[str, Any]:
    value = _require(update, key)
    if not isinstance(value, dict):
        raise BadRequestError(
            f"Cannot parse {update.get('action')} update: {key} must be an object"
        )
    return value


# Snapshot fields are stored verbatim, so their JSON types are checked as Java's
# SnapshotParser reads them (JsonUtil.getLong / getInt / getString): Java and PyIceberg
# would reject the document otherwise, and every later load would fail.
_SNAPSHOT_LONG_FIELDS = (
    "snapshot-id",
    "timestamp-ms",
    "parent-snapshot-id",
    "sequence-number",
    "first-row-id",
    "added-rows",
)
_SNAPSHOT_INT_FIELDS = ("schema-id",)

# PyIceberg's `Operation` enum (case-sensitive); Java's DataOperations are the same four.
SNAPSHOT_OPERATIONS = ("append", "replace", "overwrite", "delete")


def check_snapshot_fields(snapshot: dict[str, Any], format_version: int) -> None:
    problem = None
    for key in _SNAPSHOT_LONG_FIELDS:
        if snapshot.get(key) is not None and not is_int64(snapshot[key]):
            problem = f"{key} must be a long"
    for key in _SNAPSHOT_INT_FIELDS:
        if snapshot.get(key) is not None and not is_int32(snapshot[key]):
            problem = f"{key} must be an integer"
    key_id = snapshot.get("key-id")
    if key_id is not None and not isinstance(key_id, str):
        # SnapshotParser: JsonUtil.getStringOrNull(KEY_ID).
        problem = "key-id must be a string"
    manifest_list = snapshot.get("manifest-list")
    if manifest_list is not None and not isinstance(manifest_list, str):
        problem = "manifest-list must be a string"
    manifests = snapshot.get("manifests")
    if manifests is not None and (
        not isinstance(manifests, list) or not all(isinstance(m, str) for m in manifests)
    ):
        problem = "manifests must be an array of strings"
    summary = snapshot.get("summary")
    if summary is not None and (
        not isinstance(summary, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in summary.items())
    ):
        problem = "summary must be an object of strings"
    if problem is not None:
        raise BadRequestError(f"Cannot parse add-snapshot update: {problem}")
    if manifest_list is None:
        # Java still reads a v1 snapshot's embedded `manifests` list, but PyIceberg 0.12
        # requires `manifest-list` ("Field required") and cannot load the table.
        raise BadRequestError("Cannot parse add-snapshot update: missing string manifest-list")
    first_row_id, added_rows = snapshot.get("first-row-id"), snapshot.get("added-rows")
    # Java BaseSnapshot's constructor checks (IllegalArgumentException).
    if first_row_id is not None and first_row_id < 0:
        raise IllegalArgumentError(f"Invalid first-row-id (cannot be negative): {first_row_id}")
    if added_rows is not None and added_rows < 0:
        raise IllegalArgumentError(f"Invalid added-rows (cannot be negative): {added_rows}")
    if first_row_id is not None and added_rows is None:
        raise IllegalArgumentError("Invalid added-rows (required when first-row-id is set): null")
    _check_summary(summary, format_version)


def _check_summary(summary: dict[str, str] | None, format_version: int) -> None:
    """The spec requires a summary with an `operation` from v2 on. Java's parser falls back
    to "overwrite" when it is missing and PyIceberg to a warning, but the operation is what
    engines use to skip snapshots (expiry, incremental reads), and PyIceberg's enum refuses
    any other value ("Input should be 'append', 'replace', 'overwrite' or 'delete'")."""
    if summary is None:
        if format_version >= 2:
            raise ValidationError("Invalid snapshot: summary is required in v2 and later")
        return
    operation = summary.get("operation")
    if operation is None:
        raise ValidationError("Invalid snapshot summary: missing operation")
    if operation not in SNAPSHOT_OPERATIONS:
        raise ValidationError(
            f"Invalid snapshot summary: unknown operation {operation} "
            f"(expected one of {', '.join(SNAPSHOT_OPERATIONS)})"
        )


# Statistics files (Java StatisticsFileParser / PartitionStatisticsFileParser): the fields
# both parsers require, with their JSON types.
_STATISTICS_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "statistics": (
        ("snapshot-id", "long"),
        ("statistics-path", "string"),
        ("file-size-in-bytes", "long"),
        ("file-footer-size-in-bytes", "long"),
    ),
    "partition-statistics": (
        ("snapshot-id", "long"),
        ("statistics-path", "string"),
        ("file-size-in-bytes", "long"),
    ),
}
# PyIceberg 0.12's BlobMetadata.type is a Literal of these two (Java takes any string):
# any other blob type makes the whole table unloadable in PyIceberg.
BLOB_TYPES = ("apache-datasketches-theta-v1", "deletion-vector-v1")
_BLOB_FIELDS = (("type", "string"), ("snapshot-id", "long"), ("sequence-number", "long"))


def _json_type_ok(value: Any, kind: str) -> bool:
    if kind == "long":
        return is_int64(value)
    if kind == "int":
        return is_int32(value)
    return isinstance(value, str)


def check_statistics(stats: dict[str, Any], key: str, action: str) -> None:
    for field, kind in _STATISTICS_FIELDS[key]:
        if not _json_type_ok(stats.get(field), kind):
            raise BadRequestError(
                f"Cannot parse {action} update: {field} must be a {kind} in {key}"
            )
    if key != "statistics":
        return
    if stats.get("key-metadata") is not None and not isinstance(stats["key-metadata"], str):
        raise BadRequestError(f"Cannot parse {action} update: key-metadata must be a string")
    blobs = stats.get("blob-metadata")
    if not isinstance(blobs, list):
        raise BadRequestError(
            f"Cannot parse {action} update: Cannot parse blob metadata from non-array"
        )
    for blob in blobs:
        if not isinstance(blob, dict):
            raise BadRequestError(f"Cannot parse {action} update: blob metadata must be objects")
        for field, kind in _BLOB_FIELDS:
            if not _json_type_ok(blob.get(field), kind):
                raise BadRequestError(
                    f"Cannot parse {action} update: blob {field} must be a {kind}"
                )
        fields = blob.get("fields")
        if not isinstance(fields, list) or not all(is_int32(f) for f in fields):
            raise BadRequestError(
                f"Cannot parse {action} update: blob fields must be an array of integers"
            )
        properties = blob.get("properties")
        if properties is not None and not (
            isinstance(properties, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())
        ):
            raise BadRequestError(
                f"Cannot parse {action} update: blob properties must be a map of strings"
            )
        if blob["type"] not in BLOB_TYPES:
            raise IllegalArgumentError(
                f"Unsupported blob type: {blob['type']} (PyIceberg reads only "
                f"{' and '.join(BLOB_TYPES)})"
            )


def _require_int(update: dict[str, Any], key: str) -> int:
    value = _require(update, key)
    if not _is_int(value):
        raise BadRequestError(
            f"Cannot parse {update.get('action')} update: {key} must be an integer"
        )
    return int(value)


def _require_int_list(update: dict[str, Any], key: str) -> list[int]:
    value = _require(update, key)
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise BadRequestError(
            f"Cannot parse {update.get('action')} update: {key} must be an array of integers"
        )
    return list(value)


class MetadataBuilder(MetadataState):
    """A `MetadataState` that applies REST updates and tracks what changed."""

    def __init__(
        self, base: Metadata | None, *, format_version: int = DEFAULT_FORMAT_VERSION
    ) -> None:
        super().__init__(base, format_version=format_version)
        # What happened in this request, in order, for snapshot-log fix-ups
        # and the "last added" (-1) rules.
        self.changes: list[tuple[str, Any]] = []
        self.last_added_schema_id: int | None = None
        self.last_added_spec_id: int | None = None
        self.last_added_order_id: int | None = None

    def _added_in_request(self, kind: str, item_id: int | None) -> bool:
        return item_id is not None and (kind, item_id) in self.changes

    # ------------------------------------------------------------------ actions

    def assign_uuid(self, update: dict[str, Any]) -> None:
        new_uuid = _require_str(update, "uuid")
        if not isinstance(new_uuid, str):
            raise BadRequestError("Cannot parse assign-uuid update: uuid must be a string")
        if self.uuid is not None and self.uuid.lower() == new_uuid.lower():
            return
        if self.base is not None and self.uuid is not None:
            # The spec allows assign-uuid only while creating; Java's view
            # builder rejects re-assignment with this message.
            raise IllegalArgumentError("Cannot reassign uuid")
        self.uuid = new_uuid
        self.changes.append(("assign-uuid", new_uuid))

    def upgrade_format_version(self, update: dict[str, Any]) -> None:
        version = _require_int(update, "format-version")
        if version > MAX_FORMAT_VERSION:
            raise IllegalArgumentError(
                "Cannot upgrade table to unsupported format version: "
                f"v{version} (supported: v{MAX_FORMAT_VERSION})"
            )
        if version < self.format_version:
            raise IllegalArgumentError(
                f"Cannot downgrade v{self.format_version} table to v{version}"
            )
        if version == self.format_version:
            return
        if version >= MIN_ROW_LINEAGE_VERSION > self.format_version:
            # Spec "Row Lineage": next-row-id starts at 0 on upgrade.
            self.next_row_id = 0
        self.format_version = version
        self.changes.append(("upgrade-format-version", version))

    def add_schema(self, update: dict[str, Any]) -> None:
        raw = _require_obj(update, "schema")
        schema = raw if legacy() else prepare_schema(raw, self.format_version)
        new_last_column_id = max(self.last_column_id, highest_field_id(schema))
        existing = next((s for s in self.schemas if same_schema(s, schema)), None)
        if existing is not None and new_last_column_id == self.last_column_id:
            # Identical content: reuse its id; it counts as "last added" only if
            # this very request added it.
            sid = existing["schema-id"]
            self.last_added_schema_id = sid if self._added_in_request("add-schema", sid) else None
            return
        if existing is not None:
            new_id = existing["schema-id"]
        else:
            new_id = max((s["schema-id"] for s in self.schemas), default=-1) + 1
            self.schemas.append({**schema, "schema-id": new_id})
        self.last_column_id = new_last_column_id
        self.changes.append(("add-schema", new_id))
        self.last_added_schema_id = new_id

    def set_current_schema(self, update: dict[str, Any]) -> None:
        schema_id = _require_int(update, "schema-id")
        if schema_id == LAST_ADDED:
            if self.last_added_schema_id is None:
                raise ValidationError("Cannot set last added schema: no schema has been added")
            schema_id = self.last_added_schema_id
        if schema_id == self.current_schema_id:
            return
        if self.schema_by_id(schema_id) is None:
            raise IllegalArgumentError(f"Cannot set current schema to unknown schema: {schema_id}")
        self.current_schema_id = schema_id
        self.changes.append(("set-current-schema", schema_id))

    def _binding_schema(self) -> dict[str, Any]:
        """The schema a new spec or sort order is bound to: the current one, or — in a create
        transaction that sends set-current-schema last, as DuckDB does — the schema added in
        this request. build() re-checks compatibility against the final current schema."""
        if (
            self.schema_by_id(self.current_schema_id) is None
            and self.last_added_schema_id is not None
        ):
            added = self.schema_by_id(self.last_added_schema_id)
            if added is not None:
                return added
        return self.current_schema()

    def add_spec(self, update: dict[str, Any]) -> None:
        raw = _require_obj(update, "spec")
        # v1 requires sequential ids from 1000; v2+ takes new ids after the
        # highest ever assigned so that a missing field-id never collides
        # with a field of an older spec.
        first_new = (
            PARTITION_DATA_ID_START if self.format_version == 1 else self.last_partition_id + 1
        )
        spec = bind_spec(
            raw,
            self._binding_schema(),
            spec_id=0,
            first_new_field_id=first_new,
            reassign_field_ids=False,
        )
        existing = next((s for s in self.specs if spec_compatible_with(spec, s)), None)
        if existing is not None:
            sid = existing["spec-id"]
            self.last_added_spec_id = sid if self._added_in_request("add-spec", sid) else None
            return
        if self.format_version == 1 and not has_sequential_ids(spec):
            raise ValidationError(
                f"Spec does not use sequential IDs that are required in v1: {spec['fields']}"
            )
        new_id = max((s["spec-id"] for s in self.specs), default=-1) + 1
        spec["spec-id"] = new_id
        self.specs.append(spec)
        self.last_partition_id = max(self.last_partition_id, spec_last_assigned_id(spec))
        self.changes.append(("add-spec", new_id))
        self.last_added_spec_id = new_id

    def set_default_spec(self, update: dict[str, Any]) -> None:
        spec_id = _require_int(update, "spec-id")
        if spec_id == LAST_ADDED:
            if self.last_added_spec_id is None:
                raise ValidationError("Cannot set last added spec: no spec has been added")
            spec_id = self.last_added_spec_id
        if spec_id == self.default_spec_id:
            return
        if not any(s["spec-id"] == spec_id for s in self.specs):
            raise IllegalArgumentError(
                f"Cannot set default partition spec to unknown spec: {spec_id}"
            )
        self.default_spec_id = spec_id
        self.changes.append(("set-default-spec", spec_id))

    def add_sort_order(self, update: dict[str, Any]) -> None:
        raw = _require_obj(update, "sort-order")
        order = bind_sort_order(raw, self._binding_schema(), order_id=1)
        if not order["fields"]:
            existing = next((o for o in self.sort_orders if o["order-id"] == 0), None)
        else:
            existing = next(
                (o for o in self.sort_orders if o["fields"] and same_order(o, order)), None
            )
        if existing is not None:
            oid = existing["order-id"]
            self.last_added_order_id = (
                oid if self._added_in_request("add-sort-order", oid) else None
            )
            return
        if order["fields"]:
            order["order-id"] = max([o["order-id"] for o in self.sort_orders] + [0]) + 1
        self.sort_orders.append(order)
        self.changes.append(("add-sort-order", order["order-id"]))
        self.last_added_order_id = order["order-id"]

    def set_default_sort_order(self, update: dict[str, Any]) -> None:
        order_id = _require_int(update, "sort-order-id")
        if order_id == LAST_ADDED:
            if self.last_added_order_id is None:
                raise ValidationError(
                    "Cannot set last added sort order: no sort order has been added"
                )
            order_id = self.last_added_order_id
        if order_id == self.default_sort_order_id:
            return
        if not any(o["order-id"] == order_id for o in self.sort_orders):
            raise IllegalArgumentError(
                f"Cannot set default sort order to unknown order: {order_id}"
            )
        self.default_sort_order_id = order_id
        self.changes.append(("set-default-sort-order", order_id))

    def add_snapshot(self, update: dict[str, Any]) -> None:
        snapshot = _require_obj(update, "snapshot")
        if not isinstance(snapshot, dict) or not _is_int(snapshot.get("snapshot-id")):
            raise BadRequestError(
                "Cannot parse add-snapshot update: snapshot needs an integer snapshot-id"
            )
        if not _is_int(snapshot.get("timestamp-ms")):
            raise BadRequestError(
                "Cannot parse add-snapshot update: snapshot needs an integer timestamp-ms"
            )
        if not legacy():
            check_snapshot_fields(snapshot, self.format_version)
        if not self.schemas:
            raise ValidationError("Attempting to add a snapshot before a schema is added")
        if not self.specs:
            raise ValidationError("Attempting to add a snapshot before a partition spec is added")
        if not self.sort_orders:
            raise ValidationError("Attempting to add a snapshot before a sort order is added")
        schema_id = snapshot.get("schema-id")
        if not legacy() and schema_id is not None and self.schema_by_id(schema_id) is None:
            # Java's builder does not look, but readers resolve a snapshot's columns through
            # this id (time travel, Spark's SnapshotUtil.schemaFor), so it must exist.
            raise ValidationError(f"Cannot add snapshot with unknown schema id: {schema_id}")
        snapshot_id = snapshot["snapshot-id"]
        if self.snapshot_by_id(snapshot_id) is not None:
            raise ValidationError(f"Snapshot already exists for id: {snapshot_id}")
        if self.format_version == 1:
            # v1 has no sequence numbers; last-sequence-number stays 0.
            snapshot = {k: v for k, v in snapshot.items() if k != "sequence-number"}
        else:
            seq = snapshot.get("sequence-number") or 0
            if not _is_int(seq):
                raise BadRequestError(
                    "Cannot parse add-snapshot update: sequence-number must be an integer"
                )
            if seq <= self.last_sequence_number and snapshot.get("parent-snapshot-id") is not None:
                # Retryable in Java main: a concurrent commit took the number.
                raise CommitFailedError(
                    "Validation failed, please retry: Cannot add snapshot with sequence number "
                    f"{seq} older than last sequence number {self.last_sequence_number}"
                )
            self.last_sequence_number = seq
        if self.format_version >= MIN_ROW_LINEAGE_VERSION:
            first_row_id = snapshot.get("first-row-id")
            if first_row_id is None:
                raise ValidationError("Cannot add a snapshot: first-row-id is null")
            added_rows: Any = snapshot.get("added-rows")
            if not _is_int(first_row_id) or not _is_int(added_rows):
                raise ValidationError(
                    "Cannot add a snapshot: first-row-id and added-rows must be integers"
                )
            if first_row_id < self.next_row_id:
                raise CommitFailedError(
                    "Validation failed, please retry: Cannot add a snapshot, "
                    f"first-row-id is behind table next-row-id: {first_row_id} < {self.next_row_id}"
                )
            self.next_row_id += added_rows
        self.snapshots.append(snapshot)
        self.changes.append(("add-snapshot", snapshot_id))

    def set_snapshot_ref(self, update: dict[str, Any], now_ms: int) -> None:
        name = _require_str(update, "ref-name")
        snapshot_id = _require_int(update, "snapshot-id")
        if not legacy() and not is_int64(snapshot_id):
            raise BadRequestError(
                "Cannot parse set-snapshot-ref update: snapshot-id must be a long"
            )
        ref_type = str(_require(update, "type")).lower()
        if ref_type not in ("branch", "tag"):
            raise IllegalArgumentError(f"Invalid snapshot ref type: {update['type']}")
        ref = self._build_ref(name, snapshot_id, ref_type, update)
        if self.refs.get(name) == ref:
            return
        snapshot = self.snapshot_by_id(snapshot_id)
        if snapshot is None:
            raise ValidationError(f"Cannot set {name} to unknown snapshot: {snapshot_id}")
        if name == MAIN_BRANCH:
            # A snapshot added in this request is logged at its own time;
            # otherwise this is a rollback, logged now (Java main).
            added = self._added_in_request("add-snapshot", snapshot_id)
            when = snapshot["timestamp-ms"] if added else now_ms
            self.snapshot_log.append({"timestamp-ms": when, "snapshot-id": snapshot_id})
        self.refs[name] = ref
        self.changes.append(("set-snapshot-ref", (name, snapshot_id)))

    @staticmethod
    def _build_ref(
        name: str, snapshot_id: int, ref_type: str, update: dict[str, Any]
    ) -> dict[str, Any]:
        # Java SnapshotRef.Builder validations, with its messages.
        if name == MAIN_BRANCH and ref_type == "tag":
            raise IllegalArgumentError("Cannot set main to a tag, it must be a branch")
        ref: dict[str, Any] = {"snapshot-id": snapshot_id, "type": ref_type}
        checks = (
            (
                "min-snapshots-to-keep",
                "Min snapshots to keep must be greater than 0",
                "minSnapshotsToKeep",
            ),
            (
                "max-snapshot-age-ms",
                "Max snapshot age must be greater than 0 ms",
                "maxSnapshotAgeMs",
            ),
            ("max-ref-age-ms", "Max reference age must be greater than 0", None),
        )
        for key, positive_message, tag_name in checks:
            value = update.get(key)
            if value is None:
                continue
            # SnapshotRefParser: min-snapshots-to-keep is an int, the ages are longs.
            in_range = (
                _is_int(value)
                if legacy()
                else is_int32(value)
                if tag_name == "minSnapshotsToKeep"
                else is_int64(value)
            )
            if not in_range:
                raise BadRequestError(
                    f"Cannot parse set-snapshot-ref update: {key} must be an integer"
                )
            if tag_name is not None and ref_type == "tag":
                raise IllegalArgumentError(f"Tags do not support setting {tag_name}")
            if value <= 0:
                raise IllegalArgumentError(positive_message)
            ref[key] = value
        return ref

    def remove_snapshots(self, update: dict[str, Any]) -> None:
        ids = set(_require_int_list(update, "snapshot-ids"))
        removed = {s["snapshot-id"] for s in self.snapshots if s["snapshot-id"] in ids}
        if not removed:
            return
        self.snapshots = [s for s in self.snapshots if s["snapshot-id"] not in removed]
        self.statistics = [s for s in self.statistics if s.get("snapshot-id") not in removed]
        self.partition_statistics = [
            s for s in self.partition_statistics if s.get("snapshot-id") not in removed
        ]
        for snapshot_id in sorted(removed):
            self.changes.append(("remove-snapshot", snapshot_id))
        live = {s["snapshot-id"] for s in self.snapshots}
        for name in [n for n, r in self.refs.items() if r["snapshot-id"] not in live]:
            self._remove_ref(name)

    def remove_snapshot_ref(self, update: dict[str, Any]) -> None:
        self._remove_ref(_require_str(update, "ref-name"))

    def _remove_ref(self, name: str) -> None:
        if name in self.refs:
            del self.refs[name]
            self.changes.append(("remove-snapshot-ref", name))

    def set_location(self, update: dict[str, Any]) -> None:
        location = _require_str(update, "location")
        if not isinstance(location, str) or not location:
            raise BadRequestError(
                "Cannot parse set-location update: location must be a non-empty string"
            )
        if location != self.location:
            self.location = location
            self.changes.append(("set-location", location))

    def set_properties(self, update: dict[str, Any]) -> None:
        # `updated` is the pre-1.0 name Java's parser still accepts.
        updates = update.get("updates", update.get("updated"))
        if not isinstance(updates, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in updates.items()
        ):
            raise BadRequestError(
                "Cannot parse set-properties update: updates must be a map of strings"
            )
        if updates:
            self.properties.update(updates)
            self.changes.append(("set-properties", None))

    def remove_properties(self, update: dict[str, Any]) -> None:
        removals = update.get("removals", update.get("removed"))
        if not isinstance(removals, list) or not all(isinstance(k, str) for k in removals):
            raise BadRequestError(
                "Cannot parse remove-properties update: removals must be a list of strings"
            )
        for key in removals:
            self.properties.pop(key, None)
        if removals:
            self.changes.append(("remove-properties", None))

    def set_statistics(self, update: dict[str, Any], key: str = "statistics") -> None:
        stats = _require_obj(update, key)
        if not isinstance(stats, dict) or not _is_int(
            stats.get("snapshot-id", update.get("snapshot-id"))
        ):
            raise BadRequestError(
                f"Cannot parse {update.get('action')} update: {key} needs a snapshot-id"
            )
        if "snapshot-id" not in stats:
            # Older clients carry it only at the top level (deprecated field).
            stats = {"snapshot-id": update["snapshot-id"], **stats}
        if not legacy():
            check_statistics(stats, key, str(update.get("action")))
        target = self.statistics if key == "statistics" else self.partition_statistics
        kept = [s for s in target if s.get("snapshot-id") != stats["snapshot-id"]]
        target[:] = [*kept, stats]
        self.changes.append((f"set-{key}", stats["snapshot-id"]))

    def remove_statistics(self, update: dict[str, Any], key: str = "statistics") -> None:
        snapshot_id = _require_int(update, "snapshot-id")
        target = self.statistics if key == "statistics" else self.partition_statistics
        target[:] = [s for s in target if s.get("snapshot-id") != snapshot_id]

    def remove_partition_specs(self, update: dict[str, Any]) -> None:
        ids = set(_require_int_list(update, "spec-ids"))
        if self.default_spec_id in ids:
            raise IllegalArgumentError("Cannot remove the default partition spec")
        self.specs = [s for s in self.specs if s["spec-id"] not in ids]

    def remove_schemas(self, update: dict[str, Any]) -> None:
        ids = set(_require_int_list(update, "schema-ids"))
        if self.current_schema_id in ids:
            raise IllegalArgumentError("Cannot remove the current schema")
        removed = sorted(s["schema-id"] for s in self.schemas if s["schema-id"] in ids)
        self.schemas = [s for s in self.schemas if s["schema-id"] not in ids]
        self.changes.extend(("remove-schema", schema_id) for schema_id in removed)

    def add_encryption_key(self, update: dict[str, Any]) -> None:
        key = _require_obj(update, "encryption-key")
        if not isinstance(key, dict) or not isinstance(key.get("key-id"), str):
            raise BadRequestError(
                "Cannot parse add-encryption-key update: encryption-key needs a key-id"
            )
        if not any(k.get("key-id") == key["key-id"] for k in self.encryption_keys):
            self.encryption_keys.append(key)

    def remove_encryption_key(self, update: dict[str, Any]) -> None:
        key_id = _require_str(update, "key-id")
        self.encryption_keys = [k for k in self.encryption_keys if k.get("key-id") != key_id]

    # ------------------------------------------------------------------ dispatch

    def apply(self, update: Any, now_ms: int) -> None:
        if not isinstance(update, dict) or not isinstance(update.get("action"), str):
            raise BadRequestError("Cannot parse metadata update: missing action")
        action = update["action"].lower()
        handler = self._handlers().get(action)
        if handler is None:
            raise BadRequestError(
                f"Cannot parse metadata update: unknown action {update['action']}"
            )
        handler(update, now_ms)

    def _handlers(self) -> dict[str, Callable[[dict[str, Any], int], None]]:
        def ignore_now(
            fn: Callable[[dict[str, Any]], None],
        ) -> Callable[[dict[str, Any], int], None]:
            return lambda update, _now: fn(update)

        return {
            "assign-uuid": ignore_now(self.assign_uuid),
            "upgrade-format-version": ignore_now(self.upgrade_format_version),
            "add-schema": ignore_now(self.add_schema),
            "set-current-schema": ignore_now(self.set_current_schema),
            "add-spec": ignore_now(self.add_spec),
            "set-default-spec": ignore_now(self.set_default_spec),
            "add-sort-order": ignore_now(self.add_sort_order),
            "set-default-sort-order": ignore_now(self.set_default_sort_order),
            "add-snapshot": ignore_now(self.add_snapshot),
            "set-snapshot-ref": self.set_snapshot_ref,
            "remove-snapshots": ignore_now(self.remove_snapshots),
            "remove-snapshot-ref": ignore_now(self.remove_snapshot_ref),
            "set-location": ignore_now(self.set_location),
            "set-properties": ignore_now(self.set_properties),
            "remove-properties": ignore_now(self.remove_properties),
            "set-statistics": ignore_now(self.set_statistics),
            "remove-statistics": ignore_now(self.remove_statistics),
            "set-partition-statistics": lambda u, _n: self.set_statistics(
                u, "partition-statistics"
            ),
            "remove-partition-statistics": lambda u, _n: self.remove_statistics(
                u, "partition-statistics"
            ),
            "remove-partition-specs": ignore_now(self.remove_partition_specs),
            "remove-schemas": ignore_now(self.remove_schemas),
            "add-encryption-key": ignore_now(self.add_encryption_key),
            "remove-encryption-key": ignore_now(self.remove_encryption_key),
        }

    # ------------------------------------------------------------------ build

    def finish_create(self) -> None:
        """Checks and defaults for a table built from nothing (create transaction)."""
        if self.location is None:
            raise BadRequestError(
                "Cannot create table: no location (a set-location update is required)"
            )
        if not self.schemas or self.schema_by_id(self.current_schema_id) is None:
            raise ValidationError("Cannot create table: no current schema has been set")
        if self.uuid is None:
            self.uuid = str(uuid_lib.uuid4())
        # Java fails on these later; an unpartitioned, unsorted default keeps
        # the file valid for every reader.
        if not self.specs:
            self.specs = [{"spec-id": 0, "fields": []}]
        if not self.sort_orders:
            self.sort_orders = [{"order-id": 0, "fields": []}]
        if self.default_spec_id is None:
            self.default_spec_id = self.specs[0]["spec-id"]
        if self.default_sort_order_id is None:
            self.default_sort_order_id = self.sort_orders[0]["order-id"]

    def build(self, *, now_ms: int, previous_location: str | None) -> Metadata:
        """`TableMetadata.build()` finishing steps; returns the new document."""
        schema = self.current_schema()
        spec = next((s for s in self.specs if s["spec-id"] == self.default_spec_id), None)
        order = next(
            (o for o in self.sort_orders if o["order-id"] == self.default_sort_order_id), None
        )
        if spec is None:
            raise ValidationError(f"Cannot find default partition spec: {self.default_spec_id}")
        if order is None:
            raise ValidationError(f"Cannot find default sort order: {self.default_sort_order_id}")
        check_spec_compatibility(spec, schema)
        check_order_compatibility(order, schema)
        for snapshot in [] if legacy() else self.snapshots:
            # Java TableMetadata's constructor (indexAndValidateSnapshots): an add-snapshot
            # without parent may set last-sequence-number back, but never below a kept
            # snapshot, or no Java client could load the table.
            seq = snapshot.get("sequence-number") or 0
            if seq > self.last_sequence_number:
                raise ValidationError(
                    f"Invalid snapshot with sequence number {seq} greater than last sequence "
                    f"number {self.last_sequence_number}"
                )
        if not legacy():
            self._check_removed_schemas()
        if self.base is not None and previous_location is not None:
            self._add_previous_file(previous_location, self.base.get("last-updated-ms"))
        self._update_snapshot_log()
        floor = [e["timestamp-ms"] for e in (self.snapshot_log[-1:] + self.metadata_log[-1:])]
        self.last_updated_ms = max([now_ms, *floor])
        return self.to_metadata()

    def _check_removed_schemas(self) -> None:
        """A schema removed in this request must not be one a kept snapshot reads with.

        Java's builder does not look (its client removes only unreferenced schemas, as
        ExpireSnapshots does after removing the snapshots), but add-snapshot here refuses
        an unknown schema id, and a removal must not create one behind its back.
        """
        removed = {detail for kind, detail in self.changes if kind == "remove-schema"}
        if not removed:
            return
        for snapshot in self.snapshots:
            if snapshot.get("schema-id") in removed:
                raise IllegalArgumentError(
                    f"Cannot remove schema {snapshot['schema-id']}: snapshot "
                    f"{snapshot['snapshot-id']} still refers to it"
                )

    def _add_previous_file(self, location: str, timestamp_ms: Any) -> None:
        try:
            max_size = max(
                1, int(self.properties.get(PREVIOUS_VERSIONS_MAX, PREVIOUS_VERSIONS_MAX_DEFAULT))
            )
        except ValueError:
            max_size = PREVIOUS_VERSIONS_MAX_DEFAULT
        kept = (
            self.metadata_log[len(self.metadata_log) - max_size + 1 :]
            if len(self.metadata_log) >= max_size
            else self.metadata_log
        )
        self.metadata_log = [*kept, {"timestamp-ms": timestamp_ms, "metadata-file": location}]

    def _update_snapshot_log(self) -> None:
        main = self.refs.get(MAIN_BRANCH)
        current = main["snapshot-id"] if main else None
        added: set[int] = set()
        intermediate: set[int] = set()
        for kind, detail in self.changes:
            if kind == "add-snapshot":
                added.add(detail)
            elif kind == "set-snapshot-ref":
                name, snapshot_id = detail
                if name == MAIN_BRANCH and snapshot_id in added and snapshot_id != current:
                    intermediate.add(snapshot_id)
        has_removed = any(kind == "remove-snapshot" for kind, _ in self.changes)
        if not intermediate and not has_removed:
            return
        live = {s["snapshot-id"] for s in self.snapshots}
        new_log: list[dict[str, Any]] = []
        for entry in self.snapshot_log:
            if entry["snapshot-id"] in live:
                if entry["snapshot-id"] not in intermediate:
                    new_log.append(entry)
            elif has_removed:
                # A gap in history would make time travel answer wrongly, so
                # everything before a removed snapshot goes too.
                new_log = []
        if current is not None and new_log and new_log[-1]["snapshot-id"] != current:
            raise ValidationError(
                "Cannot set invalid snapshot log: latest entry is not the current snapshot"
            )
        self.snapshot_log = new_log


def apply_updates(
    base: Metadata | None,
    updates: list[dict[str, Any]],
    *,
    now_ms: int,
    previous_location: str | None,
) -> Metadata:
    if not isinstance(updates, list):
        raise BadRequestError("Cannot parse updates: expected an array")
    if base is None:
        builder = MetadataBuilder(None, format_version=_create_format_version(updates))
        for update in updates:
            builder.apply(update, now_ms)
        builder.finish_create()
        return builder.build(now_ms=now_ms, previous_location=None)
    builder = MetadataBuilder(base)
    # Compare content, not the raw document: a legacy base that we merely
    # normalise must not count as a change.
    before = builder.to_metadata()
    for update in updates:
        builder.apply(update, now_ms)
    if builder.to_metadata() == before:
        return base
    return builder.build(now_ms=now_ms, previous_location=previous_location)


def _create_format_version(updates: list[dict[str, Any]]) -> int:
    """Create transactions start at the version of the first upgrade (CatalogHandlers.create)."""
    for update in updates:
        if (
            isinstance(update, dict)
            and str(update.get("action", "")).lower() == "upgrade-format-version"
        ):
            version = update.get("format-version")
            if not _is_int(version):
                raise BadRequestError(
                    "Cannot parse upgrade-format-version update: format-version must be an integer"
                )
            if version not in SUPPORTED_FORMAT_VERSIONS:
                raise IllegalArgumentError(
                    f"Unsupported format version: v{version} (supported: v{MAX_FORMAT_VERSION})"
                )
            return int(version)
    return DEFAULT_FORMAT_VERSION
