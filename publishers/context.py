"""Which warehouse, project, namespace and name an event belongs to, as of that event.

Most events do not repeat where their aggregate lives (a commit names only its table).
The relay reads the log in order, so it keeps a small directory from the events it
passes (creations, renames, undrops). When it meets an aggregate it has not seen — it
started mid-log — it loads that aggregate as of the event's version once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import singledispatchmethod
from typing import Any
from uuid import UUID

from icelog.domain.claims import NameClaim
from icelog.domain.function import Function
from icelog.domain.grants import Grants
from icelog.domain.namespace import Namespace
from icelog.domain.project import Project
from icelog.domain.role import Role
from icelog.domain.table import Table
from icelog.domain.task import Task
from icelog.domain.user import User
from icelog.domain.view import View
from icelog.domain.warehouse import Warehouse
from icelog.publishers.cloud_events import EventContext

# (aggregate id, version) → the aggregate as of that version, or None when it is unknown.
LoadAt = Callable[[UUID, int], Any]

_MAX_ENTRIES = 200_000
_LATEST = 2**62  # a version beyond any aggregate's: load it as it is now


@dataclass(frozen=True)
class _Place:
    warehouse_id: UUID | None
    namespace: tuple[str, ...] | None
    name: str | None


class ContextResolver:
    def __init__(self, load_at: LoadAt) -> None:
        self._load_at = load_at
        self._places: OrderedDict[UUID, _Place] = OrderedDict()
        self._projects: dict[UUID, UUID] = {}  # warehouse → project (never changes)
        self._warehouse_names: dict[UUID, str] = {}
        self._names: dict[UUID, str] = {}  # project and name-claim names (rarely change)

    def _remember(self, aggregate_id: UUID, place: _Place) -> _Place:
        self._places[aggregate_id] = place
        self._places.move_to_end(aggregate_id)
        while len(self._places) > _MAX_ENTRIES:
            self._places.popitem(last=False)
        return place

    def _loaded(self, event: Any) -> Any:
        return self._load_at(event.originator_id, event.originator_version)

    def _project_of(self, warehouse_id: UUID | None) -> UUID | None:
        if warehouse_id is None:
            return None
        known = self._projects.get(warehouse_id)
        if known is None:
            warehouse = self._load_at(warehouse_id, 1)
            if isinstance(warehouse, Warehouse):
                known = self._projects[warehouse_id] = warehouse.project_id
        return known

    def resolve(self, event: Any) -> EventContext:
        context = self._resolve(event)
        return replace(
            context, project_id=context.project_id or self._project_of(context.warehouse_id)
        )

    # One method per event family, chosen by the event's class: the families are the
    # aggregates' `Event` bases, so every event of an aggregate lands in its family's method.
    @singledispatchmethod
    def _resolve(self, event: Any) -> EventContext:
        return EventContext(subject=str(event.originator_id))

    @_resolve.register(Table.Event)
    @_resolve.register(View.Event)
    @_resolve.register(Function.Event)
    def _tabular(self, event: Any) -> EventContext:
        place = self._tabular_place(event)
        subject = ".".join([*(place.namespace or ()), place.name or ""]).strip(".")
        return EventContext(
            warehouse_id=place.warehouse_id,
            tabular_id=event.originator_id,
            namespace=place.namespace,
            name=place.name,
            subject=subject or None,
        )

    @_resolve.register
    def _namespace(self, event: Namespace.Event) -> EventContext:
        place = self._namespace_place(event)
        return EventContext(
            warehouse_id=place.warehouse_id,
            namespace=place.namespace,
            subject=".".join(place.namespace or ()) or None,
        )

    @_resolve.register
    def _warehouse(self, event: Warehouse.Event) -> EventContext:
        agg_id: UUID = event.originator_id
        name = getattr(event, "name", None) or self._warehouse_names.get(agg_id)
        project = getattr(event, "project_id", None)
        if name is None or (project is None and agg_id not in self._projects):
            loaded = self._loaded(event)
            if isinstance(loaded, Warehouse):
                name, project = loaded.name, loaded.project_id
        if project is not None:
            self._projects[agg_id] = project
        if name is not None:
            self._warehouse_names[agg_id] = name
        return EventContext(warehouse_id=agg_id, name=name, subject=name)

    @_resolve.register
    def _project(self, event: Project.Event) -> EventContext:
        name = self._name_of(event, Project)
        return EventContext(project_id=event.originator_id, name=name, subject=name)

    @_resolve.register
    def _task(self, event: Task.Event) -> EventContext:
        warehouse_id = getattr(event, "warehouse_id", None)
        entity = getattr(event, "entity_id", None)
        if warehouse_id is None:
            loaded = self._loaded(event)
            if isinstance(loaded, Task):
                warehouse_id, entity = loaded.warehouse_id, loaded.entity_id
        return EventContext(
            warehouse_id=warehouse_id, tabular_id=entity, subject=str(event.originator_id)
        )

    @_resolve.register
    def _user(self, event: User.Event) -> EventContext:
        return EventContext(subject=event.user_id)

    @_resolve.register
    def _grants(self, event: Grants.Event) -> EventContext:
        return EventContext(subject=f"{event.object_kind}:{event.object_id}")

    @_resolve.register
    def _role(self, event: Role.Event) -> EventContext:
        return EventContext(subject=self._name_of(event, Role) or str(event.originator_id))

    @_resolve.register
    def _name_claim(self, event: NameClaim.Event) -> EventContext:
        return EventContext(subject=self._name_of(event, NameClaim) or str(event.originator_id))

    def warehouse_name(self, warehouse_id: UUID | None) -> str | None:
        """A warehouse's name: the last one the log showed on the way, else the one it has
        now (a warehouse that no longer loads: None)."""
        if warehouse_id is None:
            return None
        name = self._warehouse_names.get(warehouse_id)
        if name is None:
            loaded = self._load_at(warehouse_id, _LATEST)
            if isinstance(loaded, Warehouse):
                name = self._warehouse_names[warehouse_id] = loaded.name
        return name

    def place_of(
        self, kind: str, object_id: str
    ) -> tuple[UUID | None, tuple[str, ...] | None, str | None]:
        """(warehouse, namespace levels, name) of a warehouse, namespace, table or view by its
        id — what a grant on it belongs to — from what the log showed so far, else from the
        aggregate (an object never moves to another warehouse)."""
        try:
            agg_id = UUID(object_id)
        except ValueError:
            return None, None, None
        if kind == "warehouse":
            return agg_id, None, None
        if kind not in ("namespace", "table", "view"):
            return None, None, None
        known = self._places.get(agg_id)
        if known is None:
            loaded = self._load_at(agg_id, _LATEST)
            if loaded is None:
                return None, None, None
            levels = getattr(loaded, "levels", None) or getattr(loaded, "namespace", None)
            known = _Place(
                getattr(loaded, "warehouse_id", None),
                tuple(levels) if levels is not None else None,
                getattr(loaded, "name", None) if kind != "namespace" else None,
            )
        return known.warehouse_id, known.namespace, known.name

    def _name_of(self, event: Any, cls: type) -> str | None:
        """The name an event carries, else the one last seen, else its aggregate's then."""
        agg_id: UUID = event.originator_id
        name = getattr(event, "name", None)
        if name is None:
            name = self._names.get(agg_id)
        if name is None:
            loaded = self._loaded(event)
            name = getattr(loaded, "name", None) if isinstance(loaded, cls) else None
        if isinstance(name, str):
            self._names[agg_id] = name
            if len(self._names) > _MAX_ENTRIES:
                self._names.clear()
            return name
        return None

    def _tabular_place(self, event: Any) -> _Place:
        agg_id: UUID = event.originator_id
        created = (Table.Created, Table.Registered, View.Created, View.Registered, Function.Created)
        if isinstance(event, created):
            return self._remember(
                agg_id, _Place(event.warehouse_id, tuple(event.namespace), event.name)
            )
        known = self._places.get(agg_id)
        if isinstance(event, (Table.Renamed, View.Renamed, Table.Undropped, View.Undropped)):
            warehouse_id = known.warehouse_id if known else None
            if warehouse_id is None:
                loaded = self._loaded(event)
                warehouse_id = getattr(loaded, "warehouse_id", None)
            return self._remember(agg_id, _Place(warehouse_id, tuple(event.namespace), event.name))
        if known is not None:
            return known
        loaded = self._loaded(event)
        if loaded is None:
            return _Place(None, None, None)
        return self._remember(
            agg_id,
            _Place(loaded.warehouse_id, tuple(loaded.namespace), loaded.name),
        )

    def _namespace_place(self, event: Any) -> _Place:
        agg_id: UUID = event.originator_id
        if isinstance(event, (Namespace.Created, Namespace.Recreated)):
            return self._remember(agg_id, _Place(event.warehouse_id, tuple(event.levels), None))
        known = self._places.get(agg_id)
        if known is not None:
            return known
        loaded = self._loaded(event)
        if loaded is None:
            return _Place(None, None, None)
        return self._remember(agg_id, _Place(loaded.warehouse_id, tuple(loaded.levels), None))
