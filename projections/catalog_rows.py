"""The catalog read model's fold, for the catalog's objects: which rows each event of
projects, warehouses, namespaces, tables and views, functions and tasks writes.

`event_rows` dispatches on the event's class; access_rows.py registers users, roles and
grants, and fold.py adds what every event may write (grants ended, ownership taken).
Nothing else decides a read-model row: the inline projection, the one-round-trip
PostgreSQL append and the rebuild all execute what it returns. Commands hand it
already-rendered documents ("hints") so the inline path never reads; without one (a
rebuild) it folds the event into the previous document, asked of `reads`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import singledispatch
from typing import Any

import orjson

from icelog.domain.function import Function
from icelog.domain.function_metadata import apply_function_changes
from icelog.domain.identifiers import NamespaceName, properties_hint_key
from icelog.domain.locations import location_set_by, normalize_location
from icelog.domain.metadata_fold import replay_commit
from icelog.domain.namespace import Namespace
from icelog.domain.project import Project
from icelog.domain.table import Table
from icelog.domain.task import Task
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse
from icelog.projections.row_ops import (
    Delete,
    Insert,
    Move,
    NamespaceEmpty,
    NamespaceExists,
    NamespaceOfExists,
    NoOverlap,
    Op,
    ProjectHasNoRoles,
    Reads,
    Require,
    Update,
)
from icelog.projections.schema import TABULAR_COLUMN_NAMES

Hints = Mapping[str, bytes]
TABULARS = "icelog_tabulars"
DELETED_TABULARS = "icelog_deleted_tabulars"
# The columns a commit that sets no new location writes: the row update the
# one-round-trip append takes as arrays (append_rows.py).
COMMIT_COLUMNS = ("metadata_location", "metadata", "version", "updated_at")


@singledispatch
def event_rows(event: object, hints: Hints, reads: Reads) -> list[Op]:
    """The event's own rows; events without a registration change no row (name claims,
    protection, idempotency records, ...)."""
    return []


def _key(namespace: list[str]) -> str:
    return NamespaceName(tuple(namespace)).key


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


# -- projects and warehouses -------------------------------------------------------------
@event_rows.register
def _(event: Project.Created, hints: Hints, reads: Reads) -> list[Op]:
    row = {"id": str(event.originator_id), "name": event.name}
    return [Insert("icelog_projects", row | {"created_at": event.timestamp.isoformat()})]


@event_rows.register
def _(event: Project.Renamed, hints: Hints, reads: Reads) -> list[Op]:
    return [Update("icelog_projects", str(event.originator_id), {"name": event.name})]


@event_rows.register
def _(event: Project.Deleted, hints: Hints, reads: Reads) -> list[Op]:
    pid = str(event.originator_id)
    # A project is deleted only when it holds nothing, roles included (they and their
    # grants would outlive it).
    guard = Require(ProjectHasNoRoles(pid), f"the project {pid} still has roles")
    return [guard, Delete("icelog_projects", {"id": pid})]


@event_rows.register
def _(event: Warehouse.Created, hints: Hints, reads: Reads) -> list[Op]:
    row = {
        "id": str(event.originator_id),
        "project_id": str(event.project_id),
        "name": event.name,
        "storage_profile": _json(event.storage_profile),
        "delete_profile": _json(event.delete_profile),
        "status": "active",
        "created_at": event.timestamp.isoformat(),
    }
    return [Insert("icelog_warehouses", row)]


def _warehouse(event: Warehouse.Event, **values: Any) -> list[Op]:
    return [Update("icelog_warehouses", str(event.originator_id), values)]


@event_rows.register
def _(event: Warehouse.Renamed, hints: Hints, reads: Reads) -> list[Op]:
    return _warehouse(event, name=event.name)


@event_rows.register
def _(event: Warehouse.DeleteProfileChanged, hints: Hints, reads: Reads) -> list[Op]:
    return _warehouse(event, delete_profile=_json(event.delete_profile))


@event_rows.register
def _(event: Warehouse.StorageProfileChanged, hints: Hints, reads: Reads) -> list[Op]:
    return _warehouse(event, storage_profile=_json(event.storage_profile))


@event_rows.register
def _(event: Warehouse.Deleted, hints: Hints, reads: Reads) -> list[Op]:
    return [Delete("icelog_warehouses", {"id": str(event.originator_id)})]


# -- namespaces --------------------------------------------------------------------------
def _namespace_exists(warehouse_id: str, ns_key: str) -> Require:
    return Require(
        NamespaceExists(warehouse_id, ns_key), f"the namespace {ns_key!r} does not exist"
    )


@event_rows.register(Namespace.Created)
@event_rows.register(Namespace.Recreated)
def _namespace_created(
    event: Namespace.Created | Namespace.Recreated, hints: Hints, reads: Reads
) -> list[Op]:
    name = NamespaceName(tuple(event.levels))
    parent = name.parent
    ops: list[Op] = []
    if parent is not None:
        ops.append(_namespace_exists(str(event.warehouse_id), parent.key))
    row = {
        "id": str(event.originator_id),
        "warehouse_id": str(event.warehouse_id),
        "ns_key": name.key,
        "parent_key": parent.key if parent else "",
        "properties": _json(event.properties),
        "created_at": event.timestamp.isoformat(),
    }
    return [*ops, Insert("icelog_namespaces", row)]


@event_rows.register
def _(event: Namespace.PropertiesUpdated, hints: Hints, reads: Reads) -> list[Op]:
    nid = str(event.originator_id)
    hint = hints.get(properties_hint_key(event.originator_id))
    if hint is None:
        props: dict[str, str] = orjson.loads(reads.namespace_properties(nid))
        for key in event.removed:
            props.pop(key, None)
        props.update(event.updated)
        hint = orjson.dumps(props)
    return [Update("icelog_namespaces", nid, {"properties": hint.decode()})]


@event_rows.register
def _(event: Namespace.Dropped, hints: Hints, reads: Reads) -> list[Op]:
    nid = str(event.originator_id)
    guard = Require(NamespaceEmpty(nid), "the namespace is not empty")
    return [guard, Delete("icelog_namespaces", {"id": nid})]


# -- tables and views (one identifier space, told apart by kind) -------------------------
def _documented(event: Any, hints: Hints, **kind: str) -> dict[str, Any]:
    """The row of a table, view (`kind`) or function made with a metadata document: the
    one the command rendered, or the event's own. Columns in the table's order."""
    stamp = event.timestamp.isoformat()
    return {
        "id": str(event.originator_id),
        "warehouse_id": str(event.warehouse_id),
        "ns_key": _key(event.namespace),
        "name": event.name,
        **kind,
        "location": normalize_location(event.location),
        "metadata_location": event.metadata_location,
        "metadata": hints.get(event.metadata_location) or orjson.dumps(event.metadata),
        "version": event.originator_version,
        "created_at": stamp,
        "updated_at": stamp,
    }


def _overlap(warehouse_id: str | None, tid: str, location: str) -> Require:
    # Refused as a conflict: the command reloads, and its own check then answers 409.
    at = normalize_location(location)
    message = f"the location {at} overlaps another table's or view's"
    return Require(NoOverlap(warehouse_id, tid, at), message)


@event_rows.register(Table.Created)
@event_rows.register(Table.Registered)
@event_rows.register(View.Created)
@event_rows.register(View.Registered)
def _tabular_created(
    event: Table.Created | Table.Registered | View.Created | View.Registered,
    hints: Hints,
    reads: Reads,
) -> list[Op]:
    kind = "view" if isinstance(event, View.Event) else "table"
    row = _documented(event, hints, kind=kind)
    tid, wid, ns_key = row["id"], row["warehouse_id"], row["ns_key"]
    guards = [_namespace_exists(wid, ns_key), _overlap(wid, tid, event.location)]
    return [*guards, Insert(TABULARS, row)]


@event_rows.register(Table.Committed)
@event_rows.register(View.Replaced)
def _tabular_committed(
    event: Table.Committed | View.Replaced, hints: Hints, reads: Reads
) -> list[Op]:
    tid = str(event.originator_id)
    data = hints.get(event.metadata_location)
    if data is None:
        previous = orjson.loads(reads.tabular_document(tid))
        data = orjson.dumps(replay_commit(event, previous))
    ops: list[Op] = []
    location = location_set_by(event.updates)
    if location is not None:
        ops.append(_overlap(None, tid, location))
        ops.append(Update(TABULARS, tid, {"location": normalize_location(location)}))
    values = (event.metadata_location, data, event.originator_version, event.timestamp.isoformat())
    return [*ops, Update(TABULARS, tid, dict(zip(COMMIT_COLUMNS, values, strict=True)))]


def _namespace_of(table: str, tid: str, namespace: list[str]) -> Require:
    return Require(NamespaceOfExists(table, tid, _key(namespace)), "the namespace does not exist")


@event_rows.register(Table.Renamed)
@event_rows.register(View.Renamed)
def _tabular_renamed(event: Table.Renamed | View.Renamed, hints: Hints, reads: Reads) -> list[Op]:
    tid = str(event.originator_id)
    values = {
        "ns_key": _key(event.namespace),
        "name": event.name,
        "version": event.originator_version,
        "updated_at": event.timestamp.isoformat(),
    }
    return [_namespace_of(TABULARS, tid, event.namespace), Update(TABULARS, tid, values)]


@event_rows.register(Table.Dropped)
@event_rows.register(View.Dropped)
def _tabular_dropped(event: Table.Dropped | View.Dropped, hints: Hints, reads: Reads) -> list[Op]:
    return [Delete(TABULARS, {"id": str(event.originator_id)})]


@event_rows.register(Table.SoftDropped)
@event_rows.register(View.SoftDropped)
def _tabular_soft_dropped(
    event: Table.SoftDropped | View.SoftDropped, hints: Hints, reads: Reads
) -> list[Op]:
    extra = {
        "deleted_at": event.timestamp.isoformat(),
        "expires_at": _iso(event.expires_at_ms),
        "purge": int(bool(getattr(event, "purge_requested", False))),
    }
    values = {"version": event.originator_version}
    tid = str(event.originator_id)
    return [Move(TABULARS, DELETED_TABULARS, tid, TABULAR_COLUMN_NAMES, values, extra)]


@event_rows.register(Table.Undropped)
@event_rows.register(View.Undropped)
def _tabular_undropped(
    event: Table.Undropped | View.Undropped, hints: Hints, reads: Reads
) -> list[Op]:
    tid = str(event.originator_id)
    # The same columns, with the (possibly new) name and the undrop's version.
    values = {
        "ns_key": _key(event.namespace),
        "name": event.name,
        "version": event.originator_version,
        "updated_at": event.timestamp.isoformat(),
    }
    return [
        _namespace_of(DELETED_TABULARS, tid, event.namespace),
        Move(DELETED_TABULARS, TABULARS, tid, TABULAR_COLUMN_NAMES, values),
    ]


@event_rows.register(Table.Expired)
@event_rows.register(View.Expired)
def _tabular_expired(event: Table.Expired | View.Expired, hints: Hints, reads: Reads) -> list[Op]:
    return [Delete(DELETED_TABULARS, {"id": str(event.originator_id)})]


# -- functions ---------------------------------------------------------------------------
@event_rows.register
def _(event: Function.Created, hints: Hints, reads: Reads) -> list[Op]:
    row = _documented(event, hints)
    return [_namespace_exists(row["warehouse_id"], row["ns_key"]), Insert("icelog_functions", row)]


@event_rows.register
def _(event: Function.Replaced, hints: Hints, reads: Reads) -> list[Op]:
    fid = str(event.originator_id)
    data = hints.get(event.metadata_location)
    if data is None:
        previous = orjson.loads(reads.function_document(fid))
        data = orjson.dumps(
            apply_function_changes(previous, event.changes, now_ms=event.applied_at_ms)
        )
    values = (event.metadata_location, data, event.originator_version, event.timestamp.isoformat())
    return [Update("icelog_functions", fid, dict(zip(COMMIT_COLUMNS, values, strict=True)))]


@event_rows.register
def _(event: Function.Dropped, hints: Hints, reads: Reads) -> list[Op]:
    return [Delete("icelog_functions", {"id": str(event.originator_id)})]


# -- tasks -------------------------------------------------------------------------------
@event_rows.register
def _(event: Task.Scheduled, hints: Hints, reads: Reads) -> list[Op]:
    stamp = event.timestamp.isoformat()
    row = {
        "id": str(event.originator_id),
        "queue": event.queue,
        "warehouse_id": str(event.warehouse_id),
        "entity_kind": event.entity_kind,
        "entity_id": str(event.entity_id),
        "status": "pending",
        "attempt": 0,
        "max_attempts": event.max_attempts,
        "due_at_ms": event.due_at_ms,
        "worker": None,
        "last_error": None,
        "payload": _json(event.payload),
        "created_at": stamp,
        "updated_at": stamp,
    }
    return [Insert("icelog_tasks", row)]


def _task(event: Task.Event, **values: Any) -> list[Op]:
    values["updated_at"] = event.timestamp.isoformat()
    return [Update("icelog_tasks", str(event.originator_id), values)]


@event_rows.register
def _(event: Task.AttemptStarted, hints: Hints, reads: Reads) -> list[Op]:
    return _task(event, status="running", attempt=event.attempt, worker=event.worker)


@event_rows.register
def _(event: Task.AttemptAbandoned, hints: Hints, reads: Reads) -> list[Op]:
    return _task(event, status="pending", worker=None)


@event_rows.register
def _(event: Task.AttemptFailed, hints: Hints, reads: Reads) -> list[Op]:
    status = "failed" if event.final else "pending"
    return _task(
        event, status=status, due_at_ms=event.retry_at_ms, worker=None, last_error=event.error
    )


@event_rows.register
def _(event: Task.Succeeded, hints: Hints, reads: Reads) -> list[Op]:
    return _task(event, status="succeeded", worker=None, result=_json(event.result))


@event_rows.register
def _(event: Task.Cancelled, hints: Hints, reads: Reads) -> list[Op]:
    return _task(event, status="cancelled", worker=None)
