"""Pure view-metadata layer: create, update, check and name Iceberg view metadata files.

View metadata documents are the JSON dicts written to `*.gz.metadata.json`,
with the spec's kebab-case field names (`format/view-spec.md`). Updates and
requirements are the dicts of a REST `CommitViewRequest`. Nothing here does
I/O or mutates its arguments. See reference/iceberg-rest.md §3.5 and §5.4.
The update actions themselves live in `domain.view_updates`.
"""

from __future__ import annotations

from typing import Any

from icelog.domain.errors import BadRequestError, CommitFailedError, IllegalArgumentError
from icelog.domain.metadata_updates import LAST_ADDED, check_new_location, check_new_properties
from icelog.domain.view_updates import (
    REPLACE_DROP_DIALECT_ALLOWED,
    VERSION_HISTORY_SIZE,
    VERSION_HISTORY_SIZE_DEFAULT,
    VIEW_FORMAT_VERSION,
    ViewBuilder,
    ViewMetadata,
    check_dialects,
    parse_view_version,
    view_schema,
    view_sql_dialects,
)

__all__ = [
    "LAST_ADDED",
    "REPLACE_DROP_DIALECT_ALLOWED",
    "VERSION_HISTORY_SIZE",
    "VERSION_HISTORY_SIZE_DEFAULT",
    "VIEW_FORMAT_VERSION",
    "ViewMetadata",
    "apply_view_updates",
    "check_view_requirements",
    "new_view_metadata",
    "view_metadata_file_name",
    "view_sql_dialects",
]

_FIRST_VERSION_ID = 1
_FIRST_SCHEMA_ID = 0


def new_view_metadata(
    *,
    uuid: str,
    location: str,
    schema: dict[str, Any],
    view_version: dict[str, Any],
    properties: dict[str, str],
    now_ms: int,
) -> ViewMetadata:
    """CreateViewRequest -> the first metadata (Java `BaseMetastoreViewCatalog` create)."""
    location = check_new_location(location, "view")
    check_new_properties(properties, "view")
    fresh_schema = view_schema(schema, _FIRST_SCHEMA_ID)
    version = parse_view_version(view_version, now_ms=now_ms)
    if not version["representations"]:
        raise IllegalArgumentError("Cannot create view without specifying a query")
    check_dialects(version)
    # The first version is always 1 and points at the one schema, whatever
    # ids the client put in the request.
    version["version-id"] = _FIRST_VERSION_ID
    version["schema-id"] = _FIRST_SCHEMA_ID
    return {
        "view-uuid": uuid,
        "format-version": VIEW_FORMAT_VERSION,
        "location": location,
        "properties": dict(properties),
        "schemas": [fresh_schema],
        "current-version-id": _FIRST_VERSION_ID,
        "versions": [version],
        "version-log": [{"timestamp-ms": version["timestamp-ms"], "version-id": _FIRST_VERSION_ID}],
    }


def apply_view_updates(
    base: ViewMetadata, updates: list[dict[str, Any]], *, now_ms: int
) -> ViewMetadata:
    """replaceView: apply `updates` in order, then `ViewMetadata.build()`'s checks.

    Returns `base` itself when the updates change nothing, so callers can
    skip writing a new metadata file.
    """
    if not isinstance(updates, list):
        raise BadRequestError("Cannot parse updates: expected an array")
    builder = ViewBuilder(base)
    for update in updates:
        builder.apply(update, now_ms)
    if not builder.changed():
        return base
    return builder.build()


def check_view_requirements(base: ViewMetadata, requirements: list[dict[str, Any]]) -> None:
    """Java `UpdateRequirement.validate(ViewMetadata)`: only assert-view-uuid exists."""
    if not isinstance(requirements, list):
        raise BadRequestError("Cannot parse requirements: expected an array")
    for requirement in requirements:
        if not isinstance(requirement, dict) or not isinstance(requirement.get("type"), str):
            raise BadRequestError("Cannot parse view requirement: missing type")
        if requirement["type"].lower() != "assert-view-uuid":
            raise BadRequestError(
                f"Cannot parse view requirement: unknown type {requirement['type']}"
            )
        expected = requirement.get("uuid")
        if not isinstance(expected, str):
            raise BadRequestError("Cannot parse assert-view-uuid requirement: missing field uuid")
        current = base.get("view-uuid")
        # The Java client and the RCK match this text.
        if not isinstance(current, str) or current.lower() != expected.lower():
            raise CommitFailedError(
                "Requirement failed: view UUID does not match: "
                f"expected {'null' if current is None else current} != {expected}"
            )


def view_metadata_file_name(version: int, file_uuid: str) -> str:
    """`%05d-<uuid>.gz.metadata.json`: views default to gzip (`ViewProperties`)."""
    return f"{version:05d}-{file_uuid}.gz.metadata.json"
