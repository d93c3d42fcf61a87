"""The versions of the catalog's history (projections/catalog_history.py): what state
each project, warehouse, namespace, table and view is in after an event, dispatched on
the event's class."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import singledispatch
from typing import Any

import orjson

from icelog.domain.identifiers import SEPARATOR
from icelog.domain.namespace import Namespace
from icelog.domain.project import Project
from icelog.domain.table import Table
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse

# Kinds, in the order a warehouse's rows sort: the warehouse, then per namespace the
# namespace, its tables, its views. Projects sort under the empty warehouse id.
PROJECT, WAREHOUSE, NAMESPACE, TABLE, VIEW = 0, 1, 2, 3, 4
LIVE, SOFT_DELETED, DROPPED = "live", "soft-deleted", "dropped"


def ns_key(levels: Sequence[str]) -> str:
    """Namespace levels as one sortable text: levels never contain the separator."""
    return SEPARATOR.join(levels)


def ns_levels(key: str) -> list[str]:
    return key.split(SEPARATOR) if key else []


@dataclass
class Version:
    """One state of one entity, visible from `from_position` until `to_position`."""

    entity_id: str
    from_position: int
    kind: int
    warehouse_id: str
    ns_key: str
    name: str
    state: str = LIVE
    properties: str | None = None  # namespaces: JSON object
    project_id: str | None = None  # warehouses
    to_position: int | None = None
    metadata_location: str | None = None  # tables and views, as read at a position
    stored: bool = False  # already a row: ending it is an UPDATE

    @property
    def key(self) -> tuple[str, str, int, str, str, int]:
        return (
            self.warehouse_id,
            self.ns_key,
            self.kind,
            self.name,
            self.entity_id,
            self.from_position,
        )

    def visible_at(self, position: int) -> bool:
        return self.from_position <= position and (
            self.to_position is None or self.to_position > position
        )

    def row(self) -> tuple[Any, ...]:
        return (*self.key, self.to_position, self.state, self.properties, self.project_id)


def version_from_row(row: Sequence[Any]) -> Version:
    """A row of `_COLUMNS` (and, when selected, the metadata location after them)."""
    return Version(
        warehouse_id=row[0],
        ns_key=row[1],
        kind=int(row[2]),
        name=row[3],
        entity_id=row[4],
        from_position=int(row[5]),
        to_position=None if row[6] is None else int(row[6]),
        state=row[7],
        properties=row[8],
        project_id=row[9],
        metadata_location=row[10] if len(row) > 10 else None,
        stored=True,
    )


UNCHANGED = object()  # an event that leaves its entity's current version as it is
_TABULAR_MADE = (Table.Created, Table.Registered, View.Created, View.Registered)
_TABULAR_MOVED = (Table.Committed, View.Replaced)
_TABULAR_PLACED = (Table.Renamed, View.Renamed, Table.Undropped, View.Undropped)
_TABULAR_SOFT_DROPPED = (Table.SoftDropped, View.SoftDropped)
_TABULAR_ENDED = (Table.Dropped, View.Dropped, Table.Expired, View.Expired)
TABULAR_LOCATED = _TABULAR_MADE + _TABULAR_MOVED  # events that carry a metadata location
# The events that make a new version (or end one): their entity's current one is loaded.
VERSIONED = (
    Project.Created,
    Project.Renamed,
    Project.Deleted,
    Warehouse.Created,
    Warehouse.Renamed,
    Warehouse.Deleted,
    Namespace.Created,
    Namespace.Recreated,
    Namespace.PropertiesUpdated,
    Namespace.Dropped,
    *_TABULAR_MADE,
    *_TABULAR_PLACED,
    *_TABULAR_SOFT_DROPPED,
    *_TABULAR_ENDED,
)


def next_version(position: int, event: Any, current: Version | None) -> Any:
    """The entity's version after `event`: a Version, None (it ends), or UNCHANGED."""
    return _next(event, position, str(event.originator_id), current)


@singledispatch
def _next(event: object, position: int, agg: str, current: Version | None) -> Any:
    """Events without a registration make no version."""
    return UNCHANGED


@_next.register(Project.Created)
@_next.register(Project.Renamed)
def _project_named(
    event: Project.Created | Project.Renamed, position: int, agg: str, current: Version | None
) -> Any:
    return Version(agg, position, PROJECT, "", "", event.name)


@_next.register
def _(event: Project.Deleted, position: int, agg: str, current: Version | None) -> Any:
    return UNCHANGED if current is None else None


@_next.register
def _(event: Warehouse.Created, position: int, agg: str, current: Version | None) -> Any:
    return Version(agg, position, WAREHOUSE, agg, "", event.name, project_id=str(event.project_id))


@_next.register
def _(event: Warehouse.Renamed, position: int, agg: str, current: Version | None) -> Any:
    return UNCHANGED if current is None else _successor(current, position, name=event.name)


@_next.register
def _(event: Warehouse.Deleted, position: int, agg: str, current: Version | None) -> Any:
    return UNCHANGED if current is None else None


@_next.register(Namespace.Created)
@_next.register(Namespace.Recreated)
def _namespace_made(
    event: Namespace.Created | Namespace.Recreated,
    position: int,
    agg: str,
    current: Version | None,
) -> Any:
    properties = orjson.dumps(dict(event.properties)).decode()
    warehouse = str(event.warehouse_id)
    key = ns_key(event.levels)
    return Version(agg, position, NAMESPACE, warehouse, key, "", properties=properties)


@_next.register
def _(event: Namespace.PropertiesUpdated, position: int, agg: str, current: Version | None) -> Any:
    if current is None:
        return UNCHANGED
    properties = orjson.loads(current.properties or "{}")
    for key in event.removed:
        properties.pop(key, None)
    properties.update(event.updated)
    return _successor(current, position, properties=orjson.dumps(properties).decode())


@_next.register
def _(event: Namespace.Dropped, position: int, agg: str, current: Version | None) -> Any:
    return UNCHANGED if current is None else None


@_next.register(Table.Created)
@_next.register(Table.Registered)
@_next.register(View.Created)
@_next.register(View.Registered)
def _tabular_made(event: Any, position: int, agg: str, current: Version | None) -> Any:
    kind = VIEW if isinstance(event, View.Event) else TABLE
    warehouse, key = str(event.warehouse_id), ns_key(event.namespace)
    return Version(agg, position, kind, warehouse, key, event.name)


@_next.register(Table.Renamed)
@_next.register(View.Renamed)
@_next.register(Table.Undropped)
@_next.register(View.Undropped)
def _tabular_placed(event: Any, position: int, agg: str, current: Version | None) -> Any:
    if current is None:
        return UNCHANGED
    key = ns_key(event.namespace)
    return _successor(current, position, ns_key=key, name=event.name, state=LIVE)


@_next.register(Table.SoftDropped)
@_next.register(View.SoftDropped)
def _tabular_soft_dropped(event: Any, position: int, agg: str, current: Version | None) -> Any:
    return UNCHANGED if current is None else _successor(current, position, state=SOFT_DELETED)


@_next.register(Table.Dropped)
@_next.register(View.Dropped)
@_next.register(Table.Expired)
@_next.register(View.Expired)
def _tabular_ended(event: Any, position: int, agg: str, current: Version | None) -> Any:
    # Kept, not ended: the original fold let a later rename or undrop revive it.
    return UNCHANGED if current is None else _successor(current, position, state=DROPPED)


def _successor(current: Version, position: int, **changes: Any) -> Version:
    return replace(current, from_position=position, to_position=None, stored=False, **changes)
