"""Read queries of access: users, roles, and the grants the authorizer and the permission
routes read (docs/auth.md)."""

from __future__ import annotations

from typing import Any

from icelog.domain.permissions import NAVIGABLE_KINDS, ObjectRef
from icelog.projections import visibility
from icelog.projections.query_base import QueryBase


class AccessQueries(QueryBase):
    """Users, roles and grants."""

    # -- users -------------------------------------------------------------------------------
    _USER_COLUMNS = "id, name, email, user_type, last_updated_with, created_at, updated_at"

    @staticmethod
    def _user(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "id": r[0], "name": r[1], "email": r[2], "user-type": r[3],
            "last-updated-with": r[4], "created-at": r[5], "updated-at": r[6],
        }  # fmt: skip

    def user(self, user_id: str) -> dict[str, Any] | None:
        r = self.row(f"SELECT {self._USER_COLUMNS} FROM icelog_users WHERE id = ?", (user_id,))
        return None if r is None else self._user(r)

    def users(
        self, *, name: str | None, ids: list[str] | None, after: tuple[str, str] | None, limit: int
    ) -> list[dict[str, Any]]:
        """Users by name, then id; `name`: a case-insensitive substring of name or e-mail."""
        where, params = [], []
        if name:
            where.append("(LOWER(name) LIKE ? OR LOWER(COALESCE(email, '')) LIKE ?)")
            pattern = "%" + name.lower().replace("\\", "").replace("%", "").replace("_", "") + "%"
            params += [pattern, pattern]
        if ids:
            where.append(f"id IN ({', '.join('?' for _ in ids)})")
            params += ids
        if after is not None:
            where.append("(name > ? OR (name = ? AND id > ?))")
            params += [after[0], after[0], after[1]]
        sql = f"SELECT {self._USER_COLUMNS} FROM icelog_users"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY name, id LIMIT ?"
        return [self._user(r) for r in self.rows(sql, (*params, limit))]

    # -- grants and roles ----------------------------------------------------------------------
    def grants_on(self, object_id: str) -> list[tuple[str, str, str]]:
        """An object's assignments: (relation, principal kind, principal id)."""
        return [
            (r[0], r[1], r[2])
            for r in self.rows(
                "SELECT relation, principal_kind, principal_id FROM icelog_grants "
                "WHERE object_id = ? ORDER BY relation, principal_kind, principal_id",
                (object_id,),
            )
        ]

    def grants_held(
        self,
        principal_ids: list[str],
        object_ids: list[str] | None = None,
        object_kind: str | None = None,
    ) -> list[tuple[str, str, str, str]]:
        """The grants the principals hold — on `object_ids` / of `object_kind` when given:
        (object kind, object id, relation, principal id). A check asks only about the
        object's chain, so an owner of 10,000 tables costs an index lookup, not 10,000 rows."""
        if not principal_ids or object_ids == []:
            return []
        marks = ", ".join("?" for _ in principal_ids)
        sql = (
            "SELECT object_kind, object_id, relation, principal_id FROM icelog_grants "
            f"WHERE principal_id IN ({marks})"
        )
        params: tuple[str, ...] = tuple(principal_ids)
        if object_ids is not None:
            sql += f" AND object_id IN ({', '.join('?' for _ in object_ids)})"
            params = (*params, *object_ids)
        if object_kind is not None:
            sql += " AND object_kind = ?"
            params = (*params, object_kind)
        return [(r[0], r[1], r[2], r[3]) for r in self.rows(sql, params)]

    def places_held(self, principal_ids: list[str]) -> tuple[set[str], set[str]]:
        """(project ids, warehouse ids) the principals hold a grant in or below — any grant
        on a project; on a warehouse and below, a `NAVIGATING` one, as `holds_below` —
        in one query whatever the number of grants (no lookup per granted object)."""
        if not principal_ids:
            return set(), set()
        marks = ", ".join("?" for _ in principal_ids)
        held, params = visibility.held(principal_ids)
        rows = self.rows(
            "SELECT g.object_kind, g.object_id FROM icelog_grants g "
            f"WHERE g.principal_id IN ({marks}) AND g.object_kind = 'project' "
            "UNION SELECT g.object_kind, g.object_id FROM icelog_grants g "
            f"WHERE {held} AND g.object_kind = 'warehouse' "
            "UNION SELECT 'warehouse', n.warehouse_id FROM icelog_grants g "
            f"JOIN icelog_namespaces n ON n.id = g.object_id WHERE {held} "
            "AND g.object_kind = 'namespace' "
            "UNION SELECT 'warehouse', t.warehouse_id FROM icelog_grants g "
            f"JOIN icelog_tabulars t ON t.id = g.object_id WHERE {held} "
            "AND g.object_kind IN ('table', 'view')",
            (*principal_ids, *params, *params, *params),
        )
        projects = {r[1] for r in rows if r[0] == "project"}
        warehouses = {r[1] for r in rows if r[0] == "warehouse"}
        if warehouses:
            found = self.rows(
                "SELECT DISTINCT project_id FROM icelog_warehouses "
                f"WHERE id IN ({', '.join('?' for _ in warehouses)})",
                tuple(sorted(warehouses)),
            )
            projects.update(str(r[0]) for r in found)
        return projects, warehouses

    def holds_below(self, principal_ids: list[str], obj: ObjectRef) -> bool:
        """Whether the principals hold a `NAVIGATING` grant inside `obj` (a project,
        warehouse or namespace; a namespace counts itself too): one query, by the grants'
        principal index."""
        if not principal_ids or obj.kind not in NAVIGABLE_KINDS:
            return False
        if obj.kind == "namespace":
            clause, params = visibility.navigable(principal_ids)
            found = self.row(
                f"SELECT 1 FROM icelog_namespaces n WHERE n.id = ? AND {clause}",
                (obj.id, *params),
            )
            return found is not None
        held, params = visibility.held(principal_ids)
        if obj.kind == "warehouse":
            where, place = "d.warehouse_id = ?", (obj.id,)
        else:
            where = (
                "d.warehouse_id IN (SELECT w.id FROM icelog_warehouses w WHERE w.project_id = ?)"
            )
            place = (obj.id,)
        sql = (
            "SELECT 1 FROM icelog_grants g JOIN icelog_namespaces d ON d.id = g.object_id "
            f"WHERE {where} AND {held} "
            "UNION ALL SELECT 1 FROM icelog_grants g JOIN icelog_tabulars d "
            f"ON d.id = g.object_id WHERE {where} AND {held}"
        )
        args: tuple[str, ...] = (*place, *params, *place, *params)
        if obj.kind == "project":  # a grant on one of its warehouses is inside it too
            sql += (
                " UNION ALL SELECT 1 FROM icelog_grants g JOIN icelog_warehouses d "
                f"ON d.id = g.object_id WHERE d.project_id = ? AND {held}"
            )
            args = (*args, obj.id, *params)
        found = self.row(f"SELECT EXISTS ({sql})", args)
        return found is not None and bool(found[0])

    _ROLE_COLUMNS = "id, project_id, name, description, created_at, updated_at"

    @staticmethod
    def _role(r: tuple[Any, ...]) -> dict[str, Any]:
        return {
            "id": r[0], "project-id": r[1], "name": r[2], "description": r[3],
            "created-at": r[4], "updated-at": r[5],
        }  # fmt: skip

    def project_role_count(self, project_id: str) -> int:
        found = self.row("SELECT count(*) FROM icelog_roles WHERE project_id = ?", (project_id,))
        return 0 if found is None else int(found[0])

    def grants_now(self, obj: ObjectRef) -> set[tuple[str, str, str]]:
        """The grants on `obj` now: (relation, principal kind, principal id)."""
        rows = self.rows(
            "SELECT relation, principal_kind, principal_id FROM icelog_grants "
            "WHERE object_id = ? AND object_kind = ?",
            (obj.id, obj.kind),
        )
        return {(r[0], r[1], r[2]) for r in rows}

    def role(self, role_id: str) -> dict[str, Any] | None:
        r = self.row(f"SELECT {self._ROLE_COLUMNS} FROM icelog_roles WHERE id = ?", (role_id,))
        return None if r is None else self._role(r)

    def roles(
        self, project_id: str, *, name: str | None, after: tuple[str, str] | None, limit: int
    ) -> list[dict[str, Any]]:
        where, params = ["project_id = ?"], [project_id]
        if name:
            where.append("LOWER(name) LIKE ?")
            params.append("%" + name.lower().replace("%", "").replace("_", "") + "%")
        if after is not None:
            where.append("(name > ? OR (name = ? AND id > ?))")
            params += [after[0], after[0], after[1]]
        sql = (
            f"SELECT {self._ROLE_COLUMNS} FROM icelog_roles WHERE {' AND '.join(where)} "
            "ORDER BY name, id LIMIT ?"
        )
        return [self._role(r) for r in self.rows(sql, (*params, limit))]
