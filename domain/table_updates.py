"""Applying REST `MetadataUpdate`s to table metadata (Java `TableMetadata.Builder`).

`MetadataBuilder` holds a working copy of one metadata document, applies the
update actions of reference/iceberg-rest.md §3.2 one by one and, in
`build()`, performs the finishing steps of `TableMetadata.build()`. Inputs are
never mutated: containers are copied on load and entries replaced, not edited.
"""

from __future__ import annotations

import uuid as uuid_lib
from typing import Any

from icelog.domain.errors import (
    BadRequestError,
    IllegalArgumentError,
    ValidationError,
)
from icelog.domain.metadata_rules import legacy
from icelog.domain.metadata_state import (
    DEFAULT_FORMAT_VERSION,
    MAIN_BRANCH,
    MAX_FORMAT_VERSION,
    MIN_ROW_LINEAGE_VERSION,
    PREVIOUS_VERSIONS_MAX,
    PREVIOUS_VERSIONS_MAX_DEFAULT,
    SUPPORTED_FORMAT_VERSIONS,
    Metadata,
    refs_of,
)
from icelog.domain.metadata_updates import (
    UpdateEngine,
    handles,
    property_removals,
    property_updates,
    requested_id,
    require_int,
    require_int_list,
    require_obj,
    require_str,
)
from icelog.domain.schema_ids import (
    highest_field_id,
    prepare_schema,
    same_schema,
)
from icelog.domain.schema_types import is_int
from icelog.domain.snapshot_updates import SnapshotUpdates
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


class MetadataBuilder(SnapshotUpdates, UpdateEngine):
    """A `MetadataState` that applies REST updates and tracks what changed."""

    UPDATE_KIND = "metadata"

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

    # ------------------------------------------------------------------ actions

    @handles("assign-uuid")
    def assign_uuid(self, update: dict[str, Any]) -> None:
        new_uuid = require_str(update, "uuid")
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

    @handles("upgrade-format-version")
    def upgrade_format_version(self, update: dict[str, Any]) -> None:
        version = require_int(update, "format-version")
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

    @handles("add-schema")
    def add_schema(self, update: dict[str, Any]) -> None:
        raw = require_obj(update, "schema")
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

    @handles("set-current-schema")
    def set_current_schema(self, update: dict[str, Any]) -> None:
        schema_id = requested_id(
            update,
            "schema-id",
            self.last_added_schema_id,
            "Cannot set last added schema: no schema has been added",
        )
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

    @handles("add-spec")
    def add_spec(self, update: dict[str, Any]) -> None:
        raw = require_obj(update, "spec")
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

    @handles("set-default-spec")
    def set_default_spec(self, update: dict[str, Any]) -> None:
        spec_id = requested_id(
            update,
            "spec-id",
            self.last_added_spec_id,
            "Cannot set last added spec: no spec has been added",
        )
        if spec_id == self.default_spec_id:
            return
        if not any(s["spec-id"] == spec_id for s in self.specs):
            raise IllegalArgumentError(
                f"Cannot set default partition spec to unknown spec: {spec_id}"
            )
        self.default_spec_id = spec_id
        self.changes.append(("set-default-spec", spec_id))

    @handles("add-sort-order")
    def add_sort_order(self, update: dict[str, Any]) -> None:
        raw = require_obj(update, "sort-order")
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

    @handles("set-default-sort-order")
    def set_default_sort_order(self, update: dict[str, Any]) -> None:
        order_id = requested_id(
            update,
            "sort-order-id",
            self.last_added_order_id,
            "Cannot set last added sort order: no sort order has been added",
        )
        if order_id == self.default_sort_order_id:
            return
        if not any(o["order-id"] == order_id for o in self.sort_orders):
            raise IllegalArgumentError(
                f"Cannot set default sort order to unknown order: {order_id}"
            )
        self.default_sort_order_id = order_id
        self.changes.append(("set-default-sort-order", order_id))

    @handles("set-location")
    def set_location(self, update: dict[str, Any]) -> None:
        location = require_str(update, "location")
        if not isinstance(location, str) or not location:
            raise BadRequestError(
                "Cannot parse set-location update: location must be a non-empty string"
            )
        if location != self.location:
            self.location = location
            self.changes.append(("set-location", location))

    @handles("set-properties")
    def set_properties(self, update: dict[str, Any]) -> None:
        updates = property_updates(update)
        if updates:
            self.properties.update(updates)
            self.changes.append(("set-properties", None))

    @handles("remove-properties")
    def remove_properties(self, update: dict[str, Any]) -> None:
        removals = property_removals(update)
        for key in removals:
            self.properties.pop(key, None)
        if removals:
            self.changes.append(("remove-properties", None))

    @handles("remove-partition-specs")
    def remove_partition_specs(self, update: dict[str, Any]) -> None:
        ids = set(require_int_list(update, "spec-ids"))
        if self.default_spec_id in ids:
            raise IllegalArgumentError("Cannot remove the default partition spec")
        self.specs = [s for s in self.specs if s["spec-id"] not in ids]

    @handles("remove-schemas")
    def remove_schemas(self, update: dict[str, Any]) -> None:
        ids = set(require_int_list(update, "schema-ids"))
        if self.current_schema_id in ids:
            raise IllegalArgumentError("Cannot remove the current schema")
        removed = sorted(s["schema-id"] for s in self.schemas if s["schema-id"] in ids)
        self.schemas = [s for s in self.schemas if s["schema-id"] not in ids]
        self.changes.extend(("remove-schema", schema_id) for schema_id in removed)

    @handles("add-encryption-key")
    def add_encryption_key(self, update: dict[str, Any]) -> None:
        key = require_obj(update, "encryption-key")
        if not isinstance(key, dict) or not isinstance(key.get("key-id"), str):
            raise BadRequestError(
                "Cannot parse add-encryption-key update: encryption-key needs a key-id"
            )
        if not any(k.get("key-id") == key["key-id"] for k in self.encryption_keys):
            self.encryption_keys.append(key)

    @handles("remove-encryption-key")
    def remove_encryption_key(self, update: dict[str, Any]) -> None:
        key_id = require_str(update, "key-id")
        self.encryption_keys = [k for k in self.encryption_keys if k.get("key-id") != key_id]

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
            if not is_int(version):
                raise BadRequestError(
                    "Cannot parse upgrade-format-version update: format-version must be an integer"
                )
            if version not in SUPPORTED_FORMAT_VERSIONS:
                raise IllegalArgumentError(
                    f"Unsupported format version: v{version} (supported: v{MAX_FORMAT_VERSION})"
                )
            return int(version)
    return DEFAULT_FORMAT_VERSION
