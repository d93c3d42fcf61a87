"""Read queries of projects and warehouses."""

from __future__ import annotations

from typing import Any

import orjson

from icelog.projections.query_base import QueryBase


class WarehouseQueries(QueryBase):
    """Projects and warehouses."""

    # -- projects and warehouses -------------------------------------------------------------
    def projects(self) -> list[dict[str, str]]:
        return [
            {"project-id": r[0], "project-name": r[1]}
            for r in self.rows("SELECT id, name FROM icelog_projects ORDER BY name, id")
        ]

    def project(self, project_id: str) -> dict[str, str] | None:
        r = self.row("SELECT id, name FROM icelog_projects WHERE id = ?", (project_id,))
        return {"project-id": r[0], "project-name": r[1]} if r else None

    _WAREHOUSE = (
        "SELECT id, project_id, name, storage_profile, delete_profile, status "
        "FROM icelog_warehouses"
    )

    @staticmethod
    def _warehouse(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "id": r[0],
            "warehouse-id": r[0],
            "project-id": r[1],
            "name": r[2],
            "storage-profile": orjson.loads(r[3]),
            "delete-profile": orjson.loads(r[4]),
            "status": r[5],
        }

    def warehouses(self, project_id: str) -> list[dict[str, Any]]:
        rows = self.rows(self._WAREHOUSE + " WHERE project_id = ? ORDER BY name", (project_id,))
        return [self._warehouse(r) for r in rows]

    def live_warehouse_profiles(self) -> dict[str, dict[str, Any]]:
        """Every live warehouse's storage profile by id, in every project."""
        rows = self.rows("SELECT id, storage_profile FROM icelog_warehouses")
        return {str(r[0]): orjson.loads(r[1]) for r in rows}

    def warehouse(self, warehouse_id: str) -> dict[str, Any] | None:
        r = self.row(self._WAREHOUSE + " WHERE id = ?", (warehouse_id,))
        return self._warehouse(r) if r else None

    def warehouse_by_name(self, project_id: str, name: str) -> dict[str, Any] | None:
        r = self.row(self._WAREHOUSE + " WHERE project_id = ? AND name = ?", (project_id, name))
        return self._warehouse(r) if r else None
