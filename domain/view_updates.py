"""Applying REST view updates to view metadata (Java `ViewMetadata.Builder`).

`ViewBuilder` holds a working copy of one view-metadata document, applies the
view update actions of reference/iceberg-rest.md §3.5 one by one and, in
`build()`, performs the finishing steps of `ViewMetadata.build()`: the
dialect-drop check, version expiry and version-log trimming. Inputs are never
mutated: containers are copied on load and entries replaced, not edited.
Unchanged entries are shared between the base and the result, as for tables;
everything taken from a request is copied.
"""

from __future__ import annotations

import copy
from typing import Any

from icelog.domain.errors import BadRequestError, IllegalArgumentError
from icelog.domain.metadata_rules import legacy
from icelog.domain.metadata_updates import (
    UpdateEngine,
    handles,
    is_string_list,
    is_string_map,
    property_removals,
    property_updates,
    requested_id,
    require,
    require_int,
    resolve_last_added,
)
from icelog.domain.schema_ids import prepare_schema, same_schema
from icelog.domain.schema_types import is_int, is_int32, is_int64

ViewMetadata = dict[str, Any]

VIEW_FORMAT_VERSION = 1  # Java SUPPORTED_VIEW_FORMAT_VERSION: the only one that exists
VERSION_HISTORY_SIZE = "version.history.num-entries"
VERSION_HISTORY_SIZE_DEFAULT = 10
REPLACE_DROP_DIALECT_ALLOWED = "replace.drop-dialect.allowed"


def view_sql_dialects(version: dict[str, Any]) -> list[str]:
    """The lower-cased dialects of a version's SQL representations, sorted, each once."""
    return sorted(
        {
            str(r["dialect"]).lower()
            for r in version.get("representations") or []
            if isinstance(r, dict)
            and str(r.get("type", "")).lower() == "sql"
            and isinstance(r.get("dialect"), str)
        }
    )


def parse_representation(raw: Any) -> dict[str, Any]:
    """One `{type: sql, sql, dialect}` in Java's field order."""
    if not isinstance(raw, dict):
        raise BadRequestError("Cannot parse view representation from non-object")
    kind = raw.get("type")
    # Java falls back to an "unknown" representation here, but no engine can
    # read one and PyIceberg refuses to load the view, so reject it up front.
    if not isinstance(kind, str) or kind.lower() != "sql":
        raise BadRequestError(f"Invalid view representation: unsupported type {kind}")
    for key in ("sql", "dialect"):
        if not isinstance(raw.get(key), str):
            raise BadRequestError(f"Cannot parse view representation: missing string {key}")
    return {"type": "sql", "sql": raw["sql"], "dialect": raw["dialect"]}


def parse_view_version(raw: Any, *, now_ms: int) -> dict[str, Any]:
    """A REST `view-version` object, checked and laid out like Java's `ViewVersionParser`."""
    if not isinstance(raw, dict):
        raise BadRequestError("Cannot parse view version from non-object")
    for key in ("version-id", "schema-id"):
        # ViewVersionParser: JsonUtil.getInt.
        if not (is_int(raw.get(key)) if legacy() else is_int32(raw.get(key))):
            raise BadRequestError(f"Cannot parse view version: missing int {key}")
    timestamp = raw.get("timestamp-ms")
    if timestamp is None:
        # Java requires it; PyIceberg defaults it to "now", and so do we.
        timestamp = now_ms
    elif not (is_int(timestamp) if legacy() else is_int64(timestamp)):
        raise BadRequestError("Cannot parse view version: timestamp-ms must be an integer")
    summary = raw.get("summary")
    if summary is None:
        summary = {}
    elif not is_string_map(summary):
        raise BadRequestError("Cannot parse view version: summary must be a map of strings")
    reps = raw.get("representations")
    if not isinstance(reps, list):
        raise BadRequestError("Cannot parse view version: representations must be an array")
    namespace = raw.get("default-namespace")
    if not is_string_list(namespace):
        raise BadRequestError(
            "Cannot parse view version: default-namespace must be an array of strings"
        )
    catalog = raw.get("default-catalog")
    if catalog is not None and not isinstance(catalog, str):
        raise BadRequestError("Cannot parse view version: default-catalog must be a string")
    version: dict[str, Any] = {
        "version-id": raw["version-id"],
        "timestamp-ms": timestamp,
        "schema-id": raw["schema-id"],
        "summary": dict(summary),
    }
    if catalog is not None:
        version["default-catalog"] = catalog
    version["default-namespace"] = list(namespace)
    version["representations"] = [parse_representation(r) for r in reps]
    return version


def check_dialects(version: dict[str, Any]) -> None:
    """One SQL text per dialect; engines pick by dialect, so a duplicate is ambiguous."""
    seen: set[str] = set()
    for rep in version["representations"]:
        dialect = rep["dialect"].lower()
        if dialect in seen:
            raise IllegalArgumentError(
                f"Invalid view version: Cannot add multiple queries for dialect {dialect}"
            )
        seen.add(dialect)


def view_schema(schema: Any, schema_id: int) -> dict[str, Any]:
    """A validated schema with its id set, in Java `SchemaParser` field order.

    It passes the same checks as a table schema (`prepare_schema`: Java's parser rules,
    nesting depth, what PyIceberg can load), without format-version rules: views have one
    format version. Field ids are kept as sent: a view schema describes query output, and
    Java's view builder never reassigns them.
    """
    return _with_schema_id(prepare_schema(schema, None), schema_id)


def _with_schema_id(prepared: dict[str, Any], schema_id: int) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "struct", "schema-id": schema_id}
    if prepared.get("identifier-field-ids"):
        out["identifier-field-ids"] = list(prepared["identifier-field-ids"])
    # Copied so that the stored document never aliases the caller's request.
    out["fields"] = copy.deepcopy(prepared["fields"])
    return out


def _same_version(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Java `sameViewVersion`: ignores version-id and timestamp-ms."""
    return (
        a.get("summary") == b.get("summary")
        and a.get("representations") == b.get("representations")
        and a.get("default-catalog") == b.get("default-catalog")
        and a.get("default-namespace") == b.get("default-namespace")
        and a.get("schema-id") == b.get("schema-id")
    )


def _positive_int_property(properties: dict[str, str], key: str, default: int) -> int:
    raw = properties.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise IllegalArgumentError(f"Invalid {key}: {raw} is not an integer") from None
    if value <= 0:
        raise IllegalArgumentError(f"{key} must be positive but was {value}")
    return value


class ViewBuilder(UpdateEngine):
    """Working state of one view-metadata document plus what this request changed."""

    UPDATE_KIND = "view"

    def __init__(self, base: ViewMetadata) -> None:
        self.base = base
        self.uuid: str = base["view-uuid"]
        self.format_version: int = int(base["format-version"])
        self.location: str = base["location"]
        self.properties: dict[str, str] = dict(base.get("properties") or {})
        self.schemas: list[dict[str, Any]] = list(base["schemas"])
        self.current_version_id: int = base["current-version-id"]
        self.versions: list[dict[str, Any]] = list(base["versions"])
        self.history: list[dict[str, Any]] = list(base.get("version-log") or [])
        self.previous_version = self.version_by_id(self.current_version_id)
        # Change tracking for the "-1 = last added" rules and build().
        self.added_version_ids: list[int] = []
        self.last_added_version_id: int | None = None
        self.last_added_schema_id: int | None = None
        self.history_entry: dict[str, Any] | None = None
        # Compare content, not the raw base: fields Java omits (an empty
        # `properties`) must not count as a change.
        self._initial = self.to_metadata()

    def version_by_id(self, version_id: int) -> dict[str, Any] | None:
        return next((v for v in self.versions if v["version-id"] == version_id), None)

    # ------------------------------------------------------------------ actions

    @handles("assign-uuid")
    def assign_uuid(self, update: dict[str, Any]) -> None:
        new_uuid = require(update, "uuid")
        if not isinstance(new_uuid, str):
            raise BadRequestError("Cannot parse assign-uuid update: uuid must be a string")
        if new_uuid.lower() != self.uuid.lower():
            raise IllegalArgumentError("Cannot reassign uuid")

    @handles("upgrade-format-version")
    def upgrade_format_version(self, update: dict[str, Any]) -> None:
        version = require_int(update, "format-version")
        if version < self.format_version:
            raise IllegalArgumentError(
                f"Cannot downgrade v{self.format_version} view to v{version}"
            )
        if version > VIEW_FORMAT_VERSION:
            raise IllegalArgumentError(f"Unsupported format version: {version}")

    @handles("add-schema")
    def add_schema(self, update: dict[str, Any]) -> None:
        self.add_schema_internal(require(update, "schema"))

    def add_schema_internal(self, schema: Any) -> int:
        if not legacy():
            schema = prepare_schema(schema, None)
        new_id = 0
        for existing in self.schemas:
            if same_schema(existing, schema):
                # Java leaves "last added" alone here, so a retried stale
                # replace whose schema a concurrent commit already added
                # fails on its `schema-id: -1`. The client meant this very
                # schema, so it counts as last added.
                self.last_added_schema_id = int(existing["schema-id"])
                return self.last_added_schema_id
            new_id = max(new_id, existing["schema-id"] + 1)
        self.schemas.append(_with_schema_id(schema, new_id))
        self.last_added_schema_id = new_id
        return new_id

    @handles("set-location")
    def set_location(self, update: dict[str, Any]) -> None:
        location = update.get("location")
        if location is None:
            raise IllegalArgumentError("Invalid location: null")
        if not isinstance(location, str) or not location:
            raise BadRequestError(
                "Cannot parse set-location update: location must be a non-empty string"
            )
        self.location = location

    @handles("set-properties")
    def set_properties(self, update: dict[str, Any]) -> None:
        self.properties.update(property_updates(update))

    @handles("remove-properties")
    def remove_properties(self, update: dict[str, Any]) -> None:
        for key in property_removals(update):
            self.properties.pop(key, None)

    @handles("add-view-version")
    def add_view_version(self, update: dict[str, Any], now_ms: int) -> None:
        version = parse_view_version(require(update, "view-version"), now_ms=now_ms)
        # Java resolves -1 only after looking for an identical version; doing
        # it first lets a retried replace find the version it already wrote.
        version["schema-id"] = resolve_last_added(
            version["schema-id"],
            self.last_added_schema_id,
            "Cannot set last added schema: no schema has been added",
        )
        # Reassign the id: an identical version keeps its id; anything else
        # goes after every existing id, so a stale client's "2" lands as 3.
        new_id = version["version-id"]
        for existing in self.versions:
            if _same_version(existing, version):
                new_id = existing["version-id"]
                break
            if existing["version-id"] >= new_id:
                new_id = existing["version-id"] + 1
        if self.version_by_id(new_id) is not None:
            # Java forgets "last added" when the version predates this request;
            # as for schemas, a retried replace means exactly this version.
            self.last_added_version_id = new_id
            return
        if not any(s["schema-id"] == version["schema-id"] for s in self.schemas):
            raise IllegalArgumentError(
                f"Cannot add version with unknown schema: {version['schema-id']}"
            )
        check_dialects(version)
        version["version-id"] = new_id
        self.versions.append(version)
        self.added_version_ids.append(new_id)
        self.last_added_version_id = new_id

    @handles("set-current-view-version")
    def set_current_view_version(self, update: dict[str, Any], now_ms: int) -> None:
        version_id = requested_id(
            update,
            "view-version-id",
            self.last_added_version_id,
            "Cannot set last version id: no current version id has been set",
        )
        if version_id == self.current_version_id:
            return
        version = self.version_by_id(version_id)
        if version is None:
            raise IllegalArgumentError(
                f"Cannot set current version to unknown version: {version_id}"
            )
        self.current_version_id = version_id
        # A version added now carries its creation time; re-activating an
        # older version happens now. Like Java, only the last switch is logged.
        added_now = version_id in self.added_version_ids
        self.history_entry = {
            "timestamp-ms": version["timestamp-ms"] if added_now else now_ms,
            "version-id": version_id,
        }

    # ------------------------------------------------------------------ build

    def changed(self) -> bool:
        return self.history_entry is not None or self.to_metadata() != self._initial

    def build(self) -> ViewMetadata:
        """`ViewMetadata.build()` finishing steps; returns the new document."""
        if not self.location:
            raise IllegalArgumentError("Invalid location: null")
        current = self.version_by_id(self.current_version_id)
        if current is None:
            raise IllegalArgumentError("Invalid view: no versions were added")
        if self.history_entry is not None:
            self.history.append(self.history_entry)
            self.history_entry = None
        drop_allowed = self.properties.get(REPLACE_DROP_DIALECT_ALLOWED, "").lower() == "true"
        if self.previous_version is not None and not drop_allowed:
            previous = view_sql_dialects(self.previous_version)
            new = view_sql_dialects(current)
            if not set(previous) <= set(new):
                # Java raises IllegalStateException (an unmapped 500); the
                # client sent a bad replace, so it is a 400 here.
                raise IllegalArgumentError(
                    "Cannot replace view due to loss of view dialects "
                    f"({REPLACE_DROP_DIALECT_ALLOWED}=false):\n"
                    f"Previous dialects: [{', '.join(previous)}]\n"
                    f"New dialects: [{', '.join(new)}]"
                )
        history_size = _positive_int_property(
            self.properties, VERSION_HISTORY_SIZE, VERSION_HISTORY_SIZE_DEFAULT
        )
        # Keep at least everything this request added plus the current version.
        must_keep = {*self.added_version_ids, self.current_version_id}
        keep_count = max(len(must_keep), history_size)
        if len(self.versions) > keep_count:
            self._expire_versions(keep_count)
        return self.to_metadata()

    def _expire_versions(self, keep_count: int) -> None:
        # Ids are assigned in increasing order, so the highest ids are the
        # newest; the current version always stays (Java `expireVersions`).
        newest = sorted((v["version-id"] for v in self.versions), reverse=True)
        kept = {self.current_version_id}
        for version_id in newest:
            if len(kept) == keep_count:
                break
            kept.add(version_id)
        self.versions = [v for v in self.versions if v["version-id"] in kept]
        # A gap in the log would claim a version was current when it is no
        # longer known, so everything before the last unknown entry goes.
        log: list[dict[str, Any]] = []
        for entry in self.history:
            if entry["version-id"] in kept:
                log.append(entry)
            else:
                log = []
        self.history = log

    def to_metadata(self) -> ViewMetadata:
        """Serialise in `ViewMetadataParser.toJson` field order (properties always written)."""
        return {
            "view-uuid": self.uuid,
            "format-version": self.format_version,
            "location": self.location,
            "properties": dict(self.properties),
            "schemas": list(self.schemas),
            "current-version-id": self.current_version_id,
            "versions": list(self.versions),
            "version-log": list(self.history),
        }
