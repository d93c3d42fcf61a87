"""The catalog as it was at a past position of the log: folded from the events, in memory.

Projects, warehouses, namespaces (with their properties), and the tables and views that
existed then, each with the metadata location it had then. Used by `GET
/management/v1/as-of` and `icelog catalog at`. The fold reads the log from the start, so
its cost grows with the position asked for (about the rebuild rate).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from domain.namespace import Namespace
from domain.project import Project
from domain.table import Table
from domain.view import View
from domain.warehouse import Warehouse


@dataclass
class _Tabular:
    kind: str
    warehouse_id: str
    namespace: tuple[str, ...]
    name: str
    metadata_location: str
    state: str = "live"  # live | soft-deleted | dropped


@dataclass
class CatalogAsOf:
    position: int = 0
    time: str | None = None
    projects: dict[str, str] = field(default_factory=dict)
    warehouses: dict[str, dict[str, Any]] = field(default_factory=dict)
    namespaces: dict[str, dict[str, Any]] = field(default_factory=dict)
    tabulars: dict[str, _Tabular] = field(default_factory=dict)

    def apply(self, position: int, event: Any) -> None:
        self.position = position
        self.time = event.timestamp.isoformat()
        agg = str(event.originator_id)
        if isinstance(event, Project.Event):
            if isinstance(event, (Project.Created, Project.Renamed)):
                self.projects[agg] = event.name
            elif isinstance(event, Project.Deleted):
                self.projects.pop(agg, None)
        elif isinstance(event, Warehouse.Event):
            if isinstance(event, Warehouse.Created):
                self.warehouses[agg] = {"name": event.name, "project-id": str(event.project_id)}
            elif isinstance(event, Warehouse.Renamed) and agg in self.warehouses:
                self.warehouses[agg]["name"] = event.name
            elif isinstance(event, Warehouse.Deleted):
                self.warehouses.pop(agg, None)
        elif isinstance(event, Namespace.Event):
            self._namespace(agg, event)
        elif isinstance(event, (Table.Event, View.Event)):
            self._tabular(agg, event)

    def _namespace(self, agg: str, event: Any) -> None:
        if isinstance(event, (Namespace.Created, Namespace.Recreated)):
            self.namespaces[agg] = {
                "warehouse-id": str(event.warehouse_id),
                "levels": tuple(event.levels),
                "properties": dict(event.properties),
            }
            return
        found = self.namespaces.get(agg)
        if found is None:
            return
        if isinstance(event, Namespace.PropertiesUpdated):
            for key in event.removed:
                found["properties"].pop(key, None)
            found["properties"].update(event.updated)
        elif isinstance(event, Namespace.Dropped):
            del self.namespaces[agg]

    def _tabular(self, agg: str, event: Any) -> None:
        if isinstance(event, (Table.Created, Table.Registered, View.Created, View.Registered)):
            self.tabulars[agg] = _Tabular(
                kind="view" if isinstance(event, View.Event) else "table",
                warehouse_id=str(event.warehouse_id),
                namespace=tuple(event.namespace),
                name=event.name,
                metadata_location=event.metadata_location,
            )
            return
        found = self.tabulars.get(agg)
        if found is None:
            return
        if isinstance(event, (Table.Committed, View.Replaced)):
            found.metadata_location = event.metadata_location
        elif isinstance(event, (Table.Renamed, View.Renamed, Table.Undropped, View.Undropped)):
            found.namespace, found.name = tuple(event.namespace), event.name
            found.state = "live"
        elif isinstance(event, (Table.SoftDropped, View.SoftDropped)):
            found.state = "soft-deleted"
        elif isinstance(event, (Table.Dropped, View.Dropped, Table.Expired, View.Expired)):
            found.state = "dropped"

    def snapshot(self, warehouse_id: str | None = None) -> dict[str, Any]:
        warehouses = []
        for wid, info in sorted(self.warehouses.items(), key=lambda kv: kv[1]["name"]):
            if warehouse_id is not None and wid != warehouse_id:
                continue
            namespaces = []
            for ns in sorted(self.namespaces.values(), key=lambda n: n["levels"]):
                if ns["warehouse-id"] != wid:
                    continue
                inside = [
                    (tid, t)
                    for tid, t in self.tabulars.items()
                    if t.warehouse_id == wid
                    and t.namespace == ns["levels"]
                    and t.state != "dropped"
                ]
                namespaces.append(
                    {
                        "namespace": list(ns["levels"]),
                        "properties": ns["properties"],
                        **{
                            f"{kind}s": [
                                {
                                    "name": t.name,
                                    "id": tid,
                                    "metadata-location": t.metadata_location,
                                    **({"soft-deleted": True} if t.state == "soft-deleted" else {}),
                                }
                                for tid, t in sorted(inside, key=lambda x: x[1].name)
                                if t.kind == kind
                            ]
                            for kind in ("table", "view")
                        },
                    }
                )
            warehouses.append(
                {
                    "warehouse-id": wid,
                    "name": info["name"],
                    "project-id": info["project-id"],
                    "namespaces": namespaces,
                }
            )
        return {
            "position": self.position,
            "time": self.time,
            "projects": [
                {"project-id": pid, "name": name} for pid, name in sorted(self.projects.items())
            ],
            "warehouses": warehouses,
        }
