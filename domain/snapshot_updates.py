"""Snapshot, ref and statistics updates of table metadata, and the checks of the
snapshot and statistics objects a client sends.

Snapshot fields are stored verbatim, so their JSON types are checked here as Java's
parsers read them; `SnapshotUpdates` holds the handlers of the snapshot-related update
actions (add-snapshot, refs, snapshot removal, statistics files) for `MetadataBuilder`.
"""

from __future__ import annotations

from typing import Any

from icelog.domain.errors import (
    BadRequestError,
    CommitFailedError,
    IllegalArgumentError,
    ValidationError,
)
from icelog.domain.metadata_rules import legacy
from icelog.domain.metadata_state import MAIN_BRANCH, MIN_ROW_LINEAGE_VERSION, MetadataState
from icelog.domain.metadata_updates import (
    handles,
    require,
    require_int,
    require_int_list,
    require_obj,
    require_str,
)
from icelog.domain.schema_types import is_int, is_int32, is_int64

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


class SnapshotUpdates(MetadataState):
    """The snapshot-related update handlers of `MetadataBuilder`; they record what they
    changed in `changes`, which the builder's finishing steps read."""

    changes: list[tuple[str, Any]]

    def _added_in_request(self, kind: str, item_id: int | None) -> bool:
        return item_id is not None and (kind, item_id) in self.changes

    @handles("add-snapshot")
    def add_snapshot(self, update: dict[str, Any]) -> None:
        snapshot = require_obj(update, "snapshot")
        if not isinstance(snapshot, dict) or not is_int(snapshot.get("snapshot-id")):
            raise BadRequestError(
                "Cannot parse add-snapshot update: snapshot needs an integer snapshot-id"
            )
        if not is_int(snapshot.get("timestamp-ms")):
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
            if not is_int(seq):
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
            if not is_int(first_row_id) or not is_int(added_rows):
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

    @handles("set-snapshot-ref")
    def set_snapshot_ref(self, update: dict[str, Any], now_ms: int) -> None:
        name = require_str(update, "ref-name")
        snapshot_id = require_int(update, "snapshot-id")
        if not legacy() and not is_int64(snapshot_id):
            raise BadRequestError(
                "Cannot parse set-snapshot-ref update: snapshot-id must be a long"
            )
        ref_type = str(require(update, "type")).lower()
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
                is_int(value)
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

    @handles("remove-snapshots")
    def remove_snapshots(self, update: dict[str, Any]) -> None:
        ids = set(require_int_list(update, "snapshot-ids"))
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

    @handles("remove-snapshot-ref")
    def remove_snapshot_ref(self, update: dict[str, Any]) -> None:
        self._remove_ref(require_str(update, "ref-name"))

    def _remove_ref(self, name: str) -> None:
        if name in self.refs:
            del self.refs[name]
            self.changes.append(("remove-snapshot-ref", name))

    @handles("set-statistics")
    @handles("set-partition-statistics", key="partition-statistics")
    def set_statistics(self, update: dict[str, Any], key: str = "statistics") -> None:
        stats = require_obj(update, key)
        if not isinstance(stats, dict) or not is_int(
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

    @handles("remove-statistics")
    @handles("remove-partition-statistics", key="partition-statistics")
    def remove_statistics(self, update: dict[str, Any], key: str = "statistics") -> None:
        snapshot_id = require_int(update, "snapshot-id")
        target = self.statistics if key == "statistics" else self.partition_statistics
        target[:] = [s for s in target if s.get("snapshot-id") != snapshot_id]
