"""Which Iceberg events operation (apache/iceberg PR #12584) a logged event is, if any.

Pure: from the event's topic, its published data (docs/events.md: the shape that stays
stable) and where it belongs. The twelve standard operations carry what the proposal asks;
icelog's own changes become `x-icelog.*` operations (ADR 0015). Internal bookkeeping (name
claims, child lists, tasks, the audit chain) has no operation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from icelog.projections.iceberg_events import path_key


@dataclass(frozen=True)
class Place:
    """Where an event belongs, as of the event (the indexer's context resolver)."""

    aggregate_id: str
    warehouse_id: str | None
    namespace: tuple[str, ...] | None
    name: str | None


@dataclass(frozen=True)
class Mapped:
    stream: str
    object_type: str | None
    object_uuid: str | None
    path: str | None
    from_path: str | None
    operation: dict[str, Any]

    @property
    def operation_type(self) -> str:
        return str(self.operation["operation-type"])


def map_event(topic: str, data: dict[str, Any], place: Place) -> Mapped | None:
    """`topic` as logged (`icelog.table.committed.v1`)."""
    parts = topic.split(".")
    if len(parts) != 4 or parts[0] != "icelog":
        return None
    kind, change = parts[1], parts[2]
    mapper = _MAPPERS.get(kind)
    return mapper(change, data, place) if mapper is not None else None


def _identifier(namespace: Sequence[str], name: str) -> dict[str, Any]:
    return {"namespace": list(namespace), "name": name}


def _tabular(change: str, data: dict[str, Any], place: Place, kind: str) -> Mapped | None:
    if place.warehouse_id is None or place.namespace is None or place.name is None:
        return None  # not resolvable (cannot happen for a table or view of this catalog)
    uuid_field = f"{kind}-uuid"
    here = (*place.namespace, place.name)
    base: dict[str, Any] = {
        "identifier": _identifier(place.namespace, place.name),
        uuid_field: place.aggregate_id,
    }
    from_path: str | None = None
    op: dict[str, Any]
    if change in ("created", "registered"):
        metadata = data.get("metadata") or {}
        submitted = list(data.get("updates") or [])
        updates = submitted or (
            _table_updates(metadata) if kind == "table" else _view_updates(metadata)
        )
        name = f"{'create' if change == 'created' else 'register'}-{kind}"
        if kind == "view" and change == "registered":
            name = "x-icelog.register-view"  # no standard operation (registerView is 1.11)
        op = {"operation-type": name, **base, "updates": updates}
        op["metadata-location"] = data.get("metadata-location")
    elif change in ("committed", "replaced"):
        op = {
            "operation-type": f"update-{kind}", **base,
            "updates": list(data.get("updates") or []),
            "requirements": list(data.get("requirements") or []),
            "metadata-location": data.get("metadata-location"),
        }  # fmt: skip
    elif change == "renamed":
        source = (*data["from-namespace"], data["from-name"])
        from_path = path_key(source)
        op = {
            "operation-type": f"rename-{kind}",
            "source": _identifier(data["from-namespace"], data["from-name"]),
            "destination": base["identifier"],
            uuid_field: place.aggregate_id,
        }
    elif change in ("dropped", "unregistered"):
        # Unregistered (main's unregisterTable): gone from the catalog, files kept — to a
        # consumer a drop without purge; `x-icelog.unregistered` tells them apart.
        op = {"operation-type": f"drop-{kind}", **base}
        if kind == "table":
            op["purge"] = bool(data.get("purge-requested", False))
        if change == "unregistered":
            op["x-icelog.unregistered"] = True
    elif change == "soft-dropped":
        op = {"operation-type": f"x-icelog.soft-drop-{kind}", **base,
              "purge": bool(data.get("purge-requested", False)),
              "expires-at-ms": data.get("expires-at-ms")}  # fmt: skip
    elif change == "undropped":
        from_path = path_key((*data["from-namespace"], data["from-name"]))
        op = {"operation-type": f"x-icelog.undrop-{kind}", **base,
              "source": _identifier(data["from-namespace"], data["from-name"])}  # fmt: skip
    elif change == "expired":
        op = {"operation-type": f"x-icelog.expire-{kind}", **base, "reason": data.get("reason")}
    elif change == "purged":
        op = {"operation-type": f"x-icelog.purge-{kind}", **base,
              "deleted-files": data.get("deleted-files"),
              "missing-files": data.get("missing-files")}  # fmt: skip
    elif change == "protection-changed":
        op = {"operation-type": f"x-icelog.set-{kind}-protection", **base,
              "protected": bool(data.get("protected"))}  # fmt: skip
    else:
        return None
    return Mapped(place.warehouse_id, kind, place.aggregate_id, path_key(here), from_path, op)


def _table(change: str, data: dict[str, Any], place: Place) -> Mapped | None:
    return _tabular(change, data, place, "table")


def _view(change: str, data: dict[str, Any], place: Place) -> Mapped | None:
    return _tabular(change, data, place, "view")


def _function(change: str, data: dict[str, Any], place: Place) -> Mapped | None:
    """Functions have no standard operation (the proposal predates them): x-icelog ones."""
    if place.warehouse_id is None or place.namespace is None or place.name is None:
        return None
    verb = {"created": "create", "replaced": "replace", "dropped": "drop"}.get(change)
    if verb is None:
        return None
    op: dict[str, Any] = {
        "operation-type": f"x-icelog.{verb}-function",
        "identifier": _identifier(place.namespace, place.name),
        "function-uuid": place.aggregate_id,
    }
    if verb != "drop":
        op["metadata-location"] = data.get("metadata-location")
    here = path_key((*place.namespace, place.name))
    return Mapped(place.warehouse_id, "function", place.aggregate_id, here, None, op)


def _namespace(change: str, data: dict[str, Any], place: Place) -> Mapped | None:
    if place.warehouse_id is None or place.namespace is None:
        return None
    levels = list(place.namespace)
    op: dict[str, Any]
    if change in ("created", "recreated"):
        op = {"operation-type": "create-namespace", "namespace": levels,
              "properties": dict(data.get("properties") or {})}  # fmt: skip
    elif change == "properties-updated":
        op = {"operation-type": "update-namespace-properties", "namespace": levels,
              "updated": sorted((data.get("updated") or {}).keys()),
              "removed": list(data.get("removed") or [])}  # fmt: skip
    elif change == "dropped":
        op = {"operation-type": "drop-namespace", "namespace": levels}
    elif change == "protection-changed":
        op = {"operation-type": "x-icelog.set-namespace-protection", "namespace": levels,
              "protected": bool(data.get("protected"))}  # fmt: skip
    else:
        return None  # child-added / child-removed: bookkeeping
    return Mapped(place.warehouse_id, "namespace", None, path_key(levels), None, op)


_WAREHOUSE_CHANGES = {
    "created": "create-warehouse", "renamed": "rename-warehouse", "deleted": "delete-warehouse",
    "storage-profile-changed": "update-warehouse-storage",
    "delete-profile-changed": "update-warehouse-delete-profile",
    "protection-changed": "set-warehouse-protection",
}  # fmt: skip


def _warehouse(change: str, data: dict[str, Any], place: Place) -> Mapped | None:
    name = _WAREHOUSE_CHANGES.get(change)
    if name is None:
        return None  # namespace-added / -removed: bookkeeping
    op: dict[str, Any] = {"operation-type": f"x-icelog.{name}", "warehouse-id": place.aggregate_id}
    for key in ("name", "storage-profile", "delete-profile", "protected"):
        if key in data:
            op[key] = data[key]
    return Mapped(place.aggregate_id, None, None, None, None, op)


_PROJECT_CHANGES = {"created": "create-project", "renamed": "rename-project",
                    "deleted": "delete-project"}  # fmt: skip


def _project(change: str, data: dict[str, Any], place: Place) -> Mapped | None:
    name = _PROJECT_CHANGES.get(change)
    if name is None:
        return None
    op: dict[str, Any] = {"operation-type": f"x-icelog.{name}", "project-id": place.aggregate_id}
    if "name" in data:
        op["name"] = data["name"]
    return Mapped(place.aggregate_id, None, None, None, None, op)


def grant_operation(
    change: str,
    data: dict[str, Any],
    warehouse_id: str | None,
    project_id: str | None,
    path: Sequence[str] | None,
) -> Mapped | None:
    """A grant or revoke (docs/auth.md) in the stream of the warehouse its object is in, or
    of the project for a project grant; server and role grants have no warehouse."""
    if change not in ("granted", "revoked"):
        return None
    kind = str(data.get("object-kind"))
    stream = (
        warehouse_id if warehouse_id is not None else (project_id if kind == "project" else None)
    )
    if stream is None:
        return None
    op = {
        "operation-type": "x-icelog.grant" if change == "granted" else "x-icelog.revoke",
        "object-kind": kind,
        "object-id": data.get("object-id"),
        "relation": data.get("relation"),
        "principal": {"kind": data.get("principal-kind"), "id": data.get("principal-id")},
    }
    object_type = kind if kind in ("namespace", "table", "view") else None
    uuid = str(data.get("object-id")) if kind in ("table", "view") else None
    return Mapped(stream, object_type, uuid, path_key(path) if path else None, None, op)


_MAPPERS = {
    "table": _table,
    "view": _view,
    "function": _function,
    "namespace": _namespace,
    "warehouse": _warehouse,
    "project": _project,
}


# -- a new table or view as the updates that would build it (what a create transaction sends)
def _identity(metadata: dict[str, Any], uuid_field: str) -> list[dict[str, Any]]:
    """What tables and views begin with: their uuid, format version and schemas."""
    updates: list[dict[str, Any]] = []
    if uuid_field in metadata:
        updates.append({"action": "assign-uuid", "uuid": metadata[uuid_field]})
    if "format-version" in metadata:
        updates.append(
            {"action": "upgrade-format-version", "format-version": metadata["format-version"]}
        )
    updates += [{"action": "add-schema", "schema": s} for s in metadata.get("schemas") or []]
    return updates


def _placement(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """Where a table or view lives, and its properties."""
    updates: list[dict[str, Any]] = []
    if "location" in metadata:
        updates.append({"action": "set-location", "location": metadata["location"]})
    if metadata.get("properties"):
        updates.append({"action": "set-properties", "updates": metadata["properties"]})
    return updates


def _table_updates(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    updates = _identity(metadata, "table-uuid")
    if "current-schema-id" in metadata:
        updates.append({"action": "set-current-schema", "schema-id": metadata["current-schema-id"]})
    updates += [{"action": "add-spec", "spec": s} for s in metadata.get("partition-specs") or []]
    if "default-spec-id" in metadata:
        updates.append({"action": "set-default-spec", "spec-id": metadata["default-spec-id"]})
    orders = metadata.get("sort-orders") or []
    updates += [{"action": "add-sort-order", "sort-order": o} for o in orders]
    if "default-sort-order-id" in metadata:
        updates.append(
            {"action": "set-default-sort-order", "sort-order-id": metadata["default-sort-order-id"]}
        )
    updates += _placement(metadata)
    snapshots = metadata.get("snapshots") or []
    updates += [{"action": "add-snapshot", "snapshot": s} for s in snapshots]
    for ref_name, ref in (metadata.get("refs") or {}).items():
        updates.append({"action": "set-snapshot-ref", "ref-name": ref_name, **ref})
    return updates


def _view_updates(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    updates = _identity(metadata, "view-uuid") + _placement(metadata)
    versions = metadata.get("versions") or []
    updates += [{"action": "add-view-version", "view-version": v} for v in versions]
    if "current-version-id" in metadata:
        current = metadata["current-version-id"]
        updates.append({"action": "set-current-view-version", "view-version-id": current})
    return updates
